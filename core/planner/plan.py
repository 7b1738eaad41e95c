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

This module is the order of those steps; the steps live in core.planner.candidates (the model, the layouts) and
core.planner.grid (what is searched: the Candidates record), core.planner.simulation (the simulator, cached),
core.planner.rank_memory (bytes per GPU), core.planner.checks (reasons and warnings in words),
core.planner.ranking (the one ranked frame) and core.planner.result (PlanResult, the frame's users).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.cost import step_time
from core.cost.collective import Fabric
from core.cost.step_input import ExpertShard, Setting, StepInput
from core.memory import states as memory
from core.memory.fit import usable_bytes
from core.params.memory import RECOMPUTE_MODES
from core.params.planner import BUDGET, SEARCH_SCHEDULES, PlannerParams
from core.pipeline.schedules import REGISTRY
from core.planner import budget as work
from core.planner import candidates, cp_ep, grid, rank_memory, simulation
from core.planner.checks import Checks, warnings
from core.planner.columns import BREAKDOWN_COLUMNS
from core.planner.cp_ep_rules import violations
from core.planner.factors import chunk_slots
from core.planner.ranking import ranked
from core.planner.result import PlanResult
from core.planner.simulation import MAX_SIM_M
from core.units import GB

__all__ = ["PlanResult", "plan"]  # PlanResult: what plan returns, named here for the many callers' annotations

TIMES = ("compute_s", *BREAKDOWN_COLUMNS.values(), "tp_comm_s", "tp_ratio", "dp_comm_s", "dp_exposed_s", "a2a_s",
         "ring_s", "step_time_s", "tokens_per_s", "mfu", "hfu", "tflops_per_gpu")


def plan(q: PlannerParams, budget: int | None = None) -> PlanResult:
    """Every candidate layout of the question `q`, scored and ranked; above `budget` candidates (None: BUDGET's
    default, 0: no limit) the search is narrowed and says so in the notes, or refused (InputError) with what to pin
    (core.planner.budget)."""
    budget = int(BUDGET.default) if budget is None else budget
    model, gpu, precision = candidates.resolve(q)
    a = step_time.Assumptions(**q.assumptions())
    bpp = memory.preset(q.optimizer, "mixed", q.k)
    usable = float(usable_bytes(gpu.mem_gb, 0.0, a.reserve_frac))
    fp8 = precision == "fp8"
    degrees, notes = candidates.degrees(q, model)
    search = work.bounded(q, degrees, work.Context(model, gpu.gpus_per_node, usable - q.min_headroom * GB, bpp,
                                                   fp8), budget)
    if search.narrowed:
        notes = [search.notice(budget), *filter(search.keeps, notes)]
    outside = candidates.excluded(q, model, gpu.gpus_per_node, usable)
    c, more = grid.grid(search.q, search.degrees, model, gpu.gpus_per_node, search.offload_where)
    notes += more
    split = rank_memory.params_per_rank(model, 1, 2)[2]
    if c.size == 0:
        return PlanResult(q, model, gpu, precision, bpp, usable, a, split, ranked({}, 0, outside, np.zeros(0)),
                          tuple(notes), 0, search.narrowed)
    dense_bpp = cp_ep.dense_bytes_per_param(model, bpp, fp8)
    s = Setting(model, gpu, a, q.gpus, q.batch, precision, dense_bpp.param_bytes, bpp.grad_bytes, bpp.k)
    c, split_ok = _batch_split(q, c, model, gpu)

    # What one device's share of the model costs per micro-batch, operation by operation (core.cost.step_time).
    costs = step_time.stage_costs(s, c.layouts())

    # Memory before simulating: with one micro-batch in flight (no schedule holds fewer) a candidate that does not
    # fit never will, so the simulator is only asked about candidates that could be feasible. Structurally
    # infeasible ones get the simulator's numbers only when another candidate needed the same key.
    mem = _states(model, bpp, c, fp8)
    one, n = np.ones(c.size), c.size
    floor = mem.fixed + rank_memory.activations(model, c, one, one, np.zeros(n, dtype=bool), split_ok.sized, fp8,
                                                a.moe_capacity)[0]
    need = q.min_headroom * GB  # memory the user wants left free
    hopeless = split_ok.sized & (floor > usable - need)
    rules = violations(model, c.t, c.d, c.cp, c.ep, c.etp)  # cp / ep rules, each with its reason
    broken = np.zeros(n, dtype=bool)
    for _, mask, _ in rules:
        broken |= np.broadcast_to(mask, (n,))
    want = split_ok.sized & ~hopeless & ~split_ok.crosses & ~split_ok.too_deep & ~broken
    sims, refused, fresh = simulation.simulate_all(c, simulation.sim_codes(c, costs), want, split_ok.sized & ~want)
    ok = split_ok.sized & np.isfinite(sims["makespan_factor"])
    last_on_first = np.nan_to_num(sims["last_on_first"]) > 0

    acts, worst = rank_memory.activations(model, c, np.where(ok, sims["inflight"], 1.0),
                                          np.where(ok, sims["inflight_last"], 1.0), last_on_first, ok, fp8,
                                          a.moe_capacity)
    total = mem.fixed + acts
    times = _times(s, c, costs, sims, mem, ok, last_on_first)

    over = ok & ~(total <= usable - need) & ~hopeless
    checks = Checks(q.batch, usable, need, split_ok.batch_ok, split_ok.fills, split_ok.min_m, split_ok.m_ok, refused,
                    hopeless, floor, over, total, split_ok.crosses, split_ok.too_deep, tuple(rules))
    reasons, counts = checks.reasons(c, model, gpu)
    frame = ranked(_columns(c, mem, costs, sims, times, (total, acts, worst, usable, gpu.mem_bytes),
                            (reasons, counts == 0, warnings(c, model)), split_ok.crosses), n, outside, counts)
    if any("simulation budget" in r for r in set(refused[refused != ""].tolist())):
        notes.append(f"The simulation budget ({simulation.SIM_BUDGET:,} operations per plan) ran out: some candidates "
                     "are not simulated (see their reasons). Pin t, p or the micro-batch size to narrow the search.")
    return PlanResult(q, model, gpu, precision, bpp, usable, a, split, frame, tuple(notes), fresh, search.narrowed)


@dataclass(frozen=True, eq=False)
class _Split:
    """How each candidate splits the batch and what that rules out (masks, one entry per candidate)."""

    batch_ok: np.ndarray  # m = B / (d b) is a whole number
    fills: np.ndarray  # enough micro-batches to fill the pipeline
    min_m: np.ndarray
    m_ok: np.ndarray  # within the simulator's range
    crosses: np.ndarray  # TP crosses servers
    too_deep: np.ndarray  # more chunks than layers

    @property
    def sized(self) -> np.ndarray:
        return self.batch_ok & self.fills & self.m_ok


def _batch_split(q: PlannerParams, c: grid.Candidates, model, gpu) -> tuple[grid.Candidates, _Split]:
    """m = B / (d b) a whole number, enough to fill the pipeline, within the simulator's range."""
    per_step = c.d * c.b
    batch_ok = (q.batch % per_step == 0) & (per_step <= q.batch)
    c = c.with_m(np.where(batch_ok, q.batch // np.maximum(per_step, 1), 0))
    min_m = np.where(c.p > 1, c.p, 1)  # a pipeline that never fills is flagged, whatever the schedule
    for code in np.unique(c.schedule).tolist():  # and what the engine itself requires (DualPipeV: 2p)
        sel = c.schedule == code  # by code: comparing 100,000 names as strings costs a re-plan milliseconds
        min_m = np.where(sel, np.maximum(min_m, REGISTRY[SEARCH_SCHEDULES[code]].min_m(c.p)), min_m)
    return c, _Split(batch_ok, c.m >= min_m, min_m, c.m <= MAX_SIM_M, c.t > gpu.gpus_per_node,
                     c.p * c.chunks > chunk_slots(model.layers, c.p, c.chunks))


@dataclass(frozen=True, eq=False)
class _Memory:
    """Model states per GPU (dense + routed experts) and what they need beside the activations."""

    states: dict  # core.planner.rank_memory.states: dense and routed experts (core.memory.per_gpu)
    experts: dict  # the same record's routed-expert keys (expert_rank, expert_group, expert_state_bytes)

    @property
    def fixed(self) -> np.ndarray:
        return self.states["states_on_gpu_bytes"] + self.states["zero3_working_bytes"]


def _states(model, bpp, c: grid.Candidates, fp8: bool) -> _Memory:
    st = rank_memory.states(model, bpp, c, fp8)  # dense and routed experts: core.memory.per_gpu, as everywhere
    return _Memory(st, st)


def _times(s: Setting, c: grid.Candidates, costs, sims: dict, mem: _Memory, ok: np.ndarray,
           last_on_first: np.ndarray) -> dict[str, np.ndarray]:
    """Step time and its parts (core.cost.step_time.estimate) where the candidate was simulated, NaN elsewhere."""
    times = {k: np.full(c.size, np.nan) for k in TIMES}
    if not ok.any():
        return times
    sub = c.take(ok)
    lay = sub.layouts()
    expert = None
    if s.model.is_moe:
        group = mem.experts["expert_group"][ok]
        per_node = Fabric.of(s.gpu, s.a).members_per_node(group, sub.ep * sub.etp)
        expert = ExpertShard(mem.experts["expert_rank"][ok], group, cp_ep.expert_param_bytes(s.model, s.fp8),
                             per_node)
    sub_costs = costs.subset(ok)
    est = step_time.estimate(StepInput(s, lay, sub_costs, sims["makespan_factor"][ok], last_on_first[ok],
                                       mem.states["psi_rank"][ok], expert, cp_ep.communication(s, lay, sub_costs)))
    for k in times:
        times[k][ok] = est.get(k, 0.0)
    return times


def _columns(c: grid.Candidates, mem: _Memory, costs, sims: dict, times: dict, memory_of: tuple, verdict: tuple,
             crosses: np.ndarray) -> dict:
    """The frame's columns (core.planner.columns.COLUMNS) for every candidate."""
    total, acts, worst, usable, gpu_bytes = memory_of
    reasons, feasible, warned = verdict
    st = mem.states
    first_factor, last_factor = costs.factors(c.chunks)
    return {
        "rank": np.nan, "t": c.t, "p": c.p, "d": c.d, "cp": c.cp, "ep": c.ep, "etp": c.etp,
        "micro_batch_size": c.b, "m": c.m, "expert_state_bytes": mem.experts["expert_state_bytes"],
        "schedule": _names(SEARCH_SCHEDULES, c.schedule), "v": c.v, "zero_stage": c.zero,
        "reshard": c.reshard.astype(bool), "tp_comm_overlap": c.tp_comm_overlap.astype(bool),
        "recompute": _names(RECOMPUTE_MODES, c.recompute), "sequence_parallel": c.sp,
        "offload": _names(grid.OFFLOAD_MODES, c.offload),
        "memory_bytes": total, "model_state_bytes": st["model_state_bytes"],
        "states_on_gpu_bytes": st["states_on_gpu_bytes"], "zero3_working_bytes": st["zero3_working_bytes"],
        "activation_bytes": acts, "worst_stage": worst, "usable_bytes": usable, "headroom_bytes": usable - total,
        "memory_fraction": total / gpu_bytes, "fits": total <= usable, "inflight": sims["inflight"],
        "inflight_last": sims["inflight_last"], "bubble_fraction": sims["bubble_fraction"],
        "bubble_vs_ideal": sims["bubble_vs_ideal"], "tf": costs.tf, "tb": costs.tb, "tw": costs.tw,
        "first_stage_factor": first_factor, "last_stage_factor": last_factor, "tp_crosses_node": crosses, **times,
        "feasible": feasible, "reasons": reasons, "warnings": warned, "frameworks": c.frameworks,
    }


def _names(names: tuple[str, ...], codes: np.ndarray) -> np.ndarray:
    """The names of coded choices as an object array sharing one str per name: the same column as the fixed-width
    string array, which pandas (or astype(object)) would turn into 100,000 new str objects."""
    return np.array(names, dtype=object)[codes]
