"""The pipeline simulator as the planner asks it: one simulation per distinct (schedule, p, m, v, rounded costs),
shared by every candidate with that key and kept in bounded caches across plans (a page rerun with other
step-time assumptions re-simulates nothing it has seen), within a per-plan budget of simulated operations.

The numbers come from the same engine as the Pipeline page (core.pipeline.schedules.build, core.pipeline.simulate):
no closed-form bubble is used. The budget goes where it can change the answer: the micro-batches in flight are the
schedule's order alone (place_all, before any simulation), so the planner simulates (simulate_all) only candidates
that fit with them and break no other rule.
"""

from __future__ import annotations

import numpy as np

from core.cost import step_time
from core.errors import InputError
from core.model import stage_split
from core.params.pipeline import MAX_OPS, PIPELINE
from core.params.planner import SEARCH_SCHEDULES
from core.pipeline.schedules import REGISTRY, build, estimated_ops
from core.pipeline.schedules.ir import Schedule
from core.pipeline.simulate import Compiled, Costs, compile_schedule, run_shapes
from core.pipeline.timeline import end_counts, peak_held, weighted_ends
from core.planner.groups import distinct

_SIM_CACHE: dict[tuple, tuple[float, ...] | str] = {}
_SIM_CACHE_MAX = 8192
_COMPILED: dict[tuple, tuple[int, bool, Schedule, Compiled] | str] = {}  # (schedule, p, m, v) -> its structure
_COMPILED_MAX = 512
_ORDER: dict[tuple, tuple[float, float] | str] = {}  # (schedule, p, m, v, ends) -> in_flight
# Compiled schedules kept between plans, in operations (~75 bytes each: 2,000,000 hold ~150 MB). A plan may compile
# up to SIM_BUDGET operations (~0.9 GB at the largest questions); keeping them all made the planner hold 877 MB
# after one Megatron-1T question on 55,440 GPUs. The oldest are dropped after each plan.
_COMPILED_KEPT_OPS = 2_000_000
# Simulation work one plan may do, in operations: building and compiling a schedule counts its operations plus
# SIM_SETUP_OPS, each simulated cost set its operations. A few seconds at most on the 2-core development machine;
# only searches over thousands of candidates that fit reach it, and what it leaves out is named.
SIM_BUDGET = 12_000_000
SIM_SETUP_OPS = 10_000
# The budget counts the work as a plan from nothing does it, whatever the caches hold: a shape's building once per
# plan, each simulated key's operations, cached or not. So the budget rules out the same candidates on a cold server
# as on a warm one, and a shared link shows every replica the same plan; the caches only save the time.
# Placing candidates (building their schedules to read the micro-batches in flight) may spend at most PLACE_SHARE of
# it, so that what fits can still be simulated: Megatron-1T on 55,440 GPUs with eight micro-batch sizes spent the
# whole budget placing 30,247 candidates and timed 38 (best step 163 s, 117 s with the budget lifted); with half
# for placing it times 2,352 (best 143 s). The questions below 100,000 candidates place with 2 M operations or less.
PLACE_SHARE = 0.5
# Simulation keys round the cost ratios (t_b / t_f, t_w / t_f) and the end stages' cost factors to these steps:
# candidates whose costs differ by less share one simulation. The planner applies the simulated makespan / busy
# ratio to each candidate's own busy time, so the rounding moves a step time by about step x bubble share.
RATIO_STEP = {False: 0.5, True: 0.1}  # schedules that do not split the backward barely depend on t_b / t_f
FACTOR_STEP = 0.02
MAX_SIM_M = int(PIPELINE["m"].hi)  # the Pipeline page's range: every reported bubble can be opened there


def schedule_structure(schedule: str, p: int, m: int, v: int) -> tuple[int, bool, Schedule, Compiled] | str:
    """The schedule's structure (stages, whether the last stage is on the first device, compiled dependencies),
    built once per (schedule, p, m, v) and kept (bounded), or why the simulator refuses it."""
    key = (schedule, p, m, v)
    if key not in _COMPILED:
        out = _structure(*key)
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.clear()
        _COMPILED[key] = out
    return _COMPILED[key]


def _structure(schedule: str, p: int, m: int, v: int) -> tuple[int, bool, Schedule, Compiled] | str:
    try:
        if estimated_ops(schedule, p, m, v) > MAX_OPS:
            raise InputError(f"{schedule} with p = {p}, m = {m} exceeds the simulator's {MAX_OPS:,} operations")
        s = build(schedule, p, m, v)
        last_device = int(np.argwhere(s.stage_map == s.num_stages - 1)[0, 0])
        return s.num_stages, last_device == 0 and p > 1, s, compile_schedule(s)
    except InputError as exc:
        return str(exc)


def simulated(schedule: str, p: int, m: int, v: int, tb: float = 2.0, tw: float = 0.0, first: float = 1.0,
              last: float = 1.0) -> tuple[float, ...] | str:
    """(idle share, bubble relative to ideal, makespan / busiest device's busy time, peak micro-batches in flight on
    the first stage's device, on the last stage's device, 1.0 if both stages share a device) for `schedule` with
    t_f = 1, t_b, t_w and the first and last global stage's cost factors, or why the simulator refuses it.

    The same engine as core.pipeline.simulate (build, compile, run), without keeping the timeline.
    """
    key = (schedule, p, m, v, tb, tw, first, last)
    got = _SIM_CACHE.get(key)
    return got if got is not None else _simulate([key])[0]


def _simulate(keys: list[tuple]) -> list[tuple[float, ...] | str]:
    """`simulated` for each key, cached: all keys run in one core.pipeline.simulate.run_shapes (the rounds of every
    (schedule, p, m, v) shape and its cost sets run together), and the micro-batches in flight, which the schedule's
    order alone sets, are counted once per schedule."""
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key[:4], []).append(i)
    results: list = [None] * len(keys)
    jobs, shapes = [], []
    for (schedule, p, m, v), members in groups.items():
        structure = schedule_structure(schedule, p, m, v)
        if isinstance(structure, str):
            for i in members:
                results[i] = structure
            continue
        stages, v_shape, sched, compiled = structure
        costs = []
        for i in members:
            tb, tw, first, last = keys[i][4:]
            factors = np.ones(stages)
            factors[0] *= first
            factors[-1] *= last
            costs.append(Costs(1.0, tb, tw, 0.0, tuple(factors)))
        jobs.append((sched, costs, compiled))
        shapes.append((members, 0 if v_shape else p - 1, v_shape))
    counted: set[int] = set()

    def numbers(tl) -> tuple:  # what the planner keeps of a timeline; in flight: of each schedule's first one
        first = id(tl.schedule) not in counted
        counted.add(id(tl.schedule))
        return (tl.bubble_fraction, tl.bubble_vs_ideal, tl.makespan / float(tl.busy.max()),
                tl.peak_inflight if first else None)

    for (members, last_device, v_shape), got in zip(shapes, run_shapes(jobs, numbers), strict=True):
        inflight = got[0][3]
        for i, (bubble, vs_ideal, makespan, _) in zip(members, got, strict=True):
            results[i] = (bubble, vs_ideal, makespan, float(inflight[0]), float(inflight[last_device]),
                          float(v_shape))
    for key, got in zip(keys, results, strict=True):
        if len(_SIM_CACHE) >= _SIM_CACHE_MAX:
            _SIM_CACHE.clear()
        _SIM_CACHE[key] = got
    return results


def trim_compiled() -> None:
    """Drop the oldest compiled schedules until those kept hold at most _COMPILED_KEPT_OPS operations (the planner
    calls it once a plan has built and simulated what it needs)."""
    held = {k: int(v[3].device.size) for k, v in _COMPILED.items() if not isinstance(v, str)}  # ops compiled
    total = sum(held.values())
    for k, ops in held.items():
        if total <= _COMPILED_KEPT_OPS:
            break
        del _COMPILED[k]
        total -= ops


def clear_cache() -> None:
    """Forget every simulated key and compiled schedule (benchmarks measure cold runs with it)."""
    _SIM_CACHE.clear()
    _COMPILED.clear()
    _ORDER.clear()


def simulated_costs(schedule, tf, tb, tw, first, last, p, split=None) -> dict[str, np.ndarray]:
    """The costs a candidate is simulated with, relative to its t_f: t_b / t_f and t_w / t_f (t_w folded into t_b
    where the schedule does not split the backward) and the first and last stage's cost factors, each rounded to
    RATIO_STEP / FACTOR_STEP (the factors to 1 when p = 1). The Pipeline page link carries exactly these.
    `split`: whether each schedule splits the backward, when the caller has it already (the planner, from the
    schedules' codes: deriving it from 100,000 names costs a re-plan milliseconds)."""
    if split is None:
        names = np.asarray(schedule)
        split = np.zeros(names.shape, dtype=bool)
        for name in set(names.ravel().tolist()):  # a handful of schedules over many candidates
            split[names == name] = REGISTRY[name].split_backward
    step = np.where(split, RATIO_STEP[True], RATIO_STEP[False])
    tf = np.maximum(np.asarray(tf, dtype=float), 1e-30)
    b = np.where(split, tb, np.asarray(tb) + np.asarray(tw)) / tf
    w = np.where(split, tw, 0.0) / tf
    single = np.asarray(p) == 1
    return {"split": split, "tb": np.maximum(np.round(b / step), 1) * step, "tw": np.round(w / step) * step,
            "first": np.where(single, 1.0, np.maximum(1.0 + np.round((np.asarray(first) - 1.0) / FACTOR_STEP)
                                                      * FACTOR_STEP, FACTOR_STEP)),
            "last": np.where(single, 1.0, np.maximum(1.0 + np.round((np.asarray(last) - 1.0) / FACTOR_STEP)
                                                     * FACTOR_STEP, FACTOR_STEP))}


def sim_codes(c: dict, costs: step_time.StageCosts) -> np.ndarray:
    """Per candidate, the integer simulation key: schedule, p, m, v, split, then simulated_costs in steps."""
    first, last = costs.factors(c["chunks"])
    split = np.array([REGISTRY[s].split_backward for s in SEARCH_SCHEDULES])[c["schedule"]]
    q = simulated_costs(c["schedule_name"], costs.tf, costs.tb, costs.tw, first, last, c["p"], split)
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


SIM_FIELDS = ("bubble_fraction", "bubble_vs_ideal", "makespan_factor")
ORDER_FIELDS = ("inflight", "inflight_last", "inflight_middle", "held_first_stage", "held_last_stage")


def in_flight(schedule: str, p: int, m: int, v: int, keep: bool = True, ends: tuple[float, float] | None = None
              ) -> tuple[float, ...] | str:
    """ORDER_FIELDS: (peak micro-batches in flight on the first stage's device, on the last stage's device, the most
    on any other device: 0 when there is none; those the first and the last stage themselves hold) of the schedule's
    order alone (core.pipeline.timeline.peak_held: the count the simulated timeline reports, read without running
    it), or why the simulator refuses the schedule. Kept across plans, a few numbers per (schedule, p, m, v, ends);
    the compiled schedule is kept for the simulator only with `keep`. `ends`: the first and the last stage's layers
    relative to a middle stage's where the embedding and the loss take layer slots (stage_split.end_ratios); the end
    devices' counts are then their layer-weighted peaks over their layers, so that the memory model's count x layers
    is what they hold (an interleaved last device holding four micro-batches of its layer chunk and one of its loss-only
    chunk holds four layers' worth, not 2.5)."""
    key = (schedule, p, m, v, ends)
    got = _ORDER.get(key)
    if got is None:
        base = key[:4]
        structure = schedule_structure(*base) if keep else _COMPILED.get(base) or _structure(*base)
        if isinstance(structure, str):
            got = structure
        else:
            _, v_shape, sched, compiled = structure
            peak = peak_held(compiled.kind, compiled.seg, sched.stages_per_device)
            last = 0 if v_shape else p - 1
            got = end_counts(peak, compiled.kind, compiled.stage, last)
            if ends is not None and sched.stages_per_device > 1 and not v_shape:
                got = (*weighted_ends(compiled, sched.num_stages, sched.stages_per_device, last, ends), *got[2:])
        if len(_ORDER) >= _SIM_CACHE_MAX:
            _ORDER.clear()
        _ORDER[key] = got
    return got


def last_on_first(c: dict) -> np.ndarray:
    """Per candidate: whether the last global stage sits on the first device (a V-shaped schedule with p > 1), from
    each schedule's stage map (core.pipeline.schedules.record.Entry.stage_map): no schedule is built."""
    out = np.zeros(c["t"].size, dtype=bool)
    combos, _, inverse = distinct([c["schedule"], c["p"], c["chunks"]])
    for i, (s, p, v) in enumerate(combos.tolist()):
        stage_map = REGISTRY[SEARCH_SCHEDULES[s]].stage_map(p, v)
        device = int(np.argwhere(stage_map == stage_map.max())[0, 0])
        out[inverse == i] = device == 0 and p > 1
    return out


def _spent() -> str:
    return (f"the plan's simulation budget ({SIM_BUDGET:,} operations) is spent; pin t, p or the micro-batch size "
            "to narrow the search")


def place_all(c: dict, codes: np.ndarray, want: np.ndarray, spent: int = 0, keep: bool = True,
              paid: set | None = None, split: tuple[int, int] | None = None
              ) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """Per candidate where `want`: the micro-batches in flight (ORDER_FIELDS, from each schedule's order: built and
    compiled once per (schedule, p, m, v), nothing simulated), NaN elsewhere; the refusal (or "") per candidate;
    the operations spent of SIM_BUDGET so far (`spent` before). A shape costs its estimated operations plus
    SIM_SETUP_OPS, counted before it is built, once per plan (`paid`: the shapes this plan has counted, updated;
    cached or not, see SIM_BUDGET); a shape the simulator refuses costs nothing; the most shared shapes come first.
    `keep`: keep the compiled schedules for simulate_all, within PLACE_SHARE of the budget (False: candidates that
    are never simulated, placed with what the simulations left, so that their schedules are not held in memory).
    `split`: (layers, prediction depths) where the ends take layer slots, for the end devices' weighted counts."""
    paid = set() if paid is None else paid
    n = c["t"].size
    out = {k: np.full(n, np.nan) for k in ORDER_FIELDS}
    refused = np.full(n, "", dtype=object)
    rows = np.flatnonzero(want)
    if rows.size == 0:
        return out, refused, spent
    shapes, _, inverse = distinct(codes[rows, :4].T)
    values = np.full((len(shapes), len(ORDER_FIELDS)), np.nan)
    why = np.full(len(shapes), "", dtype=object)
    for i in np.argsort(-np.bincount(inverse, minlength=len(shapes)), kind="stable"):
        s, p, m, v = shapes[i].tolist()
        key = (SEARCH_SCHEDULES[s], p, m, v)
        ops = estimated_ops(*key)
        cost = 0 if key in paid or ops > MAX_OPS else ops + SIM_SETUP_OPS
        if spent + cost > SIM_BUDGET * (PLACE_SHARE if keep else 1.0):
            why[i] = _spent()
            continue
        ends = stage_split.end_ratios(split[0], split[1], p, v) if split and v > 1 else None
        got = in_flight(*key, keep=keep, ends=ends)
        if not isinstance(got, str) and not np.isfinite(got[0]):
            got = in_flight(*key, keep=keep)  # an end device with no layers: the plain count
        if isinstance(got, str):
            why[i] = got  # refused while being built: it cost a check, not a simulation
            continue
        spent += cost
        paid.add(key)
        values[i] = got
    for j, k in enumerate(out):
        out[k][rows] = values[inverse, j]
    refused[rows] = why[inverse]
    return out, refused, spent


def simulate_all(c: dict, codes: np.ndarray, want: np.ndarray, spent: int = 0, paid: set | None = None,
                 promise=None) -> tuple[dict[str, np.ndarray], np.ndarray, int, int]:
    """Per candidate where `want`: the simulator's numbers (SIM_FIELDS; simulating what the cache lacks, within
    what `spent` left of SIM_BUDGET), NaN elsewhere; the simulator's refusal (or "") per candidate; the number of
    distinct keys simulated now; the operations spent so far. Every key counts its operations, cached or not, and
    its shape's building unless this plan counted it (`paid`, from place_all): the budget's verdict does not
    depend on what the caches hold (SIM_BUDGET). Where the budget cannot take every key, the keys whose candidates
    can be fastest go first: `promise()` gives each candidate's step time without its bubble, a lower bound (NaN
    where unknown); without it, or with room for all, the most shared keys go first."""
    paid = set() if paid is None else paid
    n = c["t"].size
    out = {k: np.full(n, np.nan) for k in SIM_FIELDS}
    refused = np.full(n, "", dtype=object)
    rows = np.flatnonzero(want)
    if rows.size == 0:
        return out, refused, 0, spent
    unique, _, inverse = distinct(codes[rows].T)
    users = np.bincount(inverse, minlength=len(unique))  # candidates that need each key
    fresh, todo = 0, []
    values = np.full((len(unique), len(SIM_FIELDS)), np.nan)
    why = np.full(len(unique), "", dtype=object)

    def record(i: int, got: tuple | str) -> None:
        if isinstance(got, str):
            why[i] = got
        else:
            values[i] = got[:len(SIM_FIELDS)]

    # Each key's cost from its shape's, worked out once per shape (thousands of keys share a few hundred shapes).
    shapes, _, shape_of = distinct(unique[:, :4].T)
    names = [(SEARCH_SCHEDULES[s], p, m, v) for s, p, m, v in shapes.tolist()]
    ops = [estimated_ops(*k) for k in names]
    unpaid = [k not in paid for k in names]
    order = np.argsort(-users, kind="stable")  # the most shared keys first
    every = int(np.asarray(ops, dtype=np.int64)[shape_of].sum()) + SIM_SETUP_OPS * sum(unpaid)
    if promise is not None and spent + every > SIM_BUDGET:
        bound = np.asarray(promise(), dtype=float)[rows]  # the budget binds: the keys that can hold the best rows
        best = np.full(len(unique), np.inf)
        np.minimum.at(best, inverse, np.where(np.isfinite(bound), bound, np.inf))
        order = np.lexsort((-users, best))
    for i in order:
        j = int(shape_of[i])
        cost = ops[j] + (SIM_SETUP_OPS if unpaid[j] else 0)
        if spent + cost > SIM_BUDGET:
            why[i] = _spent()
            continue
        spent += cost
        if unpaid[j]:
            unpaid[j] = False
            paid.add(names[j])
        key = _key_of(unique[i])
        got = _SIM_CACHE.get(key)
        if got is not None:
            record(i, got)
            continue
        fresh += 1
        todo.append(i)
    for i, got in zip(todo, _simulate([_key_of(unique[i]) for i in todo]), strict=True):
        record(i, got)
    for j, k in enumerate(out):
        out[k][rows] = values[inverse, j]
    refused[rows] = why[inverse]
    return out, refused, fresh, spent

