"""Enumerate t x p x d layouts of a model on a cluster, score every candidate, rank them, explain the losers.

    result = plan(PlannerParams(model="llama3-70b", gpu="h100-80gb", gpus=64, batch=512))
    result.frame            # one row per candidate, ranked: feasible first, fastest first, headroom breaks ties
    result.layout(row)      # a core.planner.layout.Layout for the exporters (core.planner.exports)

The planner derives no formula of its own. For each candidate it asks
- core.cost.step_time (core.cost.layer_ops, per operation) for what one device's share of the model costs per
  micro-batch in forward, backward and weight-gradient backward, and what the embedding and the output layer add
  to the first and last stage;
- the pipeline simulator (core.pipeline.schedules + core.pipeline.simulate) for the bubble and the micro-batches
  in flight on each stage, with those costs (their ratios and the end stages' cost factors, rounded so that
  candidates with nearly the same costs share one simulation, kept in a bounded cache across plans);
- core.memory (states, offload, fsdp) for model states under ZeRO over d (after the t x p split, the most
  loaded stage: the embedding on the first stage and the output layer on the last), and
  core.memory.activations for the activations of the micro-batches each end stage holds (the first stage holds
  the most, the last also keeps the fp32 logits): the worse stage is reported;
- core.cost.step_time again for the step time, its breakdown, tokens/s and MFU.

Infeasible candidates stay in the frame with their reasons (does not fit, m < p, TP crosses servers, batch does
not divide, ...); filtering them is the caller's choice. Dimensions the search cannot cover are named in
`notes` and as infeasible rows (the project's "show, not silently drop"): p above the simulator's 64 devices or
above the number of layers, t that does not divide the heads.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from core.cost import step_time
from core.errors import InputError
from core.memory import activations
from core.memory import states as memory
from core.memory.fit import usable_bytes
from core.memory.fsdp import fsdp_peak
from core.memory.offload import placement
from core.model import presets
from core.params.memory import MAX_TP, RECOMPUTE_MODES
from core.params.pipeline import MAX_OPS, PIPELINE
from core.params.planner import GPU_KEYS, MAX_SIM_P, MODEL_KEYS, SEARCH_SCHEDULES, PlannerParams
from core.pipeline.schedules import REGISTRY, build, chunks_per_device, estimated_ops
from core.pipeline.schedules.ir import Schedule
from core.pipeline.simulate import Compiled, Costs, compile_schedule, run
from core.planner import cp_ep, frameworks, pins
from core.planner.cp_ep_rules import violations
from core.planner.exports import Export, export_all
from core.planner.layout import Layout
from core.units import GB

EXPORT_KINDS = {"deepspeed": "deepspeed", "megatron": "megatron", "fsdp": "fsdp2", "fsdp2": "fsdp2", "torch": "fsdp2"}
EXPORT_FRAMEWORK = {"deepspeed": "deepspeed", "megatron": "megatron", "fsdp": "torch", "fsdp2": "torch",
                    "torch": "torch"}
OFFLOAD_MODES = ("none", "optimizer", "optimizer+params")
# Step-time components (core.cost.step_time.BREAKDOWN) as frame columns; in JSON they are one `breakdown` object.
BREAKDOWN_COLUMNS = step_time.COLUMN
JSON_KEYS = ("rank", "t", "p", "d", "cp", "ep", "etp", "zero_stage", "schedule", "v", "micro_batch_size", "m",
             "recompute", "sequence_parallel", "offload", "memory_bytes", "model_state_bytes", "states_on_gpu_bytes",
             "zero3_working_bytes", "activation_bytes", "worst_stage", "inflight", "inflight_last", "usable_bytes",
             "headroom_bytes", "fits", "bubble_fraction", "bubble_vs_ideal", "tf", "tb", "tw", "first_stage_factor",
             "last_stage_factor", "tp_ratio", "tp_crosses_node", "compute_s", "tp_exposed_s", "pp_exposed_s",
             "bubble_s", "dp_comm_s", "dp_exposed_s", "optimizer_s", "offload_s", "step_time_s", "tokens_per_s",
             "mfu", "hfu", "tflops_per_gpu", "feasible", "reasons", "warnings", "frameworks", "expert_state_bytes",
             "a2a_s", "a2a_exposed_s", "ring_s", "ring_exposed_s")

COLUMNS = ("rank", "t", "p", "d", "cp", "ep", "etp", "micro_batch_size", "m", "schedule", "v", "zero_stage",
           "recompute",
           "sequence_parallel", "offload", "memory_bytes", "model_state_bytes", "states_on_gpu_bytes",
           "zero3_working_bytes", "activation_bytes", "worst_stage", "usable_bytes", "headroom_bytes",
           "memory_fraction", "fits", "inflight", "inflight_last", "bubble_fraction", "bubble_vs_ideal", "tf", "tb",
           "tw", "first_stage_factor", "last_stage_factor", "tp_ratio", "tp_crosses_node", "compute_s",
           "gemm_s", "attention_s", "memory_bound_s", "tp_comm_s", "tp_exposed_s", "pp_exposed_s", "bubble_s",
           "dp_comm_s", "dp_exposed_s", "optimizer_s", "offload_s", "step_time_s", "tokens_per_s", "mfu", "hfu",
           "tflops_per_gpu", "feasible", "reasons", "warnings", "frameworks", "expert_state_bytes", "a2a_s",
           "a2a_exposed_s", "ring_s", "ring_exposed_s")
assert set(JSON_KEYS) <= set(COLUMNS) and set(BREAKDOWN_COLUMNS.values()) <= set(COLUMNS)
_EMPTY_DTYPES = {**dict.fromkeys(("fits", "feasible", "sequence_parallel", "tp_crosses_node"), bool),
                 **dict.fromkeys(("schedule", "recompute", "offload", "reasons", "warnings", "frameworks",
                                  "worst_stage"), object),
                 **dict.fromkeys(("t", "p", "d", "cp", "ep", "etp", "micro_batch_size", "m", "v", "zero_stage"),
                                 "int64")}

_SIM_CACHE: dict[tuple, tuple[float, ...] | str] = {}
_SIM_CACHE_MAX = 8192
_COMPILED: dict[tuple, tuple[int, bool, Schedule, Compiled] | str] = {}  # (schedule, p, m, v) -> its structure
_COMPILED_MAX = 512
# Simulation work one plan may do, in operations (building and compiling a schedule also counts SIM_SETUP_OPS):
# a few seconds at most on the 2-core development machine. Only searches over thousands of distinct keys reach it,
# and what it leaves out is named.
SIM_BUDGET = 12_000_000
SIM_SETUP_OPS = 10_000
# Simulation keys round the cost ratios (t_b / t_f, t_w / t_f) and the end stages' cost factors to these steps:
# candidates whose costs differ by less share one simulation. The planner applies the simulated makespan / busy
# ratio to each candidate's own busy time, so the rounding moves a step time by about step x bubble share.
RATIO_STEP = {False: 0.5, True: 0.1}  # schedules that do not split the backward barely depend on t_b / t_f
FACTOR_STEP = 0.02
MAX_SIM_M = int(PIPELINE["m"].hi)  # the Pipeline page's range: every reported bubble can be opened there


# ------------------------------------------------------------------------------------------------ inputs

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


def divisors(n: int) -> list[int]:
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return sorted(set(small + [n // k for k in small]))


def tp_allowed(model: presets.ModelConfig, t: int) -> bool:
    """t splits the query heads, and the key/value heads evenly (split or replicated), as the Layout requires."""
    return model.heads % t == 0 and (model.kv_heads % t == 0 or t % model.kv_heads == 0) and t <= MAX_TP


def _degrees(q: PlannerParams, model: presets.ModelConfig) -> tuple[np.ndarray, list[str]]:
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


def _excluded(q: PlannerParams, model: presets.ModelConfig, gpn: int, usable: float) -> pd.DataFrame:
    """The t x p x d factorisations of G the search cannot evaluate, as infeasible rows with their reason (the seed's
    project: enumerate every factorisation; show, not silently drop). Switches are the first searched value of
    each; every number the layout would need is left empty."""
    G, L, B, b = q.gpus, model.layers, q.batch, q.micro_batch_sizes[0]
    rows = []
    for t in divisors(G):
        for p in divisors(G // t):
            d = G // (t * p)
            if (q.fix_t and t != q.fix_t) or (q.fix_p and p != q.fix_p) or (q.fix_d and d != q.fix_d):
                continue
            if not tp_allowed(model, t):
                why = (f"t does not divide the heads: t = {t} cannot split the {model.heads} heads ({model.kv_heads} "
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
                         "schedule": q.searched("schedule")[0] if p > 1 else "1f1b"})
    frame = pd.DataFrame({k: pd.Series(dtype=_EMPTY_DTYPES.get(k, float)) for k in COLUMNS})
    if not rows:
        return frame
    n = len(rows)
    first = {"zero_stage": q.searched("zero")[0], "recompute": q.searched("recompute")[0],
             "offload": q.searched("offload")[0]}
    values = {k: [r[k] for r in rows] for k in ("t", "p", "d", "m", "reasons", "schedule", "tp_crosses_node")}
    values |= {"cp": [1] * n, "ep": [1] * n, "etp": values["t"]}
    values |= {"micro_batch_size": [b] * n, "v": [1] * n, "sequence_parallel": [False] * n, "usable_bytes": usable,
               "fits": [False] * n, "feasible": [False] * n, "warnings": [()] * n, "frameworks": [()] * n,
               **{k: [x] * n for k, x in first.items()}}
    out = pd.DataFrame({k: values.get(k, np.nan) for k in COLUMNS}, index=range(n))
    return out.astype({k: frame[k].dtype for k in _EMPTY_DTYPES})


def _list(values: list[int], limit: int = 8) -> str:
    shown = ", ".join(f"{v:,}" for v in values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


# ------------------------------------------------------------------------------------------- candidates

def _candidates(q: PlannerParams, degrees: np.ndarray, model: presets.ModelConfig) -> tuple[dict, list[str]]:
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
    runs_on = frameworks.which(c["t"], c["p"], c["zero"], names, c["sp"], c["recompute_name"], c["offload_name"],
                               model.kv_heads, c["cp"], c["ep"], q.precision == "fp8",
                               model.is_moe or model.mla is not None)
    if q.framework != "any":
        keep = np.array([q.framework in r for r in runs_on], dtype=bool)
        c = {k: v[keep] for k, v in c.items()}
        runs_on = [r for r, k in zip(runs_on, keep, strict=True) if k]
        notes.append(frameworks.framework(q.framework).summary())
    c["frameworks"] = np.empty(len(runs_on), dtype=object)
    c["frameworks"][:] = runs_on
    return c, notes


# ------------------------------------------------------------------------------------------- simulation

def _compiled(schedule: str, p: int, m: int, v: int) -> tuple[int, bool, Schedule, Compiled] | str:
    """The schedule's structure (stages, whether the last stage is on the first device, compiled dependencies),
    built once per (schedule, p, m, v), or why the simulator refuses it."""
    key = (schedule, p, m, v)
    if key not in _COMPILED:
        try:
            if estimated_ops(schedule, p, m, v) > MAX_OPS:
                raise InputError(f"{schedule} with p = {p}, m = {m} exceeds the simulator's {MAX_OPS:,} operations")
            s = build(schedule, p, m, v)
            last_device = int(np.argwhere(s.stage_map == s.num_stages - 1)[0, 0])
            out: tuple | str = (s.num_stages, last_device == 0 and p > 1, s, compile_schedule(s))
        except InputError as exc:
            out = str(exc)
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.clear()
        _COMPILED[key] = out
    return _COMPILED[key]


def simulated(schedule: str, p: int, m: int, v: int, tb: float = 2.0, tw: float = 0.0, first: float = 1.0,
              last: float = 1.0) -> tuple[float, ...] | str:
    """(idle share, bubble relative to ideal, makespan / busiest device's busy time, peak micro-batches in flight on
    the first stage's device, on the last stage's device, 1.0 if both stages share a device) for `schedule` with
    t_f = 1, t_b, t_w and the first and last global stage's cost factors, or why the simulator refuses it.

    The same engine as core.pipeline.simulate (build, compile, run), without keeping the timeline.
    """
    key = (schedule, p, m, v, tb, tw, first, last)
    if key in _SIM_CACHE:
        return _SIM_CACHE[key]
    structure = _compiled(schedule, p, m, v)
    if isinstance(structure, str):
        out: tuple | str = structure
    else:
        stages, v_shape, sched, compiled = structure
        factors = np.ones(stages)
        factors[0] *= first
        factors[-1] *= last
        tl = run(sched, Costs(1.0, tb, tw, 0.0, tuple(factors)), compiled)
        inflight = tl.peak_inflight
        last_device = 0 if v_shape else p - 1
        out = (tl.bubble_fraction, tl.bubble_vs_ideal, tl.makespan / float(tl.busy.max()), float(inflight[0]),
               float(inflight[last_device]), float(v_shape))
    if len(_SIM_CACHE) >= _SIM_CACHE_MAX:
        _SIM_CACHE.clear()
    _SIM_CACHE[key] = out
    return out


def clear_cache() -> None:
    """Forget every simulated key and compiled schedule (benchmarks measure cold runs with it)."""
    _SIM_CACHE.clear()
    _COMPILED.clear()


def simulated_costs(schedule, tf, tb, tw, first, last, p) -> dict[str, np.ndarray]:
    """The costs a candidate is simulated with, relative to its t_f: t_b / t_f and t_w / t_f (t_w folded into t_b
    where the schedule does not split the backward) and the first and last stage's cost factors, each rounded to
    RATIO_STEP / FACTOR_STEP (the factors to 1 when p = 1). The Pipeline page link carries exactly these."""
    split = np.vectorize(lambda name: REGISTRY[name].split_backward, otypes=[bool])(np.asarray(schedule))
    step = np.where(split, RATIO_STEP[True], RATIO_STEP[False])
    tf = np.maximum(np.asarray(tf, dtype=float), 1e-30)
    b = np.where(split, tb, np.asarray(tb) + np.asarray(tw)) / tf
    w = np.where(split, tw, 0.0) / tf
    single = np.asarray(p) == 1
    return {"split": split, "tb": np.maximum(np.round(b / step), 1) * step, "tw": np.round(w / step) * step,
            "first": np.where(single, 1.0, 1.0 + np.round((np.asarray(first) - 1.0) / FACTOR_STEP) * FACTOR_STEP),
            "last": np.where(single, 1.0, 1.0 + np.round((np.asarray(last) - 1.0) / FACTOR_STEP) * FACTOR_STEP)}


def _sim_codes(c: dict, costs: step_time.StageCosts) -> np.ndarray:
    """Per candidate, the integer simulation key: schedule, p, m, v, split, then simulated_costs in steps."""
    first, last = costs.factors(c["chunks"])
    q = simulated_costs(c["schedule_name"], costs.tf, costs.tb, costs.tw, first, last, c["p"])
    step = np.where(q["split"], RATIO_STEP[True], RATIO_STEP[False])
    codes = [np.round(q["tb"] / step), np.round(q["tw"] / step), np.round((q["first"] - 1.0) / FACTOR_STEP),
             np.round((q["last"] - 1.0) / FACTOR_STEP)]
    return np.stack([c["schedule"], c["p"], c["m"], c["chunks"], q["split"].astype(int), *codes],
                    axis=1).astype(np.int64)


def _key_of(code: np.ndarray) -> tuple:
    s, p, m, v, split, ib, iw, i0, il = code.tolist()
    step = RATIO_STEP[bool(split)]
    return (SEARCH_SCHEDULES[s], p, m, v, round(ib * step, 6), round(iw * step, 6), round(1.0 + i0 * FACTOR_STEP, 6),
            round(1.0 + il * FACTOR_STEP, 6))


SIM_FIELDS = ("bubble_fraction", "bubble_vs_ideal", "makespan_factor", "inflight", "inflight_last", "last_on_first")


def _simulate_all(c: dict, codes: np.ndarray, want: np.ndarray,
                  free: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """Per candidate: the simulator's numbers where `want` (simulating what the cache lacks) and where `free` if
    the cache already has them, NaN elsewhere; the simulator's refusal (or "") per candidate; and the number of
    distinct keys simulated now."""
    n = c["t"].size
    out = {k: np.full(n, np.nan) for k in SIM_FIELDS}
    refused = np.full(n, "", dtype=object)
    rows = np.flatnonzero(want | free)
    if rows.size == 0:
        return out, refused, 0
    unique, inverse = np.unique(codes[rows], axis=0, return_inverse=True)
    users = np.bincount(inverse.ravel()[want[rows]], minlength=len(unique))  # candidates that need each key
    fresh, spent = 0, 0
    values = np.full((len(unique), len(SIM_FIELDS)), np.nan)
    why = np.full(len(unique), "", dtype=object)
    for i in np.argsort(-users, kind="stable"):  # the most shared keys first, should the budget run out
        key = _key_of(unique[i])
        if key not in _SIM_CACHE:
            if not users[i]:
                continue
            spent += estimated_ops(*key[:4]) + (0 if key[:4] in _COMPILED else SIM_SETUP_OPS)
            if spent > SIM_BUDGET:
                why[i] = (f"the plan's simulation budget ({SIM_BUDGET:,} operations) is spent; pin t, p or the "
                          "micro-batch size to narrow the search")
                continue
            fresh += 1
        got = simulated(*key)
        if isinstance(got, str):
            why[i] = got
        else:
            values[i] = got
    inverse = inverse.ravel()
    for j, k in enumerate(out):
        out[k][rows] = values[inverse, j]
    refused[rows] = why[inverse]
    return out, refused, fresh


# ------------------------------------------------------------------------------------------------ memory

def embedding_params(model: presets.ModelConfig) -> float:
    """Parameters of one V x h embedding matrix (the ZeRO page's `embedding` input for the same split)."""
    return float(model.vocab * model.hidden)


def params_per_rank(model: presets.ModelConfig, t, p) -> tuple[np.ndarray, np.ndarray, str]:
    """(parameters on one GPU of the most loaded stage, parameters of one transformer layer per TP rank, the
    assumption in words). core.memory.params_per_rank's embedding-on-ends split: the V x h embedding sits on the
    first stage; the output layer (its tied copy, or an untied second matrix) on the last; tensor parallelism
    divides everything by t."""
    psi = model.dense_params  # the routed experts are placed by core.planner.cp_ep (model.params if dense)
    emb = embedding_params(model)
    matrices = 1 if model.tied else 2
    t, p = np.asarray(t), np.asarray(p)
    if emb * matrices >= psi:  # a given count smaller than the embeddings: nothing to place on the ends
        return psi / (t * p), psi / model.layers / t, "parameters split evenly over t x p (the given count " \
            "is smaller than the embeddings)"
    body = np.where((p > 1) & (not model.tied), psi - emb, psi)  # untied: the output matrix is placed, not shared
    rank = memory.params_per_rank(body, t, p, "embedding-on-ends", emb)
    layer = (psi - emb * matrices) / model.layers / t
    words = ("layers split evenly over p stages and every matrix over t; the first stage also holds the "
             f"{emb / 1e9:.3g}B-parameter embedding and the last stage the output layer "
             f"({'tied copy' if model.tied else 'untied matrix'})")
    return rank, layer, words


def _states(model, bpp, c: dict) -> dict[str, np.ndarray]:
    """Per-GPU model-state bytes (paper accounting), what stays on the GPU after offload, ZeRO-3 gathered layers."""
    kw = bpp.kwargs()
    t, p, d, zero = c["t"], c["p"], c["d"] * c["cp"], c["zero"]  # dense ZeRO group: d x cp (Megatron's dp-cp)
    psi_rank, layer, _ = params_per_rank(model, t, p)
    layer = np.broadcast_to(layer, psi_rank.shape)
    states = memory.model_states(psi_rank, d, zero, **kw).total
    on_gpu = np.array(states, dtype=float)
    for code, mode in enumerate(OFFLOAD_MODES[1:], start=1):
        sel = c["offload"] == code
        if sel.any():
            placed = placement(psi_rank[sel], d[sel], zero[sel], mode, largest_layer=layer[sel], **kw)
            on_gpu[sel] = placed.gpu_total
    working = np.zeros(t.size)
    gathered = (zero == 3) & (c["offload"] != 2)  # ZeRO-Infinity's streamed layer is in placement() already
    for tt, pp, dd in {tuple(x) for x in np.stack([t, p, d], 1)[gathered].tolist()}:
        sel = gathered & (t == tt) & (p == pp) & (d == dd)
        psi1, layer1 = float(psi_rank[sel][0]), float(layer[sel][0])
        blocks = max(1, min(math.ceil(model.layers / pp), int(psi1 // layer1)))
        peak = fsdp_peak(psi1, dd, blocks, layer1, "block", prefetch=True, **kw)
        working[sel] = peak.peak - peak.sharded
    return {"psi_rank": psi_rank, "model_state_bytes": states, "states_on_gpu_bytes": on_gpu,
            "zero3_working_bytes": working}


def _activations(model, c: dict, first_inflight: np.ndarray, last_inflight: np.ndarray, last_on_first: np.ndarray,
                 rows: np.ndarray, fp8: bool = False, capacity: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Peak activation bytes per GPU where `rows` (NaN elsewhere) and which stage holds them ("first" / "last").

    Each end stage is charged what it holds (core.memory.activations, plus core.planner.cp_ep's MoE and ring
    attention terms): the first stage its own micro-batches in flight plus the embedding's dropout mask, the last
    stage its (usually fewer) micro-batches in flight plus the output layer's inputs and the fp32 logits. A single
    stage (p = 1), or a V-shaped schedule whose last stage sits on the first device, carries both ends. Flash
    attention keeps no s x s scores: its layers are counted like selective recompute (which drops exactly that
    term), without the scores' recompute buffer.
    """
    out = np.full(c["t"].size, np.nan)
    worst = np.full(c["t"].size, None, dtype=object)
    if rows.any():
        p = c["p"][rows]
        chunks = c["chunks"][rows]
        layers_dev = np.ceil(model.layers / (p * chunks)) * chunks
        mode = c["recompute_name"][rows]
        if model.flash_attention:
            mode = np.where(mode == "none", "selective", mode)
        cp = c["cp"][rows]
        common = (model.seq, c["b"][rows], model.hidden, model.heads, layers_dev)
        tail = (c["t"][rows], c["sp"][rows], mode, model.vocab)
        both = (p == 1) | last_on_first[rows]
        first = activations.stage_bytes(*common, first_inflight[rows], *tail, first=True, last=both, cp=cp, fp8=fp8)
        last = activations.stage_bytes(*common, last_inflight[rows], *tail, first=False, last=True, cp=cp, fp8=fp8)
        first_total = first["total"] + cp_ep.extra_activations(model, c, first_inflight, rows, capacity, fp8)[rows]
        last_total = last["total"] + cp_ep.extra_activations(model, c, last_inflight, rows, capacity, fp8)[rows]
        if model.flash_attention:  # the one layer that recompute rebuilds has no scores either
            shape = (model.seq, c["b"][rows], model.hidden, model.heads, c["t"][rows], c["sp"][rows])
            scores = (activations.per_layer_bytes(*shape, "none", cp=cp, fp8=fp8)
                      - activations.per_layer_bytes(*shape, "selective", cp=cp, fp8=fp8))
            first_total, last_total = first_total - scores, last_total - scores
        last_total = np.where(both, 0.0, last_total)
        out[rows] = np.maximum(first_total, last_total)
        worst[rows] = np.where(first_total >= last_total, "first", "last")
    return out, worst


# ------------------------------------------------------------------------------------------------- plan

@dataclass(frozen=True, eq=False)
class PlanResult:
    params: PlannerParams
    model: presets.ModelConfig
    gpu: presets.GpuSpec
    precision: str
    bytes_per_param: memory.BytesPerParam
    usable: float  # bytes per GPU for states, working buffers and activations (after the reserve)
    assumptions: step_time.Assumptions
    split: str  # how the parameters are placed over t x p, in words
    frame: pd.DataFrame  # ranked candidates
    notes: tuple[str, ...]  # what the search left out, and why
    simulations: int  # distinct (schedule, p, m, v) simulated for this plan (cache misses)

    @property
    def feasible(self) -> pd.DataFrame:
        return self.frame[self.frame["feasible"]]

    def best(self) -> pd.Series | None:
        f = self.feasible
        return None if f.empty else f.iloc[0]

    def why_empty(self) -> str:
        """One paragraph: why no candidate is feasible (empty string when one is)."""
        if not self.feasible.empty:
            return ""
        pinned = self.conflicts()
        if pinned:
            return "No layout can satisfy these inputs: " + "; ".join(pinned) + "."
        if self.frame.empty:
            return "No candidate layout to evaluate with these inputs: " + (" ".join(self.notes) or "none exists.")
        counts = Counter(r.split(":")[0] for rs in self.frame["reasons"] for r in rs)
        top = "; ".join(f"{k} ({n:,} candidates)" for k, n in counts.most_common(4))
        return f"None of the {len(self.frame):,} candidates is feasible. Most common reasons: {top}."

    def conflicts(self) -> list[str]:
        """Each pinned value (or combination) that no layout satisfies, with its arithmetic."""
        return pins.conflicts(self.params, self.model, self.gpu, self.usable)

    def layout(self, row: pd.Series | int | None = None) -> Layout:
        """The Layout of a candidate (a frame row or its position in the frame; default the best feasible)."""
        if row is None:
            row = self.best()
            if row is None:
                raise InputError("no feasible candidate to export: " + self.why_empty())
        elif isinstance(row, int | np.integer):
            row = self.frame.iloc[int(row)]
        return layout_for(self.params, row, (self.model, self.gpu, self.precision))

    def export(self, kind: str, row: pd.Series | int | None = None) -> Export:
        """DeepSpeed JSON, Megatron-LM command or FSDP2 snippet of a candidate (default the best feasible)."""
        if kind not in EXPORT_KINDS:
            raise InputError(f"export: {kind[:40]!r} is not one of {', '.join(EXPORT_KINDS)}")
        return export_all(self.layout(row))[EXPORT_KINDS[kind]]

    def csv(self, top: int | None = None, feasible_only: bool = False) -> str:
        """Every column as CSV (reasons and warnings joined with '; '), in rank order."""
        frame = self.feasible if feasible_only else self.frame
        frame = (frame if top is None else frame.head(top)).copy()
        for col in ("reasons", "warnings", "frameworks"):
            frame[col] = frame[col].map("; ".join)
        frame["rank"] = frame["rank"].astype("Int64")  # 1, 2, ... (empty for infeasible), not 1.0
        return frame.to_csv(index=False)

    def records(self, top: int | None = None, feasible_only: bool = False) -> list[dict[str, Any]]:
        """JSON-ready candidates (NaN -> None), in rank order."""
        frame = self.feasible if feasible_only else self.frame
        frame = frame if top is None else frame.head(top)
        return [{**{k: _plain(r[k]) for k in JSON_KEYS},
                 "breakdown": {k: _plain(r[col]) for k, col in BREAKDOWN_COLUMNS.items()}}
                for r in frame.to_dict("records")]


def layout_for(q: PlannerParams, row: Any, resolved: tuple | None = None) -> Layout:
    """A candidate row (any mapping with the frame's columns) of the question `q` as a core.planner.layout.Layout."""
    model, gpu, precision = resolved or resolve(q)
    return Layout(model=model, gpu=gpu, t=int(row["t"]), p=int(row["p"]), d=int(row["d"]), global_batch=q.batch,
                  micro_batch_size=int(row["micro_batch_size"]), zero_stage=int(row["zero_stage"]),
                  schedule=str(row["schedule"]), v=int(row["v"]), recompute=str(row["recompute"]),
                  sequence_parallel=bool(row["sequence_parallel"]), offload=str(row["offload"]), precision=precision,
                  gpus_per_node=gpu.gpus_per_node, cp=int(row["cp"]), ep=int(row["ep"]), etp=int(row["etp"]))


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [str(x) for x in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value


def plan(q: PlannerParams) -> PlanResult:
    """Every candidate layout of the question `q`, scored and ranked."""
    model, gpu, precision = resolve(q)
    fp8 = precision == "fp8"
    a = step_time.Assumptions(**q.assumptions())
    bpp = memory.preset(q.optimizer, "mixed", q.k)
    usable = float(usable_bytes(gpu.mem_gb, 0.0, a.reserve_frac))
    degrees, notes = _degrees(q, model)
    outside = _excluded(q, model, gpu.gpus_per_node, usable)
    c, more = _candidates(q, degrees, model)
    notes += more
    n = c["t"].size
    B = q.batch
    split = params_per_rank(model, 1, 2)[2]
    if n == 0:
        return PlanResult(q, model, gpu, precision, bpp, usable, a, split, _rank(outside), tuple(notes), 0)

    # The batch split: m = B / (d b) a whole number, enough to fill the pipeline, within the simulator's range.
    per_step = c["d"] * c["b"]
    batch_ok = (B % per_step == 0) & (per_step <= B)
    c["m"] = np.where(batch_ok, B // np.maximum(per_step, 1), 0)
    min_m = np.where(c["p"] > 1, c["p"], 1)  # a pipeline that never fills is flagged, whatever the schedule
    for name in set(c["schedule_name"].tolist()):  # and what the engine itself requires (DualPipeV: 2p)
        sel = c["schedule_name"] == name
        min_m = np.where(sel, np.maximum(min_m, REGISTRY[name].min_m(c["p"])), min_m)
    fills = c["m"] >= min_m
    m_ok = c["m"] <= MAX_SIM_M
    crosses = c["t"] > gpu.gpus_per_node
    too_deep = c["p"] * c["chunks"] > model.layers

    # What one device's share of the model costs per micro-batch, operation by operation (core.cost.step_time).
    split_bwd = np.array([REGISTRY[s].split_backward for s in SEARCH_SCHEDULES])[c["schedule"]]
    costs = step_time.stage_costs(model, gpu, a, t=c["t"], p=c["p"], d=c["d"] * c["cp"], b=c["b"],
                                  chunks=c["chunks"], recompute=c["recompute_name"], sp=c["sp"], split=split_bwd,
                                  cp=c["cp"], ep=c["ep"], etp=c["etp"], fp8=fp8)
    first_factor, last_factor = costs.factors(c["chunks"])

    # Memory before simulating: with one micro-batch in flight (no schedule holds fewer) a candidate that does not
    # fit never will, so the simulator is only asked about candidates that could be feasible. Structurally
    # infeasible ones get the simulator's numbers only when another candidate needed the same key.
    dense_bpp = cp_ep.dense_bytes_per_param(model, bpp, fp8)
    st = _states(model, dense_bpp, c)
    ex = cp_ep.expert_states(model, bpp, c, fp8)  # routed experts over ep (zero for a dense model)
    for key, more in (("model_state_bytes", "expert_state_bytes"), ("states_on_gpu_bytes", "expert_on_gpu_bytes"),
                      ("zero3_working_bytes", "expert_working_bytes")):
        st[key] = st[key] + ex[more]
    fixed = st["states_on_gpu_bytes"] + st["zero3_working_bytes"]
    sized = batch_ok & fills & m_ok
    one = np.ones(n)
    floor = fixed + _activations(model, c, one, one, np.zeros(n, dtype=bool), sized, fp8, a.moe_capacity)[0]
    need = q.min_headroom * GB  # memory the user wants left free
    hopeless = sized & (floor > usable - need)
    rules = violations(model, c["t"], c["d"], c["cp"], c["ep"], c["etp"])  # cp / ep rules, each with its reason
    broken = np.zeros(n, dtype=bool)
    for _, mask, _ in rules:
        broken |= np.broadcast_to(mask, (n,))
    want = sized & ~hopeless & ~crosses & ~too_deep & ~broken
    sims, refused, fresh = _simulate_all(c, _sim_codes(c, costs), want, sized & ~want)
    ok = sized & np.isfinite(sims["makespan_factor"])
    last_on_first = np.nan_to_num(sims["last_on_first"]) > 0

    acts, worst = _activations(model, c, np.where(ok, sims["inflight"], 1.0), np.where(ok, sims["inflight_last"], 1.0),
                               last_on_first, ok, fp8, a.moe_capacity)
    total = fixed + acts
    times = {k: np.full(n, np.nan) for k in ("compute_s", *BREAKDOWN_COLUMNS.values(), "tp_comm_s", "tp_ratio",
                                              "dp_comm_s", "a2a_s", "ring_s", "step_time_s", "tokens_per_s", "mfu",
                                              "hfu", "tflops_per_gpu")}
    if ok.any():
        sub = {k: v[ok] for k, v in c.items()}
        expert = {"rank": ex["expert_rank"][ok], "group": ex["expert_group"][ok],
                  "param_bytes": cp_ep.expert_param_bytes(model, fp8),
                  "inside": sub["t"] * sub["d"] * sub["cp"] <= gpu.gpus_per_node} if model.is_moe else None
        est = step_time.estimate(model, gpu, a, costs.subset(ok), gpus=q.gpus, batch=B, t=sub["t"], p=sub["p"],
                                 d=sub["d"] * sub["cp"], m=sub["m"], chunks=sub["chunks"], zero=sub["zero"],
                                 recompute=sub["recompute_name"], offload=sub["offload_name"],
                                 psi_rank=st["psi_rank"][ok], makespan_factor=sims["makespan_factor"][ok],
                                 last_on_first=last_on_first[ok], precision=precision,
                                 param_bytes=dense_bpp.param_bytes, grad_bytes=bpp.grad_bytes, optimizer_bytes=bpp.k,
                                 expert=expert, extra=cp_ep.communication(model, gpu, a, sub, fp8))
        for k in times:
            times[k][ok] = est.get(k, 0.0)

    fits = total <= usable  # False where NaN
    over = ok & ~(total <= usable - need) & ~hopeless
    checks = _Checks(B, usable, need, batch_ok, fills, min_m, m_ok, refused, hopeless, floor, over, total, crosses,
                     too_deep, tuple(rules))
    reasons = checks.reasons(c, model, gpu)
    feasible = np.array([not r for r in reasons], dtype=bool)

    frame = pd.DataFrame({
        "rank": np.nan, "t": c["t"], "p": c["p"], "d": c["d"], "cp": c["cp"], "ep": c["ep"], "etp": c["etp"],
        "micro_batch_size": c["b"], "m": c["m"], "expert_state_bytes": ex["expert_state_bytes"],
        "schedule": c["schedule_name"], "v": c["v"], "zero_stage": c["zero"], "recompute": c["recompute_name"],
        "sequence_parallel": c["sp"], "offload": c["offload_name"],
        "memory_bytes": total, "model_state_bytes": st["model_state_bytes"],
        "states_on_gpu_bytes": st["states_on_gpu_bytes"], "zero3_working_bytes": st["zero3_working_bytes"],
        "activation_bytes": acts, "worst_stage": worst, "usable_bytes": usable, "headroom_bytes": usable - total,
        "memory_fraction": total / gpu.mem_bytes, "fits": fits, "inflight": sims["inflight"],
        "inflight_last": sims["inflight_last"], "bubble_fraction": sims["bubble_fraction"],
        "bubble_vs_ideal": sims["bubble_vs_ideal"], "tf": costs.tf, "tb": costs.tb, "tw": costs.tw,
        "first_stage_factor": first_factor, "last_stage_factor": last_factor, "tp_crosses_node": crosses, **times,
        "feasible": feasible, "reasons": reasons, "warnings": _warnings(c, model), "frameworks": c["frameworks"],
    })
    frame = frame[list(COLUMNS)]
    frame = _rank(pd.concat([frame, outside], ignore_index=True) if len(outside) else frame)
    if any("simulation budget" in r for r in refused):
        notes.append(f"The simulation budget ({SIM_BUDGET:,} operations per plan) ran out: some candidates are not "
                     "simulated (see their reasons). Pin t, p or the micro-batch size to narrow the search.")
    return PlanResult(q, model, gpu, precision, bpp, usable, a, split, frame, tuple(notes), fresh)


def _rank(frame: pd.DataFrame) -> pd.DataFrame:
    """Feasible first, fastest first, more headroom first; infeasible after, fewest reasons first."""
    order = frame.assign(_inf=~frame["feasible"], _n=frame["reasons"].map(len), _t=frame["step_time_s"].fillna(np.inf),
                         _h=-frame["headroom_bytes"].fillna(-np.inf))
    order = order.sort_values(["_inf", "_n", "_t", "_h", "t", "p"], kind="stable")
    frame = frame.loc[order.index].reset_index(drop=True)
    count = int(frame["feasible"].sum())
    frame.loc[: count - 1, "rank"] = np.arange(1, count + 1, dtype=float) if count else []
    return frame


@dataclass(frozen=True)
class _Checks:
    """Masks of what is wrong with each candidate, turned into messages by `reasons`."""

    batch: int
    usable: float
    need: float  # headroom asked for, bytes
    batch_ok: np.ndarray
    fills: np.ndarray
    min_m: np.ndarray
    m_ok: np.ndarray
    refused: np.ndarray
    hopeless: np.ndarray
    floor: np.ndarray
    over: np.ndarray
    total: np.ndarray
    crosses: np.ndarray
    too_deep: np.ndarray
    rules: tuple = ()  # core.planner.cp_ep_rules.violations: (name, mask, reason) for cp and ep

    def reasons(self, c: dict, model, gpu) -> list[tuple[str, ...]]:
        """Why each candidate is infeasible (an empty tuple when it is feasible); each reason starts with a tag."""
        n = c["t"].size
        columns = []

        def add(mask, text) -> None:
            idx = np.flatnonzero(mask)
            if idx.size:
                col = np.full(n, None, dtype=object)
                col[idx] = [text(i) for i in idx]
                columns.append(col)

        B, d, b, m, p = self.batch, c["d"], c["b"], c["m"], c["p"]
        ok = self.batch_ok
        add(~ok & (d > B), lambda i: f"batch smaller than d: {B:,} sequences cannot feed d = {d[i]:,} replicas")
        add(~ok & (d <= B), lambda i: f"batch does not divide: {B:,} is not a multiple of d x b = {d[i]:,} x {b[i]}")
        add(ok & ~self.fills, lambda i: f"m < p: m = {m[i]} micro-batches cannot fill {c['schedule_name'][i]} on "
                                        f"p = {p[i]} (needs m >= {self.min_m[i]})")
        add(ok & self.fills & ~self.m_ok, lambda i: f"too many micro-batches: m = {m[i]:,} > {MAX_SIM_M:,}, the "
                                                    "simulator's range (use a larger micro-batch size)")
        add(self.refused != "", lambda i: f"not simulated: {self.refused[i]}")
        full = self.floor > self.usable
        add(self.hopeless & full, lambda i: f"does not fit: {self.floor[i] / GB:,.1f} GB per GPU even with one "
                                            f"micro-batch in flight > {self.usable / GB:,.1f} GB usable")
        add(self.hopeless & ~full, lambda i: f"too little headroom: at most {(self.usable - self.floor[i]) / GB:,.1f} "
                                             f"GB free even with one micro-batch in flight < {self.need / GB:,.1f} GB "
                                             "asked")
        over = self.over & (self.total > self.usable)
        add(over, lambda i: f"does not fit: {self.total[i] / GB:,.1f} GB per GPU > {self.usable / GB:,.1f} GB usable")
        add(self.over & ~over, lambda i: f"too little headroom: {(self.usable - self.total[i]) / GB:,.1f} GB free < "
                                         f"{self.need / GB:,.1f} GB asked")
        nobody = np.array([not f for f in c["frameworks"]], dtype=bool)
        add(nobody, lambda i: "no framework runs it: " + _refusals(c, i, model))
        add(self.crosses, lambda i: f"TP crosses servers: t = {c['t'][i]} > {gpu.gpus_per_node} GPUs per server")
        add(self.too_deep, lambda i: f"too many chunks: p x v = {p[i] * c['chunks'][i]} > {model.layers} layers")
        for name, mask, text in self.rules:
            tag = {"cp_seq": "cp does not split the sequence", "ep_experts": "ep does not divide the experts",
                   "ep_ranks": "ep does not fit the ranks", "ep_dense": "ep on a dense model"}[name]
            add(np.broadcast_to(mask, (n,)), lambda i, text=text, tag=tag: f"{tag}: {text(i)}")
        if not columns:
            return [()] * n
        return [tuple(x for x in row if x is not None) for row in zip(*columns, strict=True)]


def _refusals(c: dict, i: int, model) -> str:
    """The first reason each framework gives for not running candidate i."""
    args = (int(c["t"][i]), int(c["p"][i]), int(c["zero"][i]), str(c["schedule_name"][i]), bool(c["sp"][i]),
            str(c["recompute_name"][i]), str(c["offload_name"][i]))
    more = (("kv_heads", model.kv_heads), ("cp", int(c["cp"][i])), ("ep", int(c["ep"][i])),
            ("fp8", bool(c["fp8"][i])), ("moe", model.is_moe or model.mla is not None))
    return _refusal_text(args, more)


@functools.lru_cache(maxsize=1 << 16)
def _refusal_text(args: tuple, more: tuple) -> str:
    """_refusals for one setting (many candidates share it: they differ only in d, b or m)."""
    return "; ".join(f.refusals(*args, cite=False, **dict(more))[0] for f in frameworks.TABLE.values())


def _warnings(c, model) -> list:
    """Allowed but worth saying: layers that do not divide evenly over the pipeline's stages."""
    n_chunks = c["p"] * c["chunks"]
    uneven = (model.layers % n_chunks != 0) & (n_chunks <= model.layers)
    out: list[tuple[str, ...]] = [()] * n_chunks.size
    for k in np.unique(n_chunks[uneven]).tolist():
        text = (f"uneven stages: {model.layers} layers over {k} stages, the fullest holds {-(-model.layers // k)}",)
        for i in np.flatnonzero(uneven & (n_chunks == k)).tolist():
            out[i] = text
    return out
