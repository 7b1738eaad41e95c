"""Timing engine: a Schedule plus costs in, every operation's start and end out.

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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.errors import InputError
from core.schedules.ir import KIND_GROUP, F, I, R, Schedule
from core.timeline import Timeline

_ROUNDS_PER_CHECK = 16  # rounds between progress checks (extra rounds after the end are no-ops)
# Input of an op, indexed by kind*2 + (on the last stage): group and stage offset of the op it waits for.
#                        F(mid) F(last) B(mid) B(last) I(mid) I(last) W   W    R(mid) R(last)
_DEP_GROUP = np.array([0,     0,      1,     0,      1,     0,      1,  1,   1,     0], dtype=np.int64)
_DEP_SHIFT = np.array([-1,    -1,     1,     0,      1,     0,      0,  0,   1,     0], dtype=np.int64)


@dataclass(frozen=True)
class Costs:
    """Per micro-batch costs of one device's share of the model (a chunk costs 1/v of it).

    t_b is the input-gradient backward and t_w the weight-gradient part; a schedule that does not
    split the backward runs one B of t_b + t_w. Stage factors multiply every op of a global stage.
    """

    tf: float = 1.0
    tb: float = 2.0
    tw: float = 0.0
    tcomm: float = 0.0
    stage_factors: tuple[float, ...] = ()

    def kind_durations(self, v: int) -> np.ndarray:
        """Duration of F, B, I, W, R for one chunk."""
        return np.array([self.tf, self.tb + self.tw, self.tb, self.tw, self.tf], dtype=float) / v

    def factors(self, num_stages: int) -> np.ndarray:
        f = np.ones(num_stages)
        given = np.asarray(self.stage_factors[:num_stages], dtype=float)
        f[: given.size] = given
        return f


@dataclass(frozen=True, eq=False)
class Compiled:
    """Flat op arrays and the leader/run structure; depends on the schedule, not on costs."""

    device: np.ndarray
    kind: np.ndarray
    micro: np.ndarray
    chunk: np.ndarray
    stage: np.ndarray
    dep: np.ndarray  # index of the cross-device op this op waits for, -1 if none
    is_leader: np.ndarray
    leader: np.ndarray  # leader index (run id) of every op
    fused: np.ndarray  # F ops that run overlapped with the next op (the pair takes both times)


def compile_schedule(s: Schedule) -> Compiled:
    """Check the schedule is well formed and resolve every dependency to an op index."""
    device, kind, micro, chunk, fused = s.flat()
    n = kind.size
    S = s.num_stages
    if min(len(d) for d in s.devices) == 0:
        raise InputError("malformed schedule: every device needs at least one operation")
    if (kind < 0).any() or (kind > R).any() or (chunk < 0).any() or (chunk >= s.v).any() or (micro < 0).any():
        raise InputError("malformed schedule: unknown op kind, chunk or negative micro-batch")
    stage = s.stage_map[device, chunk]
    M = int(micro.max()) + 1
    key = (KIND_GROUP[kind] * S + stage) * M + micro
    _check_each_op_once(key, kind, stage, micro, S, M)
    index = np.full(4 * S * M, -1, dtype=np.int64)
    index[key] = np.arange(n)

    # The input of each op, by (kind, is it on the last stage): its group and its stage offset.
    rule = kind * 2 + (stage == S - 1)
    dep_key = (_DEP_GROUP[rule] * S + stage + _DEP_SHIFT[rule]) * M + micro
    has = ~((kind == F) & (stage == 0))
    dep = np.where(has, index[np.where(has, dep_key, 0)], -1)
    if (has & (dep < 0)).any():
        bad = np.flatnonzero(has & (dep < 0))[:5]
        raise InputError("malformed schedule: missing inputs for " + _describe(bad, device, kind, micro, stage))

    # A dependency on the same device is satisfied by the device order, or never (it comes later).
    same = has & (device[dep] == device)
    late = same & (dep > np.arange(n))
    if late.any():
        bad = np.flatnonzero(late)[:5]
        raise InputError("malformed schedule: these ops come before their own input on the same device: "
                         + _describe(bad, device, kind, micro, stage))
    dep[same] = -1
    if fused.any():  # a fused F's output leaves with its partner, at the end of the pair
        if (kind[fused] != F).any() or (np.flatnonzero(fused) + 1 >= n).any():
            raise InputError("malformed schedule: only a forward can be fused, with the op right after it")
        partner = np.flatnonzero(fused) + 1
        redirect = np.full(n, -1, dtype=np.int64)
        redirect[partner - 1] = partner
        waits_on_fused = (dep >= 0) & fused[np.maximum(dep, 0)]
        dep[waits_on_fused] = redirect[dep[waits_on_fused]]

    is_leader = dep >= 0
    is_leader[s.first_op_of_each_device()] = True
    leader = np.cumsum(is_leader) - 1
    return Compiled(device, kind, micro, chunk, stage, dep, is_leader, leader, fused)


def _check_each_op_once(key, kind, stage, micro, S, M) -> None:
    """Each (stage, micro-batch) needs one F, one backward (B or I), one W iff split, at most one R."""
    counts = np.bincount(key, minlength=4 * S * M).reshape(4, S, M)
    split = np.zeros((S, M), dtype=np.int64)
    split[stage[kind == I], micro[kind == I]] = 1
    names = ["F", "backward (B or I)", "W", "recompute R"]
    problems = []
    for g, need in enumerate((1, 1, split, None)):
        wrong = np.argwhere(counts[g] > 1) if need is None else np.argwhere(counts[g] != need)
        for st, mb in wrong[:3]:
            expected = "at most 1" if need is None else int(np.broadcast_to(need, (S, M))[st, mb])
            problems.append(f"{names[g]} of stage {st}, micro-batch {mb} appears {counts[g, st, mb]}x "
                            f"(expected {expected})")
    if problems:
        raise InputError("malformed schedule: " + "; ".join(problems[:5]))


def _describe(idx, device, kind, micro, stage) -> str:
    return ", ".join(f"device {device[i]} {'FBIWR'[kind[i]]}{micro[i]} (stage {stage[i]})" for i in idx)


def run(s: Schedule, costs: Costs, compiled: Compiled | None = None) -> Timeline:
    """Simulate `s` with `costs`; pass `compiled` to reuse the dependency analysis across cost changes."""
    c = compiled or compile_schedule(s)
    dur = costs.kind_durations(s.v)[c.kind] * costs.factors(s.num_stages)[c.stage]
    if c.fused.any():  # the pair starts together; drawn as one block of F&B = F + B on the partner
        idx = np.flatnonzero(c.fused)
        dur[idx + 1] += dur[idx]
        dur[idx] = 0.0
    start = _schedule_runs(c, dur, costs.tcomm, s.p)
    return Timeline.build(s, c.device, c.kind, c.micro, c.chunk, c.stage, start, start + dur, costs)


def _schedule_runs(c: Compiled, dur: np.ndarray, tcomm: float, p: int) -> np.ndarray:
    lead_idx = np.flatnonzero(c.is_leader)
    L = lead_idx.size
    # Time from the run's start to each op's start. Leaders get an exact 0 and run lengths are summed
    # per run, so long timelines do not accumulate the round-off of one global cumulative sum.
    cum = np.cumsum(dur)
    cum_excl = cum - dur - (cum[lead_idx] - dur[lead_idx])[c.leader]
    cum_excl[lead_idx] = 0.0
    run_dur = np.add.reduceat(dur, lead_idx)

    # Leader arrays with one stop slot after each device's leaders; two extra slots at the end:
    # READY (time 0, for leaders without an input) and NEVER (NaN, for the stop slots).
    lead_dev = c.device[lead_idx].astype(np.int64)
    pos = np.arange(L) + lead_dev  # slot of each leader once stop slots are inserted
    slots = L + p
    READY, NEVER = slots, slots + 1
    stop_pos = np.searchsorted(lead_dev, np.arange(p), side="right") + np.arange(p)
    dep_op = c.dep[lead_idx]
    has = dep_op >= 0
    dep_slot = np.full(slots, NEVER, dtype=np.int64)
    dep_slot[pos] = READY
    dep_slot[pos[has]] = pos[c.leader[dep_op[has]]]
    dep_add = np.zeros(slots)
    dep_add[pos[has]] = (cum_excl + dur)[dep_op[has]] + tcomm
    rdur = np.zeros(slots)
    rdur[pos] = run_dur
    dep_slot[stop_pos] = NEVER

    val = np.full(slots + 2, np.nan)  # start time of each run; NaN until computed
    val[READY] = 0.0
    ptr = np.searchsorted(lead_dev, np.arange(p), side="left") + np.arange(p)
    free = np.zeros(p)
    fmax, maximum = np.fmax, np.maximum
    goal, last = int(stop_pos.sum()), -1
    while True:
        for _ in range(_ROUNDS_PER_CHECK):  # a round costs ~3 us: keep it to a handful of numpy calls
            de = val[dep_slot[ptr]]
            de += dep_add[ptr]
            st = maximum(free, de)  # NaN unless the input is ready
            val[ptr] = st
            rd = rdur[ptr]
            rd += st
            fmax(free, rd, out=free)
            ptr += st == st
        moved = int(ptr.sum())
        if moved == goal:
            break
        if moved == last:
            _raise_deadlock(c, lead_idx, pos, ptr, stop_pos)
        last = moved
    return val[pos][c.leader] + cum_excl


def _raise_deadlock(c: Compiled, lead_idx, pos, ptr, stop_pos) -> None:
    slot_to_leader = np.full(int(pos.max()) + 2, -1)
    slot_to_leader[pos] = np.arange(pos.size)
    stuck = [int(lead_idx[slot_to_leader[s]]) for s in ptr if s not in set(stop_pos.tolist())]
    waits = []
    for i in stuck[:6]:
        d = c.dep[i]
        waits.append(f"device {c.device[i]} {'FBIWR'[c.kind[i]]}{c.micro[i]} (stage {c.stage[i]}) waits for "
                     f"device {c.device[d]} {'FBIWR'[c.kind[d]]}{c.micro[d]} (stage {c.stage[d]})")
    raise InputError("deadlock: no device can proceed; " + "; ".join(waits))
