"""What the planner searches: the model and GPU a question names, the t x p x d factorisations of G it can
evaluate (and, as infeasible rows, those it cannot), and the cross product of layouts and switches (micro-batch
size, schedule, ZeRO stage, recompute, sequence parallelism, offload) as flat numpy arrays, one entry per
candidate, minus combinations that are not layouts at all.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from core.errors import InputError
from core.model import presets
from core.params.memory import MAX_TP, RECOMPUTE_MODES
from core.params.planner import GPU_KEYS, MAX_SIM_P, MODEL_KEYS, SEARCH_SCHEDULES, PlannerParams
from core.pipeline.schedules import chunks_per_device
from core.planner import cp_ep, frameworks
from core.planner.columns import COLUMNS, EMPTY_DTYPES, empty_frame
from core.planner.factors import divisors
from core.planner.groups import distinct

OFFLOAD_MODES = ("none", "optimizer", "optimizer+params")


def resolve(q: PlannerParams) -> tuple[presets.ModelConfig, presets.GpuSpec, str]:
    """The model, the GPU and the precision a parameter set names (presets, or the custom fields)."""
    model = presets.chosen_model(q.model, {k: getattr(q, k) for k in MODEL_KEYS}, q.seq)
    gpu = (presets.custom_gpu({k: getattr(q, k) for k in GPU_KEYS})
           if q.gpu == "custom" else presets.gpu(q.gpu))
    precision = q.precision if q.precision != "auto" else ("bf16" if gpu.bf16 else "fp16")
    if precision in ("bf16", "fp8") and not gpu.bf16:
        raise InputError(f"precision: {gpu.name} has no BF16; choose fp16 or auto")
    if precision == "fp8" and gpu.tflops_fp8 is None:
        raise InputError(f"precision: {gpu.name} has no FP8 tensor cores; choose bf16, fp16 or auto")
    return model, gpu, precision


def tp_allowed(model: presets.ModelConfig, t: int) -> bool:
    """t splits the query heads, and the key/value heads evenly (split or replicated), as the Layout requires."""
    return _tp_allowed(model.heads, model.kv_heads, t)


def _tp_allowed(heads: int, kv_heads: int, t: int) -> bool:
    return heads % t == 0 and (kv_heads % t == 0 or t % kv_heads == 0) and t <= MAX_TP


def degrees(q: PlannerParams, model: presets.ModelConfig) -> tuple[np.ndarray, list[str]]:
    """(t, p, d) rows to consider and notes on what the search leaves out and why."""
    G, L, notes = q.gpus, model.layers, []
    if G > 3 and len(divisors(G)) == 2:
        notes.append(f"G = {G} is prime: the only layouts are pure tensor, pure pipeline or pure data parallelism.")
    ts = divisors(G)
    bad_t = [t for t in ts if not tp_allowed(model, t)]
    if bad_t and not q.fix_t:
        notes.append(f"t = {_list(bad_t)} not evaluated: t must divide the {model.heads} heads (and split the "
                     f"{model.kv_heads} key/value heads evenly); their layouts are listed as infeasible rows.")
    if q.fix_t:
        if G % q.fix_t:
            notes.append(f"The pinned t = {q.fix_t} does not divide G = {G}.")
        elif not tp_allowed(model, q.fix_t):
            notes.append(f"The pinned t = {q.fix_t} does not divide the {model.heads} heads "
                         f"({model.kv_heads} key/value heads): no tensor-parallel split exists.")
        ts = [q.fix_t] if q.fix_t in ts else []
    rows, too_deep, too_many = [], set(), set()
    for t in (t for t in ts if tp_allowed(model, t)):
        for p in divisors(G // t):
            if q.fix_p and p != q.fix_p:
                continue
            if p > L:
                too_many.add(p)
            elif p > MAX_SIM_P:
                too_deep.add(p)
            else:  # d = G / (t p cp): core.planner.cp_ep.expand splits this over cp and applies a pinned d
                rows.append((t, p, G // (t * p)))
    if too_deep:
        notes.append(f"p = {_list(sorted(too_deep))} not evaluated: the pipeline simulator handles at most "
                     f"{MAX_SIM_P} devices, and the planner reports no bubble it has not simulated (listed as "
                     "infeasible rows).")
    if too_many:
        notes.append(f"p = {_list(sorted(too_many))} not evaluated: more pipeline stages than the {L} layers "
                     "(listed as infeasible rows).")
    if q.fix_p and G % q.fix_p:
        notes.append(f"The pinned p = {q.fix_p} does not divide G = {G}.")
    expanded, more = cp_ep.expand(np.array(rows, dtype=np.int64).reshape(-1, 3), q, model)
    return expanded, notes + more


def excluded(q: PlannerParams, model: presets.ModelConfig, gpn: int, usable: float) -> pd.DataFrame:
    """The t x p x d factorisations of G the search cannot evaluate, as infeasible rows with their reason (the seed's
    project: enumerate every factorisation; show, not silently drop). Switches are the first searched value of
    each; every number the layout would need is left empty. Kept per the few inputs they depend on (an assumption
    changed on the page asks for the same rows again); each caller gets its own copy."""
    first = tuple(q.searched(k)[0] for k in ("schedule", "zero", "recompute", "offload"))
    return _excluded(q.gpus, q.batch, q.micro_batch_sizes[0], q.fix_t, q.fix_p, q.fix_d, model.layers, model.heads,
                     model.kv_heads, gpn, usable, first).copy()


@functools.lru_cache(maxsize=32)
def _excluded(G: int, B: int, b, fix_t: int, fix_p: int, fix_d: int, L: int, heads: int, kv_heads: int, gpn: int,
              usable: float, first_searched: tuple) -> pd.DataFrame:
    rows = []
    for t in divisors(G):
        for p in divisors(G // t):
            d = G // (t * p)
            if (fix_t and t != fix_t) or (fix_p and p != fix_p) or (fix_d and d != fix_d):
                continue
            if not _tp_allowed(heads, kv_heads, t):
                why = (f"t does not divide the heads: t = {t} cannot split the {heads} heads ({kv_heads} "
                       "key/value heads) evenly" if t <= MAX_TP else f"t beyond the range: t = {t} > {MAX_TP}")
            elif p > L:
                why = f"more stages than layers: p = {p} > {L} layers"
            elif p > MAX_SIM_P:
                why = (f"p beyond the simulator: p = {p} > {MAX_SIM_P} devices, and the planner reports no bubble it "
                       "has not simulated")
            else:
                continue
            crosses = (f"TP crosses servers: t = {t} > {gpn} GPUs per server",) if t > gpn else ()
            rows.append({"t": t, "p": p, "d": d, "m": B // (d * b) if B % (d * b) == 0 else 0,
                         "reasons": (why, *crosses), "tp_crosses_node": t > gpn,
                         "schedule": first_searched[0] if p > 1 else "1f1b"})
    frame = empty_frame()
    if not rows:
        return frame
    n = len(rows)
    first = dict(zip(("zero_stage", "recompute", "offload"), first_searched[1:], strict=True))
    values = {k: [r[k] for r in rows] for k in ("t", "p", "d", "m", "reasons", "schedule", "tp_crosses_node")}
    values |= {"cp": [1] * n, "ep": [1] * n, "etp": values["t"]}
    values |= {"micro_batch_size": [b] * n, "v": [1] * n, "sequence_parallel": [False] * n, "usable_bytes": usable,
               "fits": [False] * n, "feasible": [False] * n, "warnings": [()] * n, "frameworks": [()] * n,
               **{k: [x] * n for k, x in first.items()}}
    out = pd.DataFrame({k: values.get(k, np.nan) for k in COLUMNS}, index=range(n))
    return out.astype({k: frame[k].dtype for k in EMPTY_DTYPES})


def _list(values: list[int], limit: int = 8) -> str:
    shown = ", ".join(f"{v:,}" for v in values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")



def grid(q: PlannerParams, degrees: np.ndarray, model: presets.ModelConfig) -> tuple[dict, list[str]]:
    """The cross product of layouts and switches, minus combinations that are not layouts at all."""
    schedules = q.searched("schedule")
    dims = {
        "layout": np.arange(len(degrees)),
        "b": np.array(q.micro_batch_sizes),
        "schedule": np.array([SEARCH_SCHEDULES.index(s) for s in schedules]),
        "zero": np.array(q.searched("zero")),
        "recompute": np.array([RECOMPUTE_MODES.index(r) for r in q.searched("recompute")]),
        "sp": np.array(q.searched("sp")),
        "offload": np.array([OFFLOAD_MODES.index(o) for o in q.searched("offload")]),
    }
    grid = np.indices([len(v) for v in dims.values()]).reshape(len(dims), -1)
    c = {k: v[i] for (k, v), i in zip(dims.items(), grid, strict=True)}
    c["t"], c["p"], c["d"], c["cp"], c["ep"] = (degrees[c["layout"], j] for j in range(5))
    c["etp"] = cp_ep.etp_of(q, c["t"])
    notes = []
    no_pipe = {"1f1b", "gpipe"}
    keep = np.ones(c["t"].size, dtype=bool)
    keep &= ~((c["t"] == 1) & (c["sp"] != dims["sp"][0]))  # sequence parallelism is a no-op at t = 1
    c["sp"] = np.where(c["t"] == 1, False, c["sp"])
    if no_pipe & set(schedules):
        keep &= ~((c["p"] == 1) & (c["schedule"] != dims["schedule"][0]))  # p = 1: no pipeline, one row
        c["schedule"] = np.where(c["p"] == 1, SEARCH_SCHEDULES.index("1f1b"), c["schedule"])
    else:
        if (degrees[:, 1] == 1).any():
            notes.append(f"Layouts with p = 1 are left out: the pinned schedule {schedules[0]} needs a pipeline.")
        keep &= c["p"] > 1
    keep &= ~((c["offload"] >= 1) & (c["zero"] == 0))  # offload needs ZeRO >= 1
    keep &= ~((c["offload"] == 2) & (c["zero"] != 3))  # parameter offload needs ZeRO-3
    if q.offload != "none" and q.offload != "all" and not keep.any():
        notes.append(f"Offload {q.offload} needs ZeRO stage {'3' if q.offload == 'optimizer+params' else '1-3'}.")
    c = {k: v[keep] for k, v in c.items()}
    names = np.array(SEARCH_SCHEDULES)[c["schedule"]]
    c["schedule_name"] = names
    c["chunks"] = np.array([chunks_per_device(s, q.v) for s in SEARCH_SCHEDULES])[c["schedule"]]
    c["v"] = c["chunks"]
    c["recompute_name"] = np.array(RECOMPUTE_MODES)[c["recompute"]]
    c["offload_name"] = np.array(OFFLOAD_MODES)[c["offload"]]
    c["fp8"] = np.full(c["t"].size, q.precision == "fp8")  # one value for the whole plan
    # Which frameworks run each candidate depends on its setting, not on d or b: asked once per distinct setting.
    _, first, inverse = distinct([c[k] for k in ("t", "p", "zero", "schedule", "sp", "recompute", "offload", "cp",
                                                 "ep")])
    runs_on = np.empty(first.size, dtype=object)
    runs_on[:] = frameworks.which(frameworks.Setting(
        c["t"][first], c["p"][first], c["zero"][first], names[first], c["sp"][first], c["recompute_name"][first],
        c["offload_name"][first], model.kv_heads, c["cp"][first], c["ep"][first], q.precision == "fp8",
        model.is_moe or model.mla is not None))
    c["frameworks"] = runs_on[inverse]
    if q.framework != "any":
        keep = np.array([q.framework in r for r in runs_on.tolist()], dtype=bool)[inverse]
        c = {k: v[keep] for k, v in c.items()}
        notes.append(frameworks.framework(q.framework).summary())
    return c, notes

