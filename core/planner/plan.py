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
not divide, ...); filtering them is the caller's choice. Only candidates that can be feasible are simulated (the
simulation budget goes where it can change the answer): those only memory rules out keep every term that needs
no simulator, the rest no terms; none has a step time, and the `timing` column says why. Dimensions the search
cannot cover are named in `notes` and as infeasible rows (the project's "show, not silently drop"): p above the
simulator's 64 devices or above the number of layers, t that does not divide the heads.

This module is the order of those steps; the steps live in core.planner.candidates (the model, the layouts) and
core.planner.grid (what is searched: the Candidates record), core.planner.simulation (the simulator, cached),
core.planner.rank_memory (bytes per GPU), core.planner.checks (reasons and warnings in words),
core.planner.ranking (the one ranked frame) and core.planner.result (PlanResult, the frame's users).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.cost import dp_comm, layer_ops, step_time
from core.cost.collective import Fabric
from core.cost.step_input import ExpertShard, Setting, StepInput
from core.memory import states as memory
from core.memory.fit import usable_bytes
from core.params.memory import RECOMPUTE_MODES
from core.params.planner import BUDGET, SEARCH_SCHEDULES, PlannerParams
from core.pipeline.schedules import REGISTRY
from core.planner import budget as work
from core.planner import candidates, cp_ep, grid, plan_cache, rank_memory, simulation
from core.planner.checks import Checks, static_checks, warnings
from core.planner.columns import BREAKDOWN_COLUMNS, timing
from core.planner.cp_ep_rules import violations
from core.planner.factors import chunk_slots
from core.planner.ranking import ranked
from core.planner.result import PlanResult
from core.planner.simulation import MAX_SIM_M
from core.units import GB

__all__ = ["PlanResult", "plan"]  # PlanResult: what plan returns, named here for the many callers' annotations

TIMES = ("compute_s", *BREAKDOWN_COLUMNS.values(), "tp_comm_s", "tp_ratio", "dp_comm_s", "dp_exposed_s", "a2a_s",
         "ring_s", "step_time_s", "tokens_per_s", "mfu", "hfu", "tflops_per_gpu")


def recompute_policy(q: PlannerParams) -> tuple:
    """What a selective row re-runs in its backward: Megatron-LM's recompute modules, or, where every row is counted
    as PyTorch's (torchtitan), its per-op policy (core.cost.layer_ops.PER_OP), and the attention core with it where
    the policy does not save the attention (sac_attention false). Under `any`, rows only PyTorch runs are counted in
    its bytes but timed with the modules (the question's one setting)."""
    torch = q.memory_framework == "torch" or (q.memory_framework == "auto" and q.framework == "torch")
    if not torch:
        return q.recompute_modules
    return (layer_ops.PER_OP,) if q.sac_attention else (layer_ops.PER_OP, "core_attn")


def plan(q: PlannerParams, budget: int | None = None) -> PlanResult:
    """Every candidate layout of the question `q`, scored and ranked; above `budget` candidates (None: BUDGET's
    default, 0: no limit) the search is narrowed and says so in the notes, or refused (InputError) with what to pin
    (core.planner.budget)."""
    budget = int(BUDGET.default) if budget is None else budget
    model, gpu, precision = candidates.resolve(q)
    a = step_time.Assumptions(**q.assumptions())
    bpp = memory.preset(q.optimizer, "mixed", q.k)
    # a framework's accounting counts the CUDA context and its buffers inside what the device reports; the textbook's
    # reads the labelled GB as 1e9 bytes, which leaves the difference for them (as the ZeRO page compares them)
    device = gpu.mem_bytes if q.memory_framework == "textbook" else gpu.capacity_bytes
    usable = float(usable_bytes(device / GB, 0.0, a.reserve_frac))
    fp8 = precision == "fp8"
    opts = rank_memory.Options(fp8, a.moe_capacity, a.ends_in_split, a.cp_comm, q.compile, q.grad_dtype,
                               q.optimizer_dtype, q.loss, precision == "fp16", q.grouped_gemm,
                               q.recompute_modules, q.repeat_kv, q.sac_attention)
    degrees, notes = candidates.degrees(q, model)
    search = work.bounded(q, degrees, work.Context(model, gpu.gpus_per_node, usable - q.min_headroom * GB, bpp,
                                                   fp8), budget)
    if search.narrowed:
        notes = [search.notice(budget), *filter(search.keeps, notes)]
    outside = candidates.excluded(q, model, gpu.gpus_per_node, usable)
    need = q.min_headroom * GB  # memory the user wants left free
    # The candidates, their batch split, model states, memory gate and placement before simulating: the same under
    # other step-time assumptions (core.planner.plan_cache keeps them for the next plan of this question).
    c, more, split_ok, mem, gate, last_on_first, static, warned, placed, keys = plan_cache.kept(
        plan_cache.key(search.q, search.degrees, search.offload_where),
        lambda: _structure(search, model, gpu, bpp, opts, usable - need))
    notes += more
    split = rank_memory.params_per_rank(model, 1, 2, a.ends_in_split)[2]
    if c.size == 0:
        return PlanResult(q, model, gpu, precision, bpp, usable, a, split, ranked({}, 0, outside, np.zeros(0)),
                          tuple(notes), 0, search.narrowed)
    dense_bpp = cp_ep.dense_bytes_per_param(model, bpp, fp8)
    s = Setting(model, gpu, a, q.gpus, q.batch, precision, dense_bpp.param_bytes, bpp.grad_bytes, bpp.k,
                dp_comm.reduce_bytes(q.grad_dtype, precision), recompute_policy(q))

    # What one device's share of the model costs per micro-batch, operation by operation (core.cost.step_time).
    costs = step_time.stage_costs(s, c.layouts())

    # Only candidates that fit with the micro-batches their schedule holds in flight (placed before any simulation,
    # in the kept structure), and break no other rule, are simulated.
    codes = simulation.sim_codes(c, costs)
    order, refused, spent, paid, acts, worst, fits = placed
    paid = set(paid)  # the shapes the placement counted (the kept set is not written to)
    held = _Held(model, c, keys, opts, last_on_first)

    def bound() -> np.ndarray:  # each fitting candidate's step time without its bubble (no schedule is faster)
        return _times(s, c, costs, np.ones(c.size), mem, fits & gate.rules_ok, last_on_first)["step_time_s"]

    sims, late, fresh, spent = simulation.simulate_all(c, codes, fits, spent, paid, bound)
    refused = np.where(refused != "", refused, late)
    # Candidates ruled out otherwise (no framework runs them, TP across servers, ...) are told their memory with
    # what the budget has left, once the feasible ones are timed; none of them is simulated.
    rest = split_ok.sized & ~gate.hopeless & ~gate.want
    more, _, spent = simulation.place_all(c, codes, rest, spent, keep=False, paid=paid, split=_split_of(model, opts))
    simulation.trim_compiled()
    acts, worst = held.merged((acts, worst), held.of(more, rest & np.isfinite(more["inflight"])))
    order = {k: np.where(gate.want, order[k], more[k]) for k in order}
    dev = mem.device(keys, acts)
    total = dev["total"]
    # Every candidate that only memory rules out gets the terms that need no simulator (what it would cost if it
    # fit); the bubble only where simulated. Rows another rule rules out (no framework, TP across servers, a cp /
    # ep rule) are not layouts anyone runs: timing them cost a 100,000-candidate re-plan a third of its time.
    times = _times(s, c, costs, sims["makespan_factor"], mem, gate.rules_ok, last_on_first)

    checks = Checks(q.batch, usable, need, split_ok.batch_ok, split_ok.fills, split_ok.min_m, split_ok.m_ok, refused,
                    gate.hopeless, gate.floor, np.isfinite(total) & ~(total <= usable - need), total,
                    split_ok.crosses, split_ok.too_deep, gate.rules)
    reasons, counts, groups = checks.reasons(c, model, gpu, static)
    frame = ranked(_columns(c, mem, costs, {**order, **sims}, times, (dev, acts, worst, usable, device),
                            (reasons, counts == 0, warned, groups), split_ok.crosses, keys), c.size, outside, counts)
    if any("simulation budget" in r for r in set(refused[refused != ""].tolist())):
        notes.append(f"The simulation budget ({simulation.SIM_BUDGET:,} operations per plan) ran out: some candidates "
                     "are not simulated (see their reasons). Pin t, p or the micro-batch size to narrow the search.")
    return PlanResult(q, model, gpu, precision, bpp, usable, a, split, frame, tuple(notes), fresh, search.narrowed,
                      spent)


def _structure(search, model, gpu, bpp, opts: rank_memory.Options, room: float) -> tuple:
    """(candidates with their batch split, the grid's notes, the split's masks, model states, the memory gate,
    whether each candidate's last stage sits on its first device, the checks and warnings that need nothing else,
    and the placement before simulating: micro-batches in flight, refusals, budget spent, activations, which fit):
    what no other step-time assumption changes."""
    c, more = grid.grid(search.q, search.degrees, model, gpu.gpus_per_node, search.offload_where)
    if c.size == 0:
        return c, more, None, None, None, None, None, None, None, None
    c, split_ok = _batch_split(search.q, c, model, gpu)
    last_on_first = simulation.last_on_first(c)
    keys = rank_memory.accounting_keys(search.q.framework, c, search.q.memory_framework)
    mem = _states(model, bpp, c, keys, opts, last_on_first)
    gate = _gate(model, c, mem, split_ok, room, opts, keys)
    static = static_checks(c, model, gpu, search.q.batch, split_ok, gate.rules)
    # Memory before simulating (core.planner.simulation.place_all): the micro-batches in flight are the schedule's
    # order alone (schedule, p, m, v), so the placement, its share of the simulation budget and the activations
    # are the same under every other step-time assumption.
    shapes = np.stack([c.schedule, c.p, c.m, c.chunks], axis=1).astype(np.int64)
    paid: set = set()
    order, refused, spent = simulation.place_all(c, shapes, gate.want, paid=paid, split=_split_of(model, opts))
    held = _Held(model, c, keys, opts, last_on_first)
    acts, worst = held.of(order, gate.want & np.isfinite(order["inflight"]))
    placed = (order, refused, spent, frozenset(paid), acts, worst, mem.device(keys, acts)["total"] <= room)
    return c, more, split_ok, mem, gate, last_on_first, static, warnings(c, model), placed, keys


def _split_of(model, opts: rank_memory.Options) -> tuple[int, int] | None:
    """(layers, prediction depths) where the embedding and the loss take layer slots: the end devices' in-flight
    counts are then weighted by their chunks' layers (core.planner.simulation.in_flight)."""
    return (model.layers, model.mtp_layers) if opts.ends_in_split else None


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


@dataclass(frozen=True, eq=False)
class _Held:
    """The activations each candidate's end stages hold for the micro-batches its schedule keeps in flight."""

    model: object
    c: grid.Candidates
    keys: np.ndarray  # each candidate's accounting (core.planner.rank_memory.accounting_keys)
    opts: rank_memory.Options
    last_on_first: np.ndarray

    def of(self, order: dict, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(bytes, fullest device) where `rows` (NaN / None elsewhere): core.planner.rank_memory.activations."""
        return rank_memory.activations(self.model, self.c, order, self.last_on_first, rows, self.keys, self.opts)

    @staticmethod
    def merged(first: tuple, second: tuple) -> tuple[np.ndarray, np.ndarray]:
        """`first`'s values where it has them, `second`'s elsewhere."""
        has = np.isfinite(first[0])
        return np.where(has, first[0], second[0]), np.where(has, first[1], second[1])


@dataclass(frozen=True, eq=False)
class _Gate:
    """What rules a candidate out before any schedule is built: its memory with one micro-batch in flight (no
    schedule holds fewer), the cp / ep rules, and the checks of _Split; `want`: the candidates that can be
    feasible, the only ones whose schedules are built and simulated."""

    floor: np.ndarray
    hopeless: np.ndarray
    rules: tuple
    want: np.ndarray
    rules_ok: np.ndarray  # every rule but memory passes: the rows whose non-simulated terms are worth computing


def _gate(model, c: grid.Candidates, mem: _Memory, split_ok: _Split, room: float, opts: rank_memory.Options,
          keys: np.ndarray) -> _Gate:
    one, n = np.ones(c.size), c.size
    ones = dict.fromkeys(simulation.ORDER_FIELDS, one)  # one micro-batch in flight everywhere: a lower bound
    acts = rank_memory.activations(model, c, ones, np.zeros(n, dtype=bool), split_ok.sized, keys, opts)[0]
    floor = mem.device(keys, acts)["total"]
    hopeless = split_ok.sized & (floor > room)
    rules = violations(model, c.t, c.d, c.cp, c.ep, c.etp, c.replicate)  # cp / ep / HSDP rules, with their reasons
    broken = np.zeros(n, dtype=bool)
    for _, mask, _ in rules:
        broken |= np.broadcast_to(mask, (n,))
    runnable = np.fromiter(map(bool, c.frameworks.tolist()), dtype=bool, count=n)  # some framework runs it
    rules_ok = split_ok.sized & ~split_ok.crosses & ~split_ok.too_deep & ~broken & runnable
    return _Gate(floor, hopeless, tuple(rules), rules_ok & ~hopeless, rules_ok)


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
        """What the activation peak holds beside the activations: model states, ZeRO-3's gathers, buffers."""
        return self.states["states_on_gpu_bytes"] + self.states["zero3_working_bytes"] + self.states["buffer_bytes"]

    def device(self, keys: np.ndarray, acts: np.ndarray) -> dict[str, np.ndarray]:
        """Bytes on the device with these activations: the peak's tensors (allocated, the larger of the activation
        peak and the optimizer step), the allocator's reserve, what sits outside it, and their sum (total)."""
        peak = self.fixed + acts
        dev = rank_memory.device(keys, peak, self.states)
        allocated = peak + dev["step"]
        return {**dev, "allocated": allocated, "total": allocated + dev["reserve"] + dev["outside"]}


def _states(model, bpp, c: grid.Candidates, keys: np.ndarray, opts: rank_memory.Options,
            last_on_first: np.ndarray | bool = False) -> _Memory:
    st = rank_memory.states(model, bpp, c, keys, opts, last_on_first)  # core.memory.per_gpu
    return _Memory(st, st)


def _times(s: Setting, c: grid.Candidates, costs, makespan: np.ndarray, mem: _Memory, rows: np.ndarray,
           last_on_first: np.ndarray) -> dict[str, np.ndarray]:
    """Step time and its parts (core.cost.step_time.estimate) where `rows` (NaN elsewhere): compute, TP, DP / ZeRO,
    offload and MoE terms for all of them; the bubble, the straggler share and the step time (with tokens/s and MFU)
    only where the simulator gave a makespan (NaN in `makespan` elsewhere)."""
    times = {k: np.full(c.size, np.nan) for k in TIMES}
    if not rows.any():
        return times
    sub = c.take(rows)
    lay = sub.layouts()
    expert = None
    if s.model.is_moe:
        group = mem.experts["expert_group"][rows]
        per_node = Fabric.of(s.gpu, s.a).members_per_node(group, sub.ep * sub.etp)
        expert = ExpertShard(mem.experts["expert_rank"][rows], group, cp_ep.expert_param_bytes(s.model, s.fp8),
                             per_node)
    sub_costs = costs.subset(rows)
    est = step_time.estimate(StepInput(s, lay, sub_costs, makespan[rows], last_on_first[rows],
                                       mem.states["psi_rank"][rows], expert, cp_ep.communication(s, lay, sub_costs)))
    for k in times:
        times[k][rows] = est.get(k, 0.0)
    return times


def _columns(c: grid.Candidates, mem: _Memory, costs, sims: dict, times: dict, memory_of: tuple, verdict: tuple,
             crosses: np.ndarray, keys: np.ndarray) -> dict:
    """The frame's columns (core.planner.columns.COLUMNS) for every candidate."""
    dev, acts, worst, usable, gpu_bytes = memory_of
    total = dev["total"]
    reasons, feasible, warned, groups = verdict
    st = mem.states
    first_factor, last_factor = costs.factors(c.chunks)
    return {
        "rank": np.nan, "t": c.t, "p": c.p, "d": c.d, "cp": c.cp, "ep": c.ep, "etp": c.etp, "replicate": c.replicate,
        "recompute_layers": c.recompute_layers,
        "micro_batch_size": c.b, "m": c.m, "expert_state_bytes": mem.experts["expert_state_bytes"],
        "schedule": _names(SEARCH_SCHEDULES, c.schedule), "v": c.v, "zero_stage": c.zero,
        "reshard": c.reshard.astype(bool), "tp_comm_overlap": c.tp_comm_overlap.astype(bool),
        "recompute": _names(RECOMPUTE_MODES, c.recompute), "sequence_parallel": c.sp,
        "offload": _names(grid.OFFLOAD_MODES, c.offload),
        "memory_bytes": total, "allocated_bytes": dev["allocated"], "reserve_bytes": dev["reserve"],
        "outside_bytes": dev["outside"], "buffer_bytes": st["buffer_bytes"], "pool_bytes": st["pool_bytes"],
        "step_moment_bytes": st["step_bytes"],
        "memory_accounting": keys,
        "model_state_bytes": st["model_state_bytes"],
        "states_on_gpu_bytes": st["states_on_gpu_bytes"], "zero3_working_bytes": st["zero3_working_bytes"],
        "activation_bytes": acts, "worst_stage": worst, "usable_bytes": usable, "headroom_bytes": usable - total,
        "memory_fraction": total / gpu_bytes, "fits": total <= usable, "inflight": sims["inflight"],
        "inflight_last": sims["inflight_last"], "inflight_middle": sims["inflight_middle"],
        "held_first_stage": sims["held_first_stage"], "held_last_stage": sims["held_last_stage"],
        "bubble_fraction": sims["bubble_fraction"],
        "bubble_vs_ideal": sims["bubble_vs_ideal"], "tf": costs.tf, "tb": costs.tb, "tw": costs.tw,
        "first_stage_factor": first_factor, "last_stage_factor": last_factor, "tp_crosses_node": crosses, **times,
        "timing": timing(reasons, np.isfinite(times["step_time_s"]), groups),
        "feasible": feasible, "reasons": reasons, "warnings": warned, "frameworks": c.frameworks,
    }


def _names(names: tuple[str, ...], codes: np.ndarray) -> np.ndarray:
    """The names of coded choices as an object array sharing one str per name: the same column as the fixed-width
    string array, which pandas (or astype(object)) would turn into 100,000 new str objects."""
    return np.array(names, dtype=object)[codes]
