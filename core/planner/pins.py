"""Why pinned values leave no layout: every pinned value that cannot work, with its arithmetic.

The planner's search only enumerates layouts that exist, so a contradictory pin (t x p larger than the cluster,
a schedule the chosen framework does not have) empties it without a candidate to carry a reason. These checks
name each such pin, alone and in combination, before any simulation.
"""

from __future__ import annotations

import itertools

from core.model.config import GpuSpec, ModelConfig
from core.params.memory import MAX_TP, RECOMPUTE_MODES
from core.params.planner import MAX_SIM_P, SEARCH_SCHEDULES, PlannerParams
from core.pipeline.schedules import REGISTRY
from core.planner import cp_ep, frameworks
from core.planner.factors import chunk_slots
from core.units import GB


def conflicts(q: PlannerParams, model: ModelConfig, gpu: GpuSpec, usable: float) -> list[str]:
    """Sentences, one per pinned value (or pair) that no layout can satisfy; empty when the pins are consistent."""
    out = _degrees(q, model) + _batch(q) + _chunks(q, model)
    if q.min_headroom * GB >= usable:
        out.append(f"min headroom {q.min_headroom:,g} GB >= the {usable / GB:,.1f} GB usable per GPU "
                   f"({gpu.name}, after the reserve): no layout can leave that much free")
    out += _switches(q)
    if q.framework != "any":
        out += _framework(q)
    return out


def _degrees(q: PlannerParams, model: ModelConfig) -> list[str]:
    G, t, p, d = q.gpus, q.fix_t, q.fix_p, q.fix_d
    out = []
    for name, x in (("t", t), ("p", p), ("d", d)):
        if x and x > G:
            out.append(f"{name} = {x:,} > {G:,} GPUs")
        elif x and G % x:
            out.append(f"{name} = {x:,} does not divide {G:,} GPUs ({G:,} / {x:,} = {G / x:,.2f})")
    if t:
        if model.heads % t:
            out.append(f"t = {t} does not divide the {model.heads} attention heads")
        elif model.kv_heads % t and t % model.kv_heads:
            out.append(f"t = {t} neither divides nor is a multiple of the {model.kv_heads} key/value heads")
        if t > MAX_TP:
            out.append(f"t = {t} > {MAX_TP}, the largest tensor-parallel degree modelled")
    if p:
        if p > model.layers:
            out.append(f"p = {p} > the {model.layers} layers (a stage needs at least one layer)")
        if p > MAX_SIM_P:
            out.append(f"p = {p} > {MAX_SIM_P}, the most devices the pipeline simulator runs")
    cp = q.fix_cp
    searched_cp = cp_ep.cp_values(q, model)
    pinned = [(n, x) for n, x in (("t", t), ("p", p), ("d", d), ("cp", cp)) if x]
    for k in (2, 3, 4):
        for combo in itertools.combinations(pinned, k):
            names = " x ".join(n for n, _ in combo)
            values = " x ".join(f"{x:,}" for _, x in combo)
            product = 1
            for _, x in combo:
                product *= x
            which = {n for n, _ in combo}
            if which >= {"t", "p", "d"} and (cp or searched_cp == [1]) and product != G:
                out.append(f"{names} = {values} = {product:,} != {G:,} GPUs")
            elif which == {"t", "p", "d"} and not cp and G % product == 0 and G // product not in searched_cp:
                out.append(f"{names} = {values} = {product:,} leaves cp = {G // product:,}, which the cp search "
                           f"({', '.join(map(str, searched_cp))}) does not cover: pin cp")
            elif k < 4 and product > G:
                out.append(f"{names} = {values} = {product:,} > {G:,} GPUs")
            elif k == 2 and G % product and len(pinned) == 2:
                out.append(f"{names} = {values} = {product:,} does not divide {G:,} GPUs")
    out += _cp_ep(q, model)
    if d and d > q.batch:
        out.append(f"d = {d:,} > the global batch of {q.batch:,} sequences (each replica needs one)")
    return out


def _cp_ep(q: PlannerParams, model: ModelConfig) -> list[str]:
    """Pinned cp / ep that break core.planner.cp_ep_rules whatever the other degrees are."""
    out = []
    if q.fix_cp > 1 and model.seq % (2 * q.fix_cp):
        out.append(f"cp = {q.fix_cp}: the sequence of {model.seq:,} tokens does not split into 2 x cp = "
                   f"{2 * q.fix_cp} chunks (Megatron's load-balanced context parallelism)")
    if q.fix_ep > 1 and not model.is_moe:
        out.append(f"ep = {q.fix_ep}: {model.name} is dense, there are no experts to spread")
    elif q.fix_ep and model.is_moe and model.moe.experts % q.fix_ep:
        out.append(f"ep = {q.fix_ep} does not divide the {model.moe.experts} experts")
    if q.fix_ep and q.fix_ep * (q.fix_etp or 1) > q.gpus:
        out.append(f"ep x expert-tp = {q.fix_ep * (q.fix_etp or 1):,} > {q.gpus:,} GPUs")
    return out


def _chunks(q: PlannerParams, model: ModelConfig) -> list[str]:
    if q.schedule == "all" or REGISTRY[q.schedule].chunks == "1" or not q.fix_p:
        return []
    v = REGISTRY[q.schedule].chunks_per_device(q.v or 2)  # v = 0 searches the depths; 2 is the shallowest
    if q.fix_p * v > chunk_slots(model.layers, q.fix_p, v):
        return [f"{q.schedule}: p x v = {q.fix_p} x {v} = {q.fix_p * v} chunks > the {model.layers} layers"]
    return []


def _batch(q: PlannerParams) -> list[str]:
    if not q.fix_d:
        return []
    d, B = q.fix_d, q.batch
    bad = [b for b in q.micro_batch_sizes if B % (d * b)]
    if bad and len(bad) == len(q.micro_batch_sizes):
        shown = ", ".join(f"d x b = {d:,} x {b} = {d * b:,}" for b in bad[:3])
        return [f"the global batch {B:,} is not a multiple of {shown}"]
    return []


def _switches(q: PlannerParams) -> list[str]:
    out = []
    zero = None if q.zero == "all" else int(q.zero)
    if q.offload in ("optimizer", "optimizer+params") and zero == 0:
        out.append(f"offload {q.offload} needs ZeRO stage 1 or more, ZeRO is pinned to 0")
    if q.offload == "optimizer+params" and zero not in (None, 3):
        out.append(f"offload optimizer+params needs ZeRO-3, ZeRO is pinned to {zero}")
    if _needs_pipeline(q.schedule) and q.fix_p == 1:
        out.append(f"schedule {q.schedule} needs a pipeline, p is pinned to 1")
    return out


def _framework(q: PlannerParams) -> list[str]:
    """Pinned switches the chosen framework refuses whatever the unpinned dimensions are, then the pins together."""
    f = frameworks.framework(q.framework)
    ps = [q.fix_p] if q.fix_p else ([2] if _needs_pipeline(q.schedule) else [1, 2])
    ts = [q.fix_t] if q.fix_t else [1, 2]
    pinned = {k: q.searched(k)[0] for k in _SWITCHES if getattr(q, k) != "all"}
    out = []
    for key, value in pinned.items():
        free = {k: (value,) if k == key else everything for k, everything in _SWITCHES.items()}
        if not _any_runs(f, ts, ps, free):
            reasons = f.refusals(frameworks.Setting(ts[-1], ps[-1], **{**_SAFE, key: value}))
            out.append(next((r for r in reasons if _WORD[key] in r), reasons[0]))
    together = {k: (pinned[k],) if k in pinned else q.searched(k) for k in _SWITCHES}
    if not out and pinned and not _any_runs(f, ts, ps, together):
        values = {k: v[0] for k, v in together.items()}
        out.append("together: " + "; ".join(f.refusals(frameworks.Setting(ts[-1], ps[-1], **values), cite=False)))
    return out


_SWITCHES = {"zero": (0, 1, 2, 3), "schedule": SEARCH_SCHEDULES, "sp": (False, True), "recompute": RECOMPUTE_MODES,
             "offload": ("none", "optimizer", "optimizer+params")}
_WORD = {"zero": "ZeRO", "schedule": "schedule", "sp": "sequence", "recompute": "recompute", "offload": "offload"}
_SAFE = {"zero": 0, "schedule": "1f1b", "sp": False, "recompute": "none", "offload": "none"}


def _needs_pipeline(schedule: str) -> bool:
    """A pinned schedule that p = 1 cannot run (only a one-stage schedule is plain gradient accumulation there)."""
    return schedule != "all" and not REGISTRY[schedule].search.one_stage


def _any_runs(f: frameworks.Framework, ts, ps, grid: dict) -> bool:
    return any(not f.refusals(frameworks.Setting(t, p, **dict(zip(grid, combo, strict=True))), cite=False)
               for t, p in itertools.product(ts, ps) for combo in itertools.product(*grid.values()))
