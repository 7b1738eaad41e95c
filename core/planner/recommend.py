"""The plan in plain words: the recommended layout, why it beats the runners-up, what limits it, and every
assumption behind the numbers (the seed's project asks for exactly this).

Only words are made here: every number comes from the ranked frame of core.planner.plan.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.cost import flops, releases
from core.cost.step_time import COLUMN, LABELS, NOT_MODELLED, zero_volume_per_step
from core.pipeline.schedules import chunks_per_device
from core.planner import accuracy, known_runs, memory_accuracy
from core.planner.result import PlanResult
from core.units import GB

NVME_OUT_OF_SCOPE = (
    "Offload goes to CPU memory only: ZeRO-Infinity's NVMe tier is not searched, because its time depends on the "
    "node's drives (how many, their bandwidth, shared by the node's GPUs), which the GPU presets do not describe. "
    "The ZeRO page and `python -m core zero --offload nvme` size it for drives you state.")

COMPONENTS = {COLUMN[k]: LABELS[k] for k in COLUMN}  # step-time parts (they add up to the step), as named

ADVICE = {  # what to try when most candidates fail for a reason (keyed by the reason's tag)
    "does not fit": "allow ZeRO-3 or full recompute, a larger t or p, offload, more GPUs or a GPU with more memory",
    "batch does not divide": "pick a global batch that is a multiple of d x micro-batch for the layouts you want",
    "batch smaller than d": "use a larger global batch, or more tensor/pipeline parallelism so that d is smaller",
    "m < p": "use a larger global batch or a smaller micro-batch, so that each replica has at least p micro-batches",
    "TP crosses servers": "keep t within one server (pin t to at most the GPUs per server)",
    "too many micro-batches": "use a larger micro-batch size (the simulator runs at most 1,024 micro-batches)",
    "too many chunks": "use fewer interleaved chunks v or fewer pipeline stages",
    "not simulated": "narrow the search (pin t, p or the micro-batch size)",
    "t does not divide the heads": "pin t to a divisor of the attention heads",
    "more stages than layers": "use fewer pipeline stages than layers",
    "p beyond the simulator": "keep p at most 64 (more GPUs go to t or d)",
}


@dataclass(frozen=True)
class Recommendation:
    feasible: bool  # False: nothing to recommend, `why` says why and `limits` what to try
    headline: str
    layout: tuple[str, ...]  # what to run
    why: tuple[str, ...]  # against the runners-up
    limits: tuple[str, ...]  # what bounds the winner
    assumptions: tuple[str, ...]
    notes: tuple[str, ...]  # what the search left out
    roomier: tuple[str, ...] = ()  # a nearly-as-fast candidate with much more free memory, when one exists
    unusual: tuple[str, ...] = ()  # what a layout unlike the usual practice gains and risks, when it is one
    trust: tuple[str, ...] = ()  # how far off the step time was on published runs (core.planner.accuracy)
    known: tuple[str, ...] = ()  # published runs of this very question and the switches that time them as they ran

    def sections(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """(title, items) in reading order; empty sections left out."""
        titles = (("Layout", "How far to trust the step time", "Published runs of this question",
                   "Unlike the usual layout", "Nearly as fast, much more headroom", "Why it wins", "What limits it")
                  if self.feasible else ("Layout", "", "Published runs of this question", "", "",
                                         "Why no candidate is feasible", "What to try"))
        items = (self.layout, self.trust, self.known, self.unusual, self.roomier, self.why, self.limits)
        out = tuple(zip(titles, items, strict=True)) + (("Assumptions", self.assumptions),
                                                         ("Search notes", self.notes))
        return tuple((title, x) for title, x in out if x)

    def text(self) -> str:
        """Plain text (CLI --explain, the page's download)."""
        parts = [self.headline, ""]
        for title, items in self.sections():
            if items:
                parts += [f"{title}:"] + [f"  - {x}" for x in items] + [""]
        return "\n".join(parts).rstrip() + "\n"


def describe(row: pd.Series, gpn: int) -> str:
    """One line naming a candidate's layout and switches."""
    t, p, d = int(row["t"]), int(row["p"]), int(row["d"])
    where = "inside a server" if t <= gpn else "across servers"
    pipe = "no pipeline" if p == 1 else f"p = {p} {_schedule(row)}"
    sp = ", sequence parallel" if row["sequence_parallel"] else ""
    off = "" if row["offload"] == "none" else f", offload {row['offload']}"
    cp, ep = int(row.get("cp", 1)), int(row.get("ep", 1))
    d_text = f"{d} x cp = {cp}" if cp > 1 else f"{d}"
    if ep > 1:
        d_text += f" (experts over ep = {ep}, expert-tp {int(row.get('etp', t))})"
    r = int(row.get("replicate", 1))
    hybrid = f" within {d * cp // r} ranks ({r} copies: hybrid sharding)" if r > 1 else ""
    return (f"t = {t} ({where}) x {pipe} x d = {d_text}, ZeRO-{int(row['zero_stage'])}{hybrid}, micro-batch "
            f"{int(row['micro_batch_size'])} (m = {int(row['m'])}), recompute {row['recompute']}{sp}{off}")


def _schedule(row: pd.Series) -> str:
    return f"interleaved v = {int(row['v'])}" if row["schedule"] == "interleaved" else str(row["schedule"])


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %"


def recommend(result: PlanResult, runners_up: int = 3) -> Recommendation:
    """Plain words for the best feasible candidate of `result` (or why there is none)."""
    m, g, q = result.model, result.gpu, result.params
    assumptions = _assumptions(result)
    best = result.best()
    if best is None:
        return Recommendation(
            False, f"No feasible layout for {m.name} on {q.gpus:,} x {g.name} with a global batch of {q.batch:,}.",
            (), (result.why_empty(),), _advice(result), assumptions, result.notes, known=known_runs.words(q, m))
    gpn = g.gpus_per_node
    step = float(best["step_time_s"])
    headline = (f"Recommended for {m.name} on {q.gpus:,} x {g.name}, global batch {q.batch:,} sequences: "
                f"{describe(best, gpn)}.")
    margin = (f" (of it {best['margin_s']:,.2f} s is the production margin you set, {q.production_margin:g} of "
              "the modelled step)") if best["margin_s"] > 0 else ""
    layout = (
        f"Step time {step:,.2f} s{margin}, {best['tokens_per_s']:,.0f} tokens/s, MFU {100 * best['mfu']:.1f} %, HFU "
        f"{100 * best['hfu']:.1f} % ({best['tflops_per_gpu']:,.0f} TFLOP/s per GPU counting recompute; "
        f"{flops.utilization_words(result.precision)}).",
        f"Memory per GPU {best['memory_bytes'] / GB:,.1f} GB of {result.usable / GB:,.1f} GB usable, counted as "
        f"{best['memory_accounting']} stores it: model states "
        f"{best['states_on_gpu_bytes'] / GB:,.1f} GB, activations {best['activation_bytes'] / GB:,.1f} GB"
        + (f", ZeRO-3 gathered layers {best['zero3_working_bytes'] / GB:,.1f} GB"
           if best["zero3_working_bytes"] > 0 else "") + _framework_part(best)
        + f"; headroom {best['headroom_bytes'] / GB:,.1f} GB.",
        f"{len(result.feasible):,} of {len(result.frame):,} candidates are feasible; this is the fastest"
        + (", with the most memory headroom among equally fast ones." if len(result.feasible) > 1 else "."),
    )
    return Recommendation(True, headline, layout, _why(result, best, runners_up), _limits(result, best),
                          assumptions, result.notes, _roomier(result, best), unusual(result, best),
                          accuracy.load().words() + (releases.timing_note(q.release, g.calibration),)
                          + memory_accuracy.load().words(str(best["memory_accounting"])) + _pace(result, best),
                          known_runs.words(q, m))


def _framework_part(best: pd.Series) -> str:
    """What the framework adds beyond states and activations (buffers, step, allocator reserve, context), in GB."""
    extra = best["memory_bytes"] - best["states_on_gpu_bytes"] - best["activation_bytes"] - best["zero3_working_bytes"]
    if best["memory_accounting"] == "textbook" or extra <= 0:
        return ""
    return (f", the framework's buffers, optimizer-step excess, allocator reserve and CUDA context "
            f"{extra / GB:,.1f} GB")


def _pace(result: PlanResult, best: pd.Series) -> tuple[str, ...]:
    """A plan for DeepSpeed's pipeline engine timed at Megatron-LM's pace: the pace its measured runs ran at."""
    q = result.params
    if q.framework != "deepspeed" or int(best["p"]) == 1 or q.compute_stack != "megatron-lm":
        return ()
    return (f"This plan runs DeepSpeed's pipeline engine but is timed at Megatron-LM's pace. The published runs of "
            f"that engine (BLOOM, MT-NLG 530B and BigScience's Jean Zay benchmarks, Megatron-DeepSpeed of "
            f"2021-2022) ran their compute at {q.megatron_deepspeed_share:g} of it: compute_stack "
            "megatron-deepspeed times the plan at that pace.",)


NEARLY = 0.02  # "nearly as fast": at most 2 % slower than the recommendation
MUCH_MORE = 0.10  # "much more headroom": at least a tenth of the usable memory more free


def roomier(result: PlanResult, best: pd.Series, most: int = 3) -> pd.DataFrame:
    """Feasible candidates at most NEARLY slower than `best` that free at least MUCH_MORE of the usable memory
    beyond `best`'s headroom, keeping only those no faster candidate beats on headroom (the time/headroom frontier),
    fastest first, at most `most`."""
    f = result.feasible
    close = f[(f["step_time_s"] <= best["step_time_s"] * (1 + NEARLY))
              & (f["headroom_bytes"] >= best["headroom_bytes"] + MUCH_MORE * result.usable)]
    frontier = close[close["headroom_bytes"] > close["headroom_bytes"].cummax().shift(fill_value=-np.inf)]
    return frontier.head(most)


def _roomier(result: PlanResult, best: pd.Series) -> tuple[str, ...]:
    gpn, t = result.gpu.gpus_per_node, best["step_time_s"]
    return tuple(f"#{int(row['rank'])}, {describe(row, gpn)}: {100 * (row['step_time_s'] / t - 1):.1f} % slower "
                 f"({row['step_time_s']:,.2f} s) but {row['headroom_bytes'] / GB:,.1f} GB free per GPU "
                 f"instead of {best['headroom_bytes'] / GB:,.1f} GB (room for fragmentation, longer sequences or a "
                 "larger micro-batch; a minimum free memory asks for it)."
                 for _, row in roomier(result, best).iterrows())


LARGE_DP = 512  # ranks: a data-parallel group this large pays a ring latency per step of every collective


def usual(frame: pd.DataFrame, gpn: int) -> pd.DataFrame:
    """The rows of usual practice: tensor parallelism inside a server, a pipeline across servers, ZeRO-1 over a
    data-parallel group of fewer than LARGE_DP ranks."""
    return frame[(frame["t"] <= gpn) & (frame["p"] > 1) & (frame["zero_stage"] == 1)
                 & (frame["d"] * frame["cp"] < LARGE_DP)]


def unusual(result: PlanResult, best: pd.Series) -> tuple[str, ...]:
    """When the first row departs from usual practice by a very large data-parallel group or ZeRO-3: what it gains
    over the best usual row, and what it relies on (the collectives' latency share, the overlap that hides them),
    with the row's own numbers."""
    dp, zero, step = int(best["d"] * best["cp"]), int(best["zero_stage"]), float(best["step_time_s"])
    if dp < LARGE_DP and zero != 3:
        return ()
    gpn = result.gpu.gpus_per_node
    why = " and ".join(x for x in (f"a data-parallel group of {dp:,} ranks" if dp >= LARGE_DP else "",
                                   "ZeRO-3" if zero == 3 else "") if x)
    out = [f"It departs from the usual layout (TP inside a server, a pipeline across servers, ZeRO-1) by {why}."]
    alt = usual(result.feasible, gpn)
    if len(alt):
        row = alt.iloc[0]
        gap = float(row["step_time_s"]) - step
        out.append(f"Gain: {gap:,.2f} s per step ({_share(gap, float(row['step_time_s']))}) over the best usual "
                   f"layout, #{int(row['rank'])}, {describe(row, gpn)} ({float(row['step_time_s']):,.2f} s).")
    else:
        out.append("No usual layout is feasible for this question.")
    latency, total = float(best["dp_latency_s"]), float(best["dp_comm_s"])
    hidden = total - float(best["dp_exposed_s"])
    out.append(f"Risk: its data-parallel / ZeRO collectives take {total:,.2f} s per step; {latency:,.2f} s of the "
               f"exposed part ({_share(latency, step)} of the step) is latency, which grows with every rank the "
               "rings span.")
    worst = step + hidden
    than = ""
    if len(alt):
        than = ", slower than" if worst > float(alt.iloc[0]["step_time_s"]) else ", still faster than"
        than += " the usual layout"
    out.append(f"Risk: {hidden:,.2f} s of them ({_share(hidden, step)} of the step) is assumed hidden behind compute "
               f"(dp_overlap = {result.assumptions.dp_overlap:g}); if none of it hides, the step is {worst:,.2f} s"
               f"{than}.")
    return tuple(out)


def _why(result: PlanResult, best: pd.Series, count: int) -> tuple[str, ...]:
    """Against the next feasible candidates with a different t x p x d (switch variants of the winner are summed up
    in one line)."""
    feasible = result.feasible
    keys = ["t", "p", "d", "cp", "ep"]
    same = np.logical_and.reduce([feasible[k] == best[k] for k in keys])
    others = feasible[~same].drop_duplicates(keys).head(count)
    gpn = result.gpu.gpus_per_node
    out = []
    for _, row in others.iterrows():
        gap = float(row["step_time_s"] - best["step_time_s"])
        diffs = sorted(((float(row[k] - best[k]), name) for k, name in COMPONENTS.items()
                        if k != COLUMN["margin"]), key=lambda x: -abs(x[0]))  # the margin scales with the step
        parts = [f"{name} {delta:+,.2f} s" for delta, name in diffs if abs(delta) > 1e-3 * best["step_time_s"]][:3]
        text = (f"#{int(row['rank'])}, {describe(row, gpn)}: {gap:,.2f} s ({_share(gap, best['step_time_s'])}) slower"
                + (f" ({', '.join(parts)})" if parts else "") + ".")
        out.append(text)
    if not out:
        out.append("It is the only feasible t x p x d layout.")
    variants = int(same.sum()) - 1
    if variants:
        out.append(f"{variants} other switch setting(s) of the same t x p x d are also feasible (ZeRO stage, "
                   "recompute, sequence parallelism, schedule, micro-batch); they rank below it.")
    return tuple(out)


def _limits(result: PlanResult, best: pd.Series) -> tuple[str, ...]:
    step = float(best["step_time_s"])
    parts = sorted(((float(best[k]), name) for k, name in COMPONENTS.items()), reverse=True)
    parts = [(value, name) for value, name in parts if value > 1e-6 * step]
    out = [f"The busiest device computes {_share(best['compute_s'], step)} of the step. By component: "
           + ", ".join(f"{name} {value:,.2f} s ({_share(value, step)})" for value, name in parts) + "."]
    if int(best["p"]) > 1:
        out.append(f"Pipeline bubble {100 * best['bubble_fraction']:.1f} % of the timeline "
                   f"({100 * best['bubble_vs_ideal']:.1f} % relative to ideal), simulated for {best['schedule']} with "
                   f"p = {int(best['p'])}, m = {int(best['m'])}"
                   + (f", v = {int(best['v'])}" if best["schedule"] == "interleaved" else "") + ".")
    if int(best["t"]) > 1:
        out.append(f"Tensor-parallel communication / compute per layer: {best['tp_ratio']:.3f} "
                   f"(t = {int(best['t'])} over the {'server link' if not best['tp_crosses_node'] else 'network'}).")
    out.extend(_uneven(result, best))
    headroom = float(best["headroom_bytes"])
    if headroom < 0.1 * result.usable:
        out.append(f"Memory is tight: {headroom / GB:,.1f} GB of headroom.")
    if best["warnings"]:
        out.extend(best["warnings"])
    return tuple(out)


def _uneven(result: PlanResult, best: pd.Series) -> tuple[str, ...]:
    """Layers that do not divide over the stages: the even split is then a bound no framework runs as it is, and the
    placement that counts the embedding and the loss as layers is what a user would run (and time)."""
    p, layers = int(best["p"]), int(result.model.layers)
    stages = p * chunks_per_device(str(best["schedule"]), int(best["v"]))  # as checks.warnings counts them
    if p < 2 or result.assumptions.ends_in_split or layers % stages == 0:
        return ()
    return (f"{layers} layers do not split evenly over the {stages} pipeline stages: the step is timed with "
            f"{-(-layers // stages)} layers on every stage and the embedding and output layer on top of the end "
            "stages, a bound (Megatron-LM refuses the layout without an uneven split: --decoder-first-pipeline-"
            "num-layers / --decoder-last-pipeline-num-layers or --pipeline-model-parallel-layout). With "
            "ends_in_split true the end stages run one layer fewer, as --account-for-embedding-in-pipeline-split "
            "--account-for-loss-in-pipeline-split places them (the Zero Bubble paper's 1.5B model, 22 layers on "
            "8 stages: +17 % against its measured 1F1B step split evenly, -7 % so).",)


def _assumptions(result: PlanResult) -> tuple[str, ...]:
    bpp = result.bytes_per_param
    a = result.assumptions
    out = [f"{row['label']} = {_value(row['value'])}{' ' + row['unit'] if row['unit'] else ''}: {row['why']}"
           for row in a.rows(result.gpu, result.precision == "fp8")]
    out += [
        f"Model states: {bpp.param_bytes:g} + {bpp.grad_bytes:g} + K bytes per parameter, K = {bpp.k:g} "
        f"({bpp.total:g} in all; {bpp.label}, {result.precision}), ZeRO over the d data-parallel ranks (ZeRO paper "
        f"accounting); {result.split}.",
        _zero2_note(result),
        "ZeRO-3 also holds the gathered 16-bit parameters of one transformer layer plus the prefetched next one and "
        "one layer's gradients (core.memory.fsdp, wrap per block).",
        "Activations: the tensors the row's framework keeps for backward, layer by layer (core.frameworks; the "
        "textbook accounting is Korthikanti et al.'s), times the micro-batches in flight that the simulator measures "
        "on each end stage: the first stage with its own count and the embedding, the last with its own count, the "
        "output layer's inputs and the loss's logits; the worse of the two is reported.",
        "Memory counted as (column memory_accounting): a framework's accounting adds its gradient buffers, "
        "communication buckets, workspaces, the loss's peak and the caching allocator's reserve share fitted on "
        "measured peaks (docs/memory.md); the textbook accounting adds none of them.",
        f"Step time: every operation of a layer timed on the {result.gpu.name} (GEMMs by roofline and inner-dimension "
        "efficiency, memory-bound kernels at HBM bandwidth, tensor-parallel collectives as Megatron-LM issues them; "
        "core.cost.layer_ops); the pipeline simulated with those forward / backward / weight-gradient times and the "
        "first and last stage's extra work (embedding; output layer and loss) as stage cost factors.",
        f"GB = 1e9 bytes; the usable memory is the memory the {result.gpu.name} reports to PyTorch "
        f"({result.gpu.capacity_bytes / GB:.1f} GB"
        f"{'; ' + result.gpu.device_source if result.gpu.device_source else ''})"
        f" less the extra reserve {100 * a.reserve_frac:g} %; a framework's accounting counts the CUDA context and "
        "NCCL's buffers inside it.",
        NVME_OUT_OF_SCOPE,
        *NOT_MODELLED,
    ]
    return tuple(out)


def _zero2_note(result: PlanResult) -> str:
    """Where the planner departs from "stage 2 matches DDP's communication volume", with the number it changes."""
    text = ("ZeRO-2 reduce-scatters the gradients after every micro-batch (DeepSpeed's stage 2 keeps only a gradient "
            "shard, so accumulation cannot wait): with m micro-batches a rank sends (m + 1) Psi values per step (Psi = "
            "its parameters after the t x p split), not the 2 Psi of \"stage 2 matches DDP's communication volume\" "
            "(the ZeRO paper, one reduction per step); ZeRO-1 keeps DDP's 2 Psi.")
    best = result.best()
    if best is None:
        return text
    m = int(best["m"])
    return text + (f" At the recommendation's m = {m} that is {zero_volume_per_step(2, m):g} Psi, "
                   f"{zero_volume_per_step(2, m) / zero_volume_per_step(0, m):g} x DDP's.")


def _value(x) -> str:
    if isinstance(x, bool):
        return "on" if x else "off"
    return f"{x:g}" if isinstance(x, int | float) else str(x)


def _advice(result: PlanResult) -> tuple[str, ...]:
    counts = Counter(r.split(":")[0] for rs in result.frame["reasons"] for r in rs)
    return tuple(f"Most common: {tag} ({n:,}). Try: {ADVICE[tag]}." for tag, n in counts.most_common(3)
                 if tag in ADVICE)
