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

This module is the order of those steps and the ranking; the steps live in core.planner.candidates (what is
searched), core.planner.simulation (the simulator, cached), core.planner.rank_memory (bytes per GPU),
core.planner.checks (reasons and warnings in words) and core.planner.result (PlanResult, the frame's users).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pandas.api.internals import create_dataframe_from_blocks

from core.cost import step_time
from core.memory import states as memory
from core.memory.fit import usable_bytes
from core.params.memory import RECOMPUTE_MODES
from core.params.planner import SEARCH_SCHEDULES, PlannerParams
from core.pipeline.schedules import REGISTRY
from core.planner import candidates, cp_ep, rank_memory, simulation
from core.planner.checks import Checks, warnings
from core.planner.columns import BREAKDOWN_COLUMNS, COLUMNS
from core.planner.cp_ep_rules import violations
from core.planner.result import PlanResult
from core.planner.simulation import MAX_SIM_M
from core.units import GB

__all__ = ["PlanResult", "plan"]  # PlanResult: what plan returns, named here for the many callers' annotations


def plan(q: PlannerParams) -> PlanResult:
    """Every candidate layout of the question `q`, scored and ranked."""
    model, gpu, precision = candidates.resolve(q)
    fp8 = precision == "fp8"
    a = step_time.Assumptions(**q.assumptions())
    bpp = memory.preset(q.optimizer, "mixed", q.k)
    usable = float(usable_bytes(gpu.mem_gb, 0.0, a.reserve_frac))
    degrees, notes = candidates.degrees(q, model)
    outside = candidates.excluded(q, model, gpu.gpus_per_node, usable)
    c, more = candidates.grid(q, degrees, model)
    notes += more
    n = c["t"].size
    B = q.batch
    split = rank_memory.params_per_rank(model, 1, 2)[2]
    if n == 0:
        return PlanResult(q, model, gpu, precision, bpp, usable, a, split, _rank(outside), tuple(notes), 0)

    # The batch split: m = B / (d b) a whole number, enough to fill the pipeline, within the simulator's range.
    per_step = c["d"] * c["b"]
    batch_ok = (B % per_step == 0) & (per_step <= B)
    c["m"] = np.where(batch_ok, B // np.maximum(per_step, 1), 0)
    min_m = np.where(c["p"] > 1, c["p"], 1)  # a pipeline that never fills is flagged, whatever the schedule
    for code in np.unique(c["schedule"]).tolist():  # and what the engine itself requires (DualPipeV: 2p)
        sel = c["schedule"] == code  # by code: comparing 100,000 names as strings costs a re-plan milliseconds
        min_m = np.where(sel, np.maximum(min_m, REGISTRY[SEARCH_SCHEDULES[code]].min_m(c["p"])), min_m)
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
    st = ex = rank_memory.states(model, bpp, c, fp8)  # dense and routed experts: core.memory.per_gpu, as everywhere
    fixed = st["states_on_gpu_bytes"] + st["zero3_working_bytes"]
    sized = batch_ok & fills & m_ok
    one = np.ones(n)
    floor = fixed + rank_memory.activations(model, c, one, one, np.zeros(n, dtype=bool), sized, fp8, a.moe_capacity)[0]
    need = q.min_headroom * GB  # memory the user wants left free
    hopeless = sized & (floor > usable - need)
    rules = violations(model, c["t"], c["d"], c["cp"], c["ep"], c["etp"])  # cp / ep rules, each with its reason
    broken = np.zeros(n, dtype=bool)
    for _, mask, _ in rules:
        broken |= np.broadcast_to(mask, (n,))
    want = sized & ~hopeless & ~crosses & ~too_deep & ~broken
    sims, refused, fresh = simulation.simulate_all(c, simulation.sim_codes(c, costs), want, sized & ~want)
    ok = sized & np.isfinite(sims["makespan_factor"])
    last_on_first = np.nan_to_num(sims["last_on_first"]) > 0

    acts, worst = rank_memory.activations(model, c, np.where(ok, sims["inflight"], 1.0),
                                          np.where(ok, sims["inflight_last"], 1.0), last_on_first, ok, fp8,
                                          a.moe_capacity)
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
    checks = Checks(B, usable, need, batch_ok, fills, min_m, m_ok, refused, hopeless, floor, over, total, crosses,
                     too_deep, tuple(rules))
    reasons, counts = checks.reasons(c, model, gpu)
    feasible = counts == 0

    frame = _ranked_frame({
        "rank": np.nan, "t": c["t"], "p": c["p"], "d": c["d"], "cp": c["cp"], "ep": c["ep"], "etp": c["etp"],
        "micro_batch_size": c["b"], "m": c["m"], "expert_state_bytes": ex["expert_state_bytes"],
        "schedule": _names(SEARCH_SCHEDULES, c["schedule"]), "v": c["v"], "zero_stage": c["zero"],
        "recompute": _names(RECOMPUTE_MODES, c["recompute"]), "sequence_parallel": c["sp"],
        "offload": _names(candidates.OFFLOAD_MODES, c["offload"]),
        "memory_bytes": total, "model_state_bytes": st["model_state_bytes"],
        "states_on_gpu_bytes": st["states_on_gpu_bytes"], "zero3_working_bytes": st["zero3_working_bytes"],
        "activation_bytes": acts, "worst_stage": worst, "usable_bytes": usable, "headroom_bytes": usable - total,
        "memory_fraction": total / gpu.mem_bytes, "fits": fits, "inflight": sims["inflight"],
        "inflight_last": sims["inflight_last"], "bubble_fraction": sims["bubble_fraction"],
        "bubble_vs_ideal": sims["bubble_vs_ideal"], "tf": costs.tf, "tb": costs.tb, "tw": costs.tw,
        "first_stage_factor": first_factor, "last_stage_factor": last_factor, "tp_crosses_node": crosses, **times,
        "feasible": feasible, "reasons": reasons, "warnings": warnings(c, model), "frameworks": c["frameworks"],
    }, n, outside, counts)
    if any("simulation budget" in r for r in set(refused[refused != ""].tolist())):
        notes.append(f"The simulation budget ({simulation.SIM_BUDGET:,} operations per plan) ran out: some candidates "
                     "are not simulated (see their reasons). Pin t, p or the micro-batch size to narrow the search.")
    return PlanResult(q, model, gpu, precision, bpp, usable, a, split, frame, tuple(notes), fresh)


def _names(names: tuple[str, ...], codes: np.ndarray) -> np.ndarray:
    """The names of coded choices as an object array sharing one str per name: the same column as the fixed-width
    string array, which pandas (or astype(object)) would turn into 100,000 new str objects."""
    return np.array(names, dtype=object)[codes]


def _ranked_frame(columns: dict, n: int, outside: pd.DataFrame, counts: np.ndarray) -> pd.DataFrame:
    """The candidates' columns (arrays of n, or scalars) and the excluded rows as one ranked frame (`_rank`'s order),
    sorted as arrays and built once: the same frame as building, concatenating and sorting it in pandas. `counts`:
    how many reasons each candidate has.

    A re-plan builds this frame every time (about 60 columns of 100,000 rows), so each column is sorted straight
    into a block of its dtype and the blocks are handed to pandas whole: sorting columns and letting pandas
    consolidate them copied every value once more (into fresh memory, which costs as much as the copy)."""
    def column(v) -> np.ndarray:
        if isinstance(v, list):  # tuples per candidate (reasons, warnings): an object array of them
            return np.fromiter(v, dtype=object, count=n)
        return np.broadcast_to(v, (n,)) if np.ndim(v) == 0 else v

    arrays = {k: column(columns[k]) for k in COLUMNS}
    more = {k: outside[k].to_numpy() for k in COLUMNS} if len(outside) else {}
    total = n + len(outside)

    def joined(k: str) -> np.ndarray:
        return np.concatenate([arrays[k], more[k]]) if more else arrays[k]

    if more:
        counts = np.concatenate([counts, outside["reasons"].map(len).to_numpy(dtype=np.int64)])
    order = np.lexsort((joined("p"), joined("t"), -np.nan_to_num(joined("headroom_bytes"), nan=-np.inf),
                        np.nan_to_num(joined("step_time_s"), nan=np.inf), counts, ~joined("feasible").astype(bool)))
    # Each column's dtype after concatenating: object where the excluded rows' column is (pandas would keep it so).
    kept = {k for k in COLUMNS if more and outside[k].dtype == object}
    dtypes = {k: np.result_type(v.dtype, more[k].dtype) if more else v.dtype for k, v in arrays.items()}
    blocks = []
    for dtype in dict.fromkeys(dtypes.values()):
        names = [k for k in COLUMNS if dtypes[k] == dtype]
        block = np.empty((len(names), total), dtype=dtype)
        for row, k in enumerate(names):  # column by column: a whole unsorted block would be one more large copy
            np.take(joined(k).astype(dtype, copy=False), order, out=block[row])
        if "rank" in names:  # feasible rows come first: ranks 1, 2, ... (NaN for the infeasible)
            count = int(np.count_nonzero(joined("feasible")))
            block[names.index("rank"), :count] = np.arange(1, count + 1, dtype=float)
        if dtype.kind == "O":  # as pd.DataFrame(dict) infers them (all str: pandas' str dtype) unless kept as object
            for row, k in enumerate(names):
                inferred = None if k in kept else pd.DataFrame({k: block[row]})[k]
                blocks.append((block[row:row + 1] if inferred is None or inferred.dtype == object else inferred.array,
                               np.array([COLUMNS.index(k)], dtype=np.intp)))
            continue
        blocks.append((block, np.array([COLUMNS.index(k) for k in names], dtype=np.intp)))
    return create_dataframe_from_blocks(blocks, pd.RangeIndex(total), pd.Index(list(COLUMNS)))


def _rank(frame: pd.DataFrame) -> pd.DataFrame:
    """Feasible first, fastest first, more headroom first; infeasible after, fewest reasons first."""
    order = frame.assign(_inf=~frame["feasible"], _n=frame["reasons"].map(len), _t=frame["step_time_s"].fillna(np.inf),
                         _h=-frame["headroom_bytes"].fillna(-np.inf))
    order = order.sort_values(["_inf", "_n", "_t", "_h", "t", "p"], kind="stable")
    frame = frame.loc[order.index].reset_index(drop=True)
    count = int(frame["feasible"].sum())
    frame.loc[: count - 1, "rank"] = np.arange(1, count + 1, dtype=float) if count else []
    return frame

