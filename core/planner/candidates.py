"""What the planner searches: the model and GPU a question names and the t x p x d factorisations of G it can
evaluate (and, as infeasible rows, those it cannot); core.planner.grid crosses them with the switches.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from core.errors import InputError
from core.model import presets
from core.params.memory import MAX_TP
from core.params.planner import GPU_KEYS, MAX_SIM_P, MODEL_KEYS, PlannerParams
from core.planner import cp_ep
from core.planner.columns import COLUMNS, EMPTY_DTYPES, empty_frame, timing
from core.planner.factors import divisors
from core.planner.grid import OFFLOAD_MODES

__all__ = ["OFFLOAD_MODES", "degrees", "excluded", "resolve", "tp_allowed"]


def resolve(q: PlannerParams) -> tuple[presets.ModelConfig, presets.GpuSpec, str]:
    """The model, the GPU and the precision a parameter set names (presets, or the custom fields)."""
    flash = None if q.flash == "auto" else q.flash == "true"
    model = presets.chosen_model(q.model, {k: getattr(q, k) for k in MODEL_KEYS}, q.seq, flash, q.depth)
    if q.dropout != "auto" and (q.dropout == "true") != model.dropout:
        model = replace(model, dropout=q.dropout == "true")
    gpu = presets.chosen_gpu(q.gpu, {k: getattr(q, k) for k in GPU_KEYS if k != "calibration"}, q.calibration)
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
    return _excluded(_Outside(q.gpus, q.batch, q.micro_batch_sizes[0], q.fix_t, q.fix_p, q.fix_d, model.layers,
                              model.heads, model.kv_heads, gpn, usable, first)).copy()


@dataclass(frozen=True)
class _Outside:
    """The few inputs the excluded rows depend on (the cache key)."""

    G: int
    B: int
    b: int
    fix_t: int
    fix_p: int
    fix_d: int
    L: int
    heads: int
    kv_heads: int
    gpn: int
    usable: float
    first_searched: tuple


@functools.lru_cache(maxsize=32)
def _excluded(key: _Outside) -> pd.DataFrame:
    G, B, b, fix_t, fix_p, fix_d, L = key.G, key.B, key.b, key.fix_t, key.fix_p, key.fix_d, key.L
    heads, kv_heads, gpn, usable, first_searched = key.heads, key.kv_heads, key.gpn, key.usable, key.first_searched
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
    values |= {"cp": [1] * n, "ep": [1] * n, "etp": values["t"], "replicate": [1] * n, "recompute_layers": [0] * n}
    values["timing"] = list(timing(values["reasons"], np.zeros(n, dtype=bool)))
    values |= {"micro_batch_size": [b] * n, "v": [1] * n, "sequence_parallel": [False] * n, "usable_bytes": usable,
               "reshard": [True] * n, "tp_comm_overlap": [False] * n,
               "fits": [False] * n, "feasible": [False] * n, "warnings": [()] * n, "frameworks": [()] * n,
               **{k: [x] * n for k, x in first.items()}}
    out = pd.DataFrame({k: values.get(k, np.nan) for k in COLUMNS}, index=range(n))
    return out.astype({k: frame[k].dtype for k in EMPTY_DTYPES})


def _list(values: list[int], limit: int = 8) -> str:
    shown = ", ".join(f"{v:,}" for v in values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")
