"""Everything the Planner page shows for one question, as plain data: the page's view model.

    result = planned(PlannerParams(...))   # core.planner.plan.plan: every candidate, ranked
    view = PlanView.of(result)             # what the page draws (bounded: TOP_ROWS rows, CHART_POINTS points)
    candidates_csv(view)                   # the download, from the view's snapshot of the ranked frame (no plan)
    exports_of(q, row)                     # DeepSpeed / Megatron-LM / FSDP2 text of one row of the view

The view keeps a bounded part of the plan (the full frame can hold a few hundred thousand rows), so a cache of
views stays small: for the CSV download, the first CSV_ROWS ranked candidates as a compressed snapshot (~50 bytes
a candidate, ~5 MB at most), so the download never plans again (the command line's `plan --csv --top 0` writes
every candidate). Links from a
row to the Pipeline and ZeRO pages are mapped here (`pipeline_params`, `zero_params`) in those pages' URL keys:
the ZeRO page's inputs carry every setting that changes the row's memory, so that page shows the row's number.
"""

from __future__ import annotations

import pickle
import zlib
from dataclasses import dataclass
from typing import Any

import pandas as pd

from core.cost.step_time import COLUMN, LABELS
from core.errors import InputError
from core.frameworks import PREFERENCE
from core.memory.per_gpu import ModelMemory
from core.params.pipeline import PIPELINE
from core.params.planner import GPU_KEYS, PLAN, PlannerParams
from core.pipeline.schedules import REGISTRY
from core.planner import plan as planner
from core.planner import plan_cache
from core.planner import result as plan_result
from core.planner.exports import Export, export_all
from core.planner.rank_memory import embedding_params
from core.planner.recommend import Recommendation, recommend
from core.planner.simulation import simulated_costs

__all__ = ["BREAKDOWN_COLUMNS", "BREAKDOWN_LABELS", "EXPORT_KINDS", "Export", "PlanView", "Recommendation",
           "candidates_csv", "exports_of", "pipeline_params", "plan_view", "planned", "zero_base", "zero_params"]

BREAKDOWN_COLUMNS = COLUMN  # step-time component -> its column in the frame
BREAKDOWN_LABELS = LABELS  # step-time component -> its name in words
EXPORT_KINDS = ("deepspeed", "megatron", "fsdp")
TOP_ROWS = 1000  # candidates kept per list (the VIEW spec `rows` stops here)
CHART_POINTS = 1500  # per group (feasible, infeasible) on the chart
CSV_ROWS = 100_000  # candidates in the page's CSV download (~60 MB of CSV; its snapshot in the view ~5 MB)
KEEP = ("rank", "t", "p", "d", "cp", "ep", "etp", "replicate", "micro_batch_size", "m", "schedule", "v", "zero_stage",
        "recompute", "recompute_layers", "sequence_parallel", "offload", "memory_bytes", "model_state_bytes",
        "activation_bytes", "headroom_bytes", "fits", "bubble_fraction", "step_time_s", "timing", "tokens_per_s", "mfu",
        "tp_ratio", *COLUMN.values(), "tf", "tb", "tw", "first_stage_factor", "last_stage_factor", "feasible",
        "reasons", "warnings", "frameworks", "expert_state_bytes", "states_on_gpu_bytes", "zero3_working_bytes",
        "reshard", "tp_comm_overlap", "memory_accounting", "allocated_bytes", "reserve_bytes", "outside_bytes")


@dataclass(frozen=True)
class PlanView:
    """What the Planner page draws of one plan (a few MB at most, whatever the number of candidates)."""

    params: PlannerParams
    title: str
    seq: int  # the sequence length planned for (the preset's own when the question leaves it at 0)
    gpu_mem_bytes: float  # what memory is compared with: the device's reported memory (the label for textbook)
    usable_bytes: float
    candidates: int
    feasible: int
    simulations: int
    top: pd.DataFrame  # first TOP_ROWS candidates, ranked (infeasible after feasible)
    top_feasible: pd.DataFrame
    points: pd.DataFrame  # chart points: memory_bytes, step_time_s, mfu, feasible, rank
    recommendation: Recommendation
    exports: dict[str, Export]  # of the best feasible candidate (empty when none is feasible)
    notes: tuple[str, ...]
    zero_link_base: dict[str, Any]  # the ZeRO page's model / GPU / precision keys for this plan
    narrowed: str = ""  # what the work budget narrowed, in words (core.planner.budget), empty when nothing was
    csv_snapshot: bytes = b""  # the first CSV_ROWS ranked candidates, every column (zlib-compressed pickle)

    @classmethod
    def of(cls, result: planner.PlanResult) -> PlanView:
        q, m, g = result.params, result.model, result.gpu
        frame = result.frame[list(KEEP)]
        rec = recommend(result)
        exports = {kind: result.export(kind) for kind in EXPORT_KINDS} if rec.feasible else {}
        active = (f" ({m.params / 1e9:,.1f}B parameters, {m.params_active / 1e9:,.1f}B active per token)"
                  if m.is_moe else "")
        return cls(
            params=q,
            title=f"{m.name}{active} on {q.gpus:,} x {g.name}, global batch {q.batch:,} sequences of {m.seq:,} tokens",
            seq=int(m.seq),
            gpu_mem_bytes=g.mem_bytes if q.memory_framework == "textbook" else g.capacity_bytes,
            usable_bytes=result.usable, candidates=len(frame),
            feasible=len(result.feasible), simulations=result.simulations, top=frame.head(TOP_ROWS).copy(),
            top_feasible=frame[frame["feasible"]].head(TOP_ROWS).copy(), points=_points(frame),
            recommendation=rec, exports=exports, notes=result.notes, zero_link_base=zero_base(result),
            narrowed=result.notes[0] if result.narrowed else "", csv_snapshot=_snapshot(result.frame.head(CSV_ROWS)),
        )

    @property
    def csv_rows(self) -> int:
        """Candidates in the CSV download."""
        return min(self.candidates, CSV_ROWS)

    @property
    def best(self) -> pd.Series | None:
        return self.top_feasible.iloc[0] if self.feasible else None

    def feasible_row(self, rank: int) -> pd.Series:
        """The feasible candidate of a given rank (1 = best) among those kept; InputError outside them."""
        if not 1 <= rank <= len(self.top_feasible):
            raise InputError(f"rank {rank:,}: choose 1 to {len(self.top_feasible):,} (the feasible candidates kept)")
        return self.top_feasible.iloc[rank - 1]

    def rows(self, feasible_only: bool, count: int) -> pd.DataFrame:
        return (self.top_feasible if feasible_only else self.top).head(count)

    def breakdown_rows(self) -> pd.DataFrame:
        """The candidates the step-time breakdown draws: the feasible ones, or every one when none is."""
        return self.top_feasible if self.feasible else self.top


def _points(frame: pd.DataFrame) -> pd.DataFrame:
    """Candidates with a time and a memory, at most CHART_POINTS feasible (the best) and CHART_POINTS
    infeasible (evenly spaced through the rank order): enough to see the shape of the trade-off."""
    cols = ["memory_bytes", "step_time_s", "mfu", "feasible", "rank", "t", "p", "d", "zero_stage", "recompute"]
    drawn = frame[frame["step_time_s"].notna() & frame["memory_bytes"].notna()]
    feasible = drawn[drawn["feasible"]].head(CHART_POINTS)
    other = drawn[~drawn["feasible"]]
    if len(other) > CHART_POINTS:
        other = other.iloc[:: -(-len(other) // CHART_POINTS)]
    return pd.concat([feasible, other])[cols].reset_index(drop=True)


def planned(q: PlannerParams) -> planner.PlanResult:
    """core.planner.plan.plan: every candidate of the question, ranked (the view and the downloads read it)."""
    return planner.plan(q)


def question_route(q: PlannerParams) -> str:
    """A plan's question without the step-time assumptions, as text: the page sends plans that share it to one
    worker process (ui/shared/workers.py), whose kept structure (core.planner.plan_cache) and simulations then
    serve a slider's re-plans."""
    return repr(plan_cache.question(q))


def plan_view(q: PlannerParams) -> PlanView:
    return PlanView.of(planned(q))


def _snapshot(frame: pd.DataFrame) -> bytes:
    return zlib.compress(pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL), 1)


def candidates_csv(view: PlanView) -> str:
    """The view's candidates (the first CSV_ROWS, ranked) as CSV, every column, from its snapshot: no plan."""
    return plan_result.frame_csv(pickle.loads(zlib.decompress(view.csv_snapshot)))


def exports_of(q: PlannerParams, row: pd.Series | dict) -> dict[str, Export]:
    """DeepSpeed, Megatron-LM and FSDP2 exports of one candidate row of the question `q` (no re-planning)."""
    found = export_all(plan_result.layout_for(q, row))
    return {kind: found[plan_result.EXPORT_KINDS[kind]] for kind in EXPORT_KINDS}


def pipeline_params(row: pd.Series | dict) -> dict[str, Any]:
    """The Pipeline page's keys for this candidate's schedule, p, m (and v) with the costs the planner simulated it
    with (core.planner.simulation.simulated_costs): its forward time in milliseconds (seconds when that would not fit
    the page's range), the backward and weight-gradient times and the end stages' cost factors as rounded for
    the simulation, so the page shows the same bubble."""
    q = simulated_costs(row["schedule"], row["tf"], row["tb"], row["tw"], row["first_stage_factor"],
                        row["last_stage_factor"], row["p"])
    ms = 1e3 * float(row["tf"])
    tf = round(ms if ms <= 100.0 else ms / 1e3, 3)
    tf = float(min(max(tf, PIPELINE["tf"].lo), 100.0))

    def clip(key: str, value) -> float:
        return float(min(max(float(value), PIPELINE[key].lo), PIPELINE[key].hi))

    params = {"schedule": row["schedule"], "p": int(row["p"]), "m": int(row["m"]), "tf": tf,
              "tb": clip("tb", round(tf * float(q["tb"]), 6)), "tw": clip("tw", round(tf * float(q["tw"]), 6)),
              "first_stage": clip("first_stage", q["first"]), "last_stage": clip("last_stage", q["last"])}
    if REGISTRY[row["schedule"]].chunks == "v":
        params["v"] = int(row["v"])
    return params


def zero_base(result: planner.PlanResult) -> dict[str, Any]:
    """The ZeRO page's keys every row of a plan shares: model, GPU, precision, optimizer, the embedding-on-ends
    split, the reserve, the MoE capacity; for a custom model every shape input its memory depends on."""
    q, m = result.params, result.model
    base: dict[str, Any] = {"model": q.model, "gpu": q.gpu, "split": "embedding-on-ends",
                            "embedding": round(embedding_params(m)), "reserve_frac": q.reserve_frac,
                            "act": True, "optimizer": q.optimizer, "k": q.k, "moe_capacity": q.moe_capacity,
                            "precision": "fp8" if result.precision == "fp8" else "mixed"}
    # whose bytes: a row's own accounting replaces this (core.views.planner.zero_params); rows ruled out before their
    # memory was counted keep the plan's
    base["accounting"] = q.memory_framework if q.memory_framework != "auto" else (
        q.framework if q.framework != "any" else PREFERENCE[0])
    if q.recompute_layers:  # full recompute on the first N layers of each stage (a full-recompute row's link)
        base["recompute_layers"] = q.recompute_layers
    for key in ("grad_dtype", "optimizer_dtype", "loss", "compile", "repeat_kv", "sac_attention", "grouped_gemm",
                "recompute_modules"):  # switches
        if getattr(q, key) != PLAN[key].default:
            base[key] = getattr(q, key)
    if result.assumptions.ends_in_split:  # the stages' whole layers, as the plan placed them
        base["ends_in_split"] = True
    if result.assumptions.cp_comm != "p2p":  # the whole sequence's K/V gathered: its buffers
        base["cp_comm"] = result.assumptions.cp_comm
    if q.model == "custom" or q.depth:  # a preset at another depth opens as the custom model it is
        mem = ModelMemory.of(m)
        base |= {"model": "custom", "params": round(m.params), "hidden": m.hidden, "heads": m.heads,
                 "kv_heads": m.kv_heads, "layers": m.layers, "ffn": m.ffn, "mlp": m.mlp, "vocab": m.vocab,
                 "tied": m.tied, "flash": m.flash_attention,
                 "block_params": round(mem.layer_params), "largest_layer": round(mem.largest_module), "seq": m.seq}
        if m.decoupled_heads:
            base["head_dim"] = m.head_dim
        for key, on in (("parallel", m.parallel_block), ("qk_norm", m.qk_norm)):  # the block's kept tensors
            if on:
                base[key] = True
        if m.mtp_layers:
            base |= {"mtp_layers": m.mtp_layers, "mtp_params": round(mem.mtp_dense)}
        if m.is_moe:
            base |= {"expert_params": round(m.expert_params), "experts": m.moe.experts, "top_k": m.moe.top_k,
                     "shared_experts": m.moe.shared, "expert_ffn": m.moe.expert_ffn, "dense_layers": m.moe.first_dense}
        if m.mla is not None:
            base |= {"kv_lora_rank": m.mla.kv_lora_rank, "q_lora_rank": m.mla.q_lora_rank,
                     "qk_head_dim": m.mla.qk_head_dim, "qk_rope_dim": m.mla.qk_rope_dim, "v_head_dim": m.mla.v_head_dim}
    elif q.seq:
        base["seq"] = m.seq  # a preset at another length: the ZeRO page's activations use it
    g = result.gpu  # a preset with an override opens the ZeRO page on the numbers the plan used
    if q.gpu == "custom" or g.key == "custom" or any(getattr(q, k) for k in GPU_KEYS if k != "calibration"):
        base |= {"gpu": "custom", "gpu_mem": g.mem_gb, "gpus_per_node": g.gpus_per_node, "bw": g.inter_gbs}
    return base


def zero_params(row: pd.Series | dict, base: dict[str, Any]) -> dict[str, Any]:
    """The ZeRO page's keys for one candidate: N_d = d x cp (the dense weights' ZeRO group; one replica's share of it
    under hybrid sharding, whose other copies hold the same bytes), ZeRO stage, t x p,
    offload, ZeRO-3's resharding, experts over ep x etp, the micro-batch size, sequence parallelism, recompute, the
    schedule (its m and v give the micro-batches in flight) and cp: every input that changes the row's memory, so
    the page shows the row's bytes per GPU with the same parts (core.memory.per_gpu on both sides)."""
    t, etp = int(row["t"]), int(row["etp"])
    nd = int(row["d"]) * int(row["cp"]) // max(int(row.get("replicate", 1)), 1)
    return base | {"nd": nd, "stage": str(int(row["zero_stage"])), "t": t,
                   "p": int(row["p"]), "offload": row["offload"], "mb": int(row["micro_batch_size"]),
                   "sequence_parallel": bool(row["sequence_parallel"]), "recompute": row["recompute"],
                   "schedule": row["schedule"], "m": int(row["m"]), "v": int(row["v"]), "cp": int(row["cp"]),
                   "ep": int(row["ep"]), "etp": 0 if etp == t else etp, "reshard": bool(row.get("reshard", True)),
                   "recompute_layers": int(base.get("recompute_layers", 0)) if row["recompute"] == "full" else 0,
                   "tp_comm_overlap": bool(row.get("tp_comm_overlap", False))} | (
        {"accounting": row["memory_accounting"]} if isinstance(row.get("memory_accounting"), str) else {})
