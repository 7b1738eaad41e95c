"""Timing engine: a Schedule plus costs in, every operation's start and end out (`run_timeline`).

To simulate a parameter set call core.pipeline.result.simulate (it builds, checks and caches, then calls this).

The engine knows nothing of GPipe or 1F1B. It only respects each device's order and the data
dependencies: F of stage s needs F of stage s-1; a backward (B, I, or the recompute R that precedes
it) of stage s needs the backward of stage s+1, or the F of the last stage itself; W needs its I.
An op starts when its device is free and its input has arrived (plus t_comm if it crossed devices).
No closed-form bubble formula is used here: the bubble is measured.

How it stays fast (O(number of ops), vectorised over devices):
- Dependencies inside a device are implied by the device's order, so only cross-device edges matter.
  A "run" is a maximal stretch of a device's ops in which only the first op waits for another
  device; the rest follow back to back. Only run leaders are scheduled; the other ops get their
  times afterwards from cumulative sums.
- Leaders are processed in rounds: each round, every device looks at its next leader; those whose
  input is ready all start at once (numpy over devices). A not-yet-computed time is NaN, and NaN
  flows through max/+ untouched, so "not ready" needs no branches. A round in which no device can
  move while work remains is a deadlock, reported with the stuck operations.
- `run_many` times one schedule under several cost sets in the same rounds (their slots laid end to end), so a
  caller with many cost ratios per schedule (the planner) pays for the rounds about once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import InputError
from core.pipeline.schedules.ir import KIND_GROUP, F, I, R, Schedule, W
from core.pipeline.timeline import Timeline

_ROUNDS_PER_CHECK = 16  # rounds between progress checks (extra rounds after the end are no-ops)
_ELEMENTS_PER_PASS = 2_000_000  # cost sets x ops that run_many times at once (bounds its memory)


@dataclass(frozen=True)
class Costs:
    """Per micro-batch costs of one device's share of the model (a chunk of an interleaved or V schedule
    costs 1/v of it: Schedule.stages_per_device).

    t_b is the input-gradient backward and t_w the weight-gradient part; a schedule that does not
    split the backward runs one B of t_b + t_w. Stage factors multiply every op of a global stage.
    `stage_memory` (not used for timing) is one micro-batch's activations on each global stage, in
    micro-batches of one device's share of layers; empty means equal stages (1/stages_per_device each).
    """

    tf: float = 1.0
    tb: float = 2.0
    tw: float = 0.0
    tcomm: float = 0.0
    stage_factors: tuple[float, ...] = ()
    stage_memory: tuple[float, ...] = ()

    def kind_durations(self, v: float) -> np.ndarray:
        """Duration of F, B, I, W, R for one chunk (v: stages per device)."""
        return np.array([self.tf, self.tb + self.tw, self.tb, self.tw, self.tf], dtype=float) / v

    def factors(self, num_stages: int) -> np.ndarray:
        f = np.ones(num_stages)
        given = np.asarray(self.stage_factors[:num_stages], dtype=float)
        f[: given.size] = given
        return f


@dataclass(frozen=True, eq=False)
class Compiled:
    """Everything that depends on the schedule but not on costs: flat ops, inputs, runs, slots."""

    p: int
    device: np.ndarray
    kind: np.ndarray
    micro: np.ndarray
    chunk: np.ndarray
    stage: np.ndarray
    dep: np.ndarray  # the cross-device op each op waits for, -1 if none
    fused: np.ndarray  # F ops that run overlapped with the next op (the pair takes both times)
    leader: np.ndarray  # run id of every op
    lead_idx: np.ndarray  # first op of every run
    slot: np.ndarray  # slot of every run (device-major, one stop slot after each device's runs)
    dep_slot: np.ndarray  # per slot: the slot whose run holds its input (READY / NEVER when none)
    dep_op: np.ndarray  # per run: the op it waits for, -1 if none
    seg: np.ndarray  # first op of each device
    cost_class: np.ndarray  # kind * stages + stage: an op's duration is table[cost_class]
    waiting_slot: np.ndarray  # slots of the runs that wait for an input ...
    input_op: np.ndarray  # ... the op each of them waits for ...
    input_run: np.ndarray  # ... and that op's run
    op_slot: np.ndarray  # slot of every op's run

    @property
    def num_slots(self) -> int:
        return self.dep_slot.size


def compile_schedule(s: Schedule) -> Compiled:
    """Check the schedule is well formed and resolve every dependency to an op index."""
    if min(len(d) for d in s.devices) == 0:
        raise InputError("malformed schedule: every device needs at least one operation")
    device, kind, micro, chunk, fused = s.flat()
    n = kind.size
    S = s.num_stages
    if kind.min() < 0 or kind.max() > R or chunk.min() < 0 or chunk.max() >= s.v or micro.min() < 0:
        raise InputError("malformed schedule: unknown op kind, chunk or negative micro-batch")
    if s.v == 1 and np.array_equal(s.stage_map.ravel(), np.arange(s.p)):
        stage = device  # one stage per device, in order
    else:
        stage = s.stage_map.ravel()[device * s.v + chunk]
    M = int(micro.max()) + 1
    group = KIND_GROUP[kind]
    key = (group * S + stage) * M + micro  # (group, stage, micro-batch) -> one integer
    index = np.empty(4 * S * M + 1, dtype=np.int64)  # last entry: -1, the "no input" sentinel
    position = np.arange(n)
    index[key] = position
    index[-1] = -1
    per_group = np.bincount(group, minlength=4)
    if per_group[0] != S * M or per_group[1] != S * M or not np.array_equal(index[key], position):
        _explain_bad_counts(key, S, M)  # a duplicate overwrote an earlier op's index, or an op is missing

    # Where an op's input sits relative to its own key, by (kind, is it on the last stage).
    last = stage == S - 1
    dep_key = key + _dep_key_offsets(S, M)[kind * 2 + last]
    dep_key[(kind == F) & (stage == 0)] = -1  # the first stage's forwards wait for nothing
    dep = index[dep_key]
    has = dep_key >= 0
    if (kind == I).sum() != (kind == W).sum() or (kind[dep[kind == W]] != I).any():
        raise InputError("malformed schedule: every split backward I needs exactly one W (and W only follows an I)")
    # A dependency on the same device is satisfied by the device order, or never (it comes later).
    same = np.flatnonzero(has & (device[dep] == device))
    late = same[dep[same] > same]
    if late.size:
        bad = late[:5]
        raise InputError("malformed schedule: these ops come before their own input on the same device: "
                         + _describe(bad, device, kind, micro, stage))
    dep[same] = -1
    if fused.any():  # a fused F's output leaves with its partner, at the end of the pair
        if (kind[fused] != F).any() or (np.flatnonzero(fused) + 1 >= n).any():
            raise InputError("malformed schedule: only a forward can be fused, with the op right after it")
        waits_on_fused = (dep >= 0) & fused[np.maximum(dep, 0)]
        dep[waits_on_fused] += 1

    seg = s.first_op_of_each_device()
    is_leader = dep >= 0
    is_leader[seg] = True
    lead_idx = np.flatnonzero(is_leader)
    leader = np.cumsum(is_leader) - 1
    # Runs in slots, device by device, each device followed by one stop slot that never gets ready;
    # two extra slots at the end: READY (an input available at time 0) and NEVER.
    L = lead_idx.size
    slot = np.arange(L) + device[lead_idx]
    num_slots = L + s.p
    READY, NEVER = num_slots, num_slots + 1
    dep_op = dep[lead_idx]
    dep_slot = np.full(num_slots, NEVER, dtype=np.int64)
    dep_slot[slot] = np.where(dep_op >= 0, slot[leader[dep_op]], READY)
    waits = np.flatnonzero(dep_op >= 0)
    input_op = dep_op[waits]
    return Compiled(s.p, device, kind, micro, chunk, stage, dep, fused, leader, lead_idx, slot, dep_slot, dep_op,
                    seg, kind * S + stage, slot[waits], input_op, leader[input_op], slot[leader])


def _dep_key_offsets(S: int, M: int) -> np.ndarray:
    """key(input) - key(op), indexed by kind*2 + on-last-stage (groups: 0 F, 1 B/I, 2 W, 3 R)."""
    g = S * M
    #                 F(mid) F(last)  B(mid) B(last)  I(mid) I(last)  W      W      R(mid)      R(last)
    return np.array([-M, -M, M, -g, M, -g, -g, -g, -2 * g + M, -3 * g], dtype=np.int64)


def _explain_bad_counts(key, S, M) -> None:
    """Say which (stage, micro-batch) lacks its F or backward, or has an op twice; then refuse."""
    counts = np.bincount(key, minlength=4 * S * M).reshape(4, S, M)
    names = ["F", "backward (B or I)", "W", "recompute R"]
    problems = []
    for g in range(4):
        wrong = np.argwhere(counts[g] != 1) if g < 2 else np.argwhere(counts[g] > 1)
        for st, mb in wrong[:3]:
            expected = "exactly 1" if g < 2 else "at most 1"
            problems.append(f"{names[g]} of stage {st}, micro-batch {mb} appears {counts[g, st, mb]}x "
                            f"(expected {expected})")
    raise InputError("malformed schedule: " + "; ".join(problems[:5]))


def _describe(idx, device, kind, micro, stage) -> str:
    return ", ".join(f"device {device[i]} {'FBIWR'[kind[i]]}{micro[i]} (stage {stage[i]})" for i in idx)


def run_timeline(s: Schedule, costs: Costs, compiled: Compiled | None = None) -> Timeline:
    """Simulate `s` with `costs`; pass `compiled` to reuse the dependency analysis across cost changes."""
    return run_many(s, (costs,), compiled)[0]


def run_many(s: Schedule, costs: Sequence[Costs], compiled: Compiled | None = None) -> list[Timeline]:
    """Simulate `s` once per entry of `costs`, in the same rounds (each timeline exactly as `run_timeline` gives it): a
    caller asking one schedule with many cost ratios pays for the rounds about once."""
    return run_shapes([(s, costs, compiled)])[0]


def run_shapes(jobs: Sequence[tuple[Schedule, Sequence[Costs], Compiled | None]],
               each: Callable[[Timeline], Any] | None = None) -> list[list]:
    """`run_many` for several schedules at once: every (schedule, cost sets) job moves in the same rounds, so the
    rounds are paid about once for the longest schedule rather than once per schedule (the planner asks dozens of
    shapes per plan). Each timeline is exactly what `run_timeline` gives for its schedule and costs; with `each`, only
    each(timeline) is kept (a caller that wants a few numbers per timeline need not hold them all)."""
    compiled = [c or compile_schedule(s) for s, _, c in jobs]
    pieces, passes, size = [], [], 0  # (job, first cost set, last) pieces, packed into passes of bounded size
    for j in sorted(range(len(jobs)), key=lambda j: -len(jobs[j][1])):  # alike widths share a pass
        costs, c = jobs[j][1], compiled[j]
        per_pass = max(1, _ELEMENTS_PER_PASS // c.kind.size)
        for lo in range(0, len(costs), per_pass):
            hi = min(lo + per_pass, len(costs))
            if pieces and size + (hi - lo) * c.kind.size > _ELEMENTS_PER_PASS:
                passes.append(pieces)
                pieces, size = [], 0
            pieces.append((j, lo, hi))
            size += (hi - lo) * c.kind.size
    if pieces:
        passes.append(pieces)
    out: list[list[Timeline]] = [[] for _ in jobs]
    for pieces in passes:
        parts = []
        for j, lo, hi in pieces:
            s, c, costs = jobs[j][0], compiled[j], jobs[j][1][lo:hi]
            tables = [(k.kind_durations(s.stages_per_device)[:, None] * k.factors(s.num_stages)[None, :]).ravel()
                      for k in costs]
            dur = np.stack(tables, axis=1).take(c.cost_class, axis=0)  # op by op, a column per cost set
            if c.fused.any():  # the pair starts together; drawn as one block of F&B = F + B on the partner
                idx = np.flatnonzero(c.fused)
                dur[idx + 1] += dur[idx]
                dur[idx] = 0.0
            parts.append((c, dur, np.array([k.tcomm for k in costs], dtype=float)))
        for (j, lo, hi), (c, dur, _), start in zip(pieces, parts, _schedule_runs(parts), strict=True):
            s, costs = jobs[j][0], jobs[j][1][lo:hi]
            dur, start = np.ascontiguousarray(dur.T), start.T  # a row per cost set
            made = (Timeline.build(s, c, start[i], dur[i], k) for i, k in enumerate(costs))
            out[j] += [each(tl) for tl in made] if each else list(made)
    return out


def _schedule_runs(parts: Sequence[tuple[Compiled, np.ndarray, np.ndarray]]) -> list[np.ndarray]:
    """Start times of every op of each part (a compiled schedule, `dur` with a row per op and a column per cost set,
    each cost set's t_comm), laid out as `dur`.

    Whether a run can start in a round depends only on the schedule (its input was computed in an earlier round or
    not; the times never decide it), so a device's cost sets move together: one pointer per device of every part,
    each slot a row of K numbers (one per cost set, padded to the widest part with zeros that nothing reads). One
    round moves every device of every part; each number comes from its own cost set's entries only (the same float
    operations as one cost set alone). A device at its stop slot leaves the rounds."""
    width = max(dur.shape[1] for _, dur, _ in parts)
    starts = np.cumsum([0] + [c.num_slots + 2 for c, _, _ in parts])  # each part's slots, then its READY and NEVER
    rdur = np.zeros((starts[-1], width))
    dep_add = np.zeros((starts[-1], width))
    val = np.full((starts[-1], width), np.nan)  # start time of each run; NaN until computed
    dep_slot = np.zeros(starts[-1], dtype=np.int64)
    ptrs, stops, layout = [], [], []
    for (c, dur, tcomm), offset in zip(parts, starts.tolist(), strict=False):
        K, S = dur.shape[1], c.num_slots
        # Offsets inside runs. For a leader, cum - dur - base is exactly 0 (the same float operations).
        cum = np.cumsum(dur, axis=0)
        base = cum.take(c.lead_idx, axis=0) - dur.take(c.lead_idx, axis=0)  # cumulative duration before each run
        rdur[offset + c.slot, :K] = np.diff(base, append=cum[-1:], axis=0)  # each run's length
        dep_add[offset + c.waiting_slot, :K] = (cum.take(c.input_op, axis=0) - base.take(c.input_run, axis=0)
                                                + tcomm[None, :])  # input ready this long after its run starts
        dep_slot[offset:offset + S] = c.dep_slot + offset
        val[offset + S] = 0.0  # READY
        last_run = c.slot[c.leader[np.append(c.seg[1:], c.kind.size) - 1]]
        ptrs.append(c.slot[c.leader[c.seg]] + offset)
        stops.append(last_run + 1 + offset)  # each device's stop slot
        layout.append((offset, K, cum, base))
    ptr, stop = np.concatenate(ptrs), np.concatenate(stops)
    free = np.zeros((ptr.size, width) if width > 1 else ptr.size)
    entry = np.arange(ptr.size)  # each pointer's place among all devices (to name a deadlock)
    # Pointers only move forward, so their sum tells progress: one numpy call per check. Only batches (several
    # shapes or cost sets) drop finished devices; for one schedule that costs more checks than it saves.
    shrink = width > 1 or len(parts) > 1
    flat = (val.ravel(), dep_add.ravel(), rdur.ravel()) if width == 1 else None
    goal, last = int(stop.sum()), -1
    while True:
        if flat is None:
            _rounds(val, dep_slot, dep_add, rdur, free, ptr)
        else:  # one cost set: the same operations on flat arrays (fewer numpy calls per round)
            _rounds_flat(flat[0], dep_slot, flat[1], flat[2], free, ptr)
        moved = int(ptr.sum())
        if moved == goal:
            break
        if moved == last:
            _raise_deadlock_in(parts, layout, np.concatenate(stops), entry, ptr)
        last = moved
        if shrink:
            done = ptr == stop
            if done.any():  # devices that finished leave the rounds (nothing waits on their pointer)
                keep = ~done
                ptr, stop, free, entry = ptr[keep], stop[keep], free[keep], entry[keep]
                goal, last = int(stop.sum()), int(ptr.sum())
    out = []
    for (c, dur, _), (offset, K, cum, base) in zip(parts, layout, strict=True):
        within = cum - dur
        within -= base.take(c.leader, axis=0)
        out.append(val.take(offset + c.op_slot, axis=0)[:, :K] + within)
    return out


def _rounds(val, dep_slot, dep_add, rdur, free, ptr) -> None:
    """_ROUNDS_PER_CHECK rounds, each slot a row of cost sets (a round costs a few us: a handful of numpy calls)."""
    fmax, maximum = np.fmax, np.maximum
    row = np.dtype((np.void, val.itemsize * val.shape[1]))  # a slot's numbers as one item: a row is one copy
    rows = val.view(row).ravel()
    for _ in range(_ROUNDS_PER_CHECK):
        de = val.take(dep_slot.take(ptr), axis=0)
        de += dep_add.take(ptr, axis=0)
        st = maximum(free, de)  # NaN unless the input is ready (in every column alike)
        rows[ptr] = st.view(row).ravel()
        rd = rdur.take(ptr, axis=0)
        rd += st
        fmax(free, rd, out=free)
        first = st[:, 0]
        ptr += first == first


def _rounds_flat(val, dep_slot, dep_add, rdur, free, ptr) -> None:
    """_rounds with one cost set."""
    fmax, maximum = np.fmax, np.maximum
    for _ in range(_ROUNDS_PER_CHECK):
        de = val[dep_slot[ptr]]
        de += dep_add[ptr]
        st = maximum(free, de)  # NaN unless the input is ready
        val[ptr] = st
        rd = rdur[ptr]
        rd += st
        fmax(free, rd, out=free)
        ptr += st == st


def _raise_deadlock_in(parts, layout, stop, entry, ptr) -> None:
    """Name the stuck operations of the first schedule that cannot finish."""
    full = stop.copy()  # devices no longer in the rounds sit at their stop slot
    full[entry] = ptr
    at = 0
    for (c, _, _), (offset, *_) in zip(parts, layout, strict=True):
        if (full[at:at + c.p] != stop[at:at + c.p]).any():
            _raise_deadlock(c, full[at:at + c.p] - offset)
        at += c.p


def _raise_deadlock(c: Compiled, ptr) -> None:
    slot_to_op = dict(zip(c.slot.tolist(), c.lead_idx.tolist(), strict=True))
    stuck = [slot_to_op[s] for s in ptr.tolist() if s in slot_to_op]
    waits = []
    for i in stuck[:6]:
        d = c.dep[i]
        waits.append(f"device {c.device[i]} {'FBIWR'[c.kind[i]]}{c.micro[i]} (stage {c.stage[i]}) waits for "
                     f"device {c.device[d]} {'FBIWR'[c.kind[d]]}{c.micro[d]} (stage {c.stage[d]})")
    raise InputError("deadlock: no device can proceed; " + "; ".join(waits))
