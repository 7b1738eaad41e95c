"""V-Half and V-Min (Qi et al. 2024, "Pipeline Parallelism with Controllable Memory", arXiv 2405.15362).

The paper builds a schedule by repeating one building block per micro-batch: each device runs the
forward of its first chunk (F0), the forward of its second (F1), the input-gradient backward of the
second (I1) and of the first (I0) at fixed slot offsets, one micro-batch every 6 slots (a slot is one
chunk op when T_F = T_B = T_W). The time from a micro-batch's F0 to its last backward on a device (the
block's lifespan) sets the peak activation memory, so tighter offsets hold less:
- V-Min: offsets (d, 2p-1-d, 2p+g+d, 4p+g-1-d), g = 2 when 3 divides p: about 1/3 of 1F1B's memory;
- V-Half: offsets (2d, 3p-2-d, 3p+g+2d-1, 6p+g-2-d), g = 3 when p is even: about 1/2.
Weight gradients W take the free slots. The repeated blocks leave gaps in the warm-up and cool-down,
which the paper's greedy pass removes: ops there move to the earliest free slot after their inputs
as long as no device holds more than the block's peak. This module follows that recipe: repeat,
place W's, squeeze the warm-up and cool-down under the memory cap (with the W's, then again without
them in the cool-down), place the W's again (a chunk's W's in order, the second chunk's first).
The order it returns is what every device runs; the simulator times it with any costs.
The squeeze touches only the two ends, so past 4p+16 micro-batches it runs at that size and whole
periods are inserted in the repeating middle (the same order op for op; it falls back otherwise).
Device d holds stages d and 2p-1-d (the V), like ZB-V.
"""

from __future__ import annotations

from bisect import bisect_left, insort

import numpy as np

from core.pipeline.schedules.flush import gpipe_bubble_share
from core.pipeline.schedules.ir import ROW, F, I, Schedule, W, v_stage_map
from core.pipeline.schedules.record import Entry

PERIOD = 6  # slots per micro-batch and device: F0 F1 I1 I0 and the two W's
F0, F1, I1, I0, WW = range(5)  # slot types; WW = a weight gradient while squeezing (either chunk)
_KIND = np.array([F, F, I, I, W], dtype=np.int32)
_CHUNK = np.array([0, 1, 1, 0, -1], dtype=np.int32)  # a W's chunk is that of the backward it finishes
_DOWN = {F0: -1, I1: -1, F1: +1, I0: +1}  # the device whose op of the same type and micro-batch feeds this one


def block(kind: str, p: int) -> np.ndarray:
    """Slot offsets (p, 4) of F0, F1, I1, I0 for micro-batch 0: the paper's V-Min / V-Half building blocks."""
    d = np.arange(p)
    if kind == "v-min":
        g = 2 if p % 3 == 0 else 0
        return np.stack([d, 2 * p - 1 - d, 2 * p + g + d, 4 * p + g - 1 - d], axis=1)
    g = 3 if p % 2 == 0 else 0
    return np.stack([2 * d, 3 * p - 2 - d, 3 * p + g + 2 * d - 1, 6 * p + g - 2 - d], axis=1)


def v_half(p: int, m: int, v: int = 2) -> Schedule:
    """V-Half: the building block whose lifespan holds about half of 1F1B's peak activation memory."""
    return _controllable("v-half", p, m)


def v_min(p: int, m: int, v: int = 2) -> Schedule:
    """V-Min: the tightest block, about a third of 1F1B's memory, paid for in bubble when costs differ."""
    return _controllable("v-min", p, m)


def _controllable(kind: str, p: int, m: int) -> Schedule:
    times = _periodic_times(kind, p, m)
    if times is None:
        times = _greedy_times(kind, p, m)
    devices = tuple(_rows(*_final_order([tt[d] for tt in times])) for d in range(p))
    return Schedule(kind, p, 2, m, devices, v_stage_map(p))


def _greedy_times(kind: str, p: int, m: int) -> list[np.ndarray]:
    """Slots (devices, m) of F0, F1, I1, I0: repeat the block, squeeze both ends, squeeze again."""
    base = block(kind, p)[:, :, None] + PERIOD * np.arange(m)[None, None, :]  # (device, type, micro) -> slot
    times = _with_weight_slots([base[:, ty].copy() for ty in range(4)])
    _squeeze(times, with_w=True)
    times = _eager(times)[:4]
    _squeeze(times, with_w=False)
    return _eager(_with_weight_slots(times))[:4]


def _base_m(p: int) -> int:
    """Micro-batches enough for a steady middle: the squeeze reaches about p in from the front and p/2
    from the back, and the middle must span two lifespans (about p micro-batches each) around the cut."""
    return 4 * p + 16


def _periodic_times(kind: str, p: int, m: int) -> list[np.ndarray] | None:
    """The greedy result for large m from the one for `_base_m(p)` micro-batches, with whole periods
    inserted in the middle; None (build it all) when m is small or the middle is not periodic.

    The squeeze only touches the two ends, and away from them every op runs one PERIOD after the same
    op of the previous micro-batch. Each end is decided by ops within a lifespan (a micro-batch's F0 to
    its last backward) of it, so once a run of micro-batches wider than two lifespans repeats exactly,
    more of them change nothing but the shift of what follows. Checked op for op against the full
    greedy on 2,100 (p, m) up to p = 64, m = 1024 (and in tests/test_pipeline_memory_schedules.py).
    """
    m0 = _base_m(p)
    if m <= m0:
        return None
    t = _greedy_times(kind, p, m0)
    stacked = np.stack(t)  # (type, device, micro)
    steady = (np.diff(stacked, axis=2) == PERIOD).all(axis=(0, 1))  # steady[b]: micro-batch b+1 = b + PERIOD
    k = m0 // 2
    lifespan = stacked[:, :, k].max(axis=0) - stacked[:, :, k].min(axis=0)  # slots, per device, at the cut
    life = int(np.ceil(lifespan.max() / PERIOD)) + 1  # in micro-batches
    if k - life < 0 or k + life > steady.size or not steady[k - life:k + life].all():
        return None
    extra = m - m0
    shift = PERIOD * np.arange(1, extra + 1)
    return [np.concatenate([tt[:, :k + 1], tt[:, k:k + 1] + shift, tt[:, k + 1:] + PERIOD * extra], axis=1)
            for tt in t]


def _slot_types(times: list[np.ndarray], size: int) -> np.ndarray:
    """(devices, size): the type of op in every slot, -1 where free."""
    out = np.full((times[0].shape[0], size), -1, dtype=np.int8)
    for ty, tt in enumerate(times):
        np.put_along_axis(out, tt, ty, axis=1)
    return out


def _implicit(st: np.ndarray, held0: int = 0, w0: int = 0, back0: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Held activations and W's done after each slot of `st` (one device's slot types, no W's in them),
    when a W runs in every free slot while a backward is pending; the counts before `st` are given.

    The W count obeys W(i) = min(W(i-1) + free(i), backwards before i), which unrolls to a running
    minimum: W(i) = free(..i) + min(w0, min over j <= i of (backwards before j - free(..j))).
    """
    forward = (st == F0) | (st == F1)
    back = (st == I1) | (st == I0)
    n_free = np.cumsum(st < 0)
    back_before = back0 + np.cumsum(back) - back
    done = n_free + np.minimum(w0, np.minimum.accumulate(back_before - n_free))
    return held0 + np.cumsum(forward) - done, done


def _with_weight_slots(times: list[np.ndarray]) -> list[np.ndarray]:
    """The four op types plus 2m W's per device, each W in the first free slot once a backward is pending."""
    p, m = times[F0].shape
    size = int(max(tt.max() for tt in times)) + 1
    st = _slot_types(times, size)
    w = np.empty((p, 2 * m), dtype=np.int64)
    for d in range(p):
        _, done = _implicit(st[d])
        slots = np.flatnonzero(np.diff(done, prepend=0) > 0)
        w[d] = np.concatenate([slots, size + np.arange(2 * m - slots.size)])  # the rest after the last op
    return times + [w]


def _squeeze(times: list[np.ndarray], with_w: bool) -> None:
    """Move warm-up (only `with_w`) and cool-down ops to the earliest free slot after their inputs, in
    slot order, when no device then holds more than the most any device holds now. In place.

    `times[type]` is (devices, ops of that type) of slots. The steady state in between is left as
    built: from device 0's first I0 (the first micro-batch's last backward) to device 0's F0 of the
    last micro-batch. With W's, memory is +1 at an F and -1 at a W; without, W's run in free slots.
    Only the O(p^2) ops of the two ends are visited, so the cost does not grow with m.
    """
    p, m = times[F0].shape
    size = int(max(int(tt.max()) for tt in times)) + 1
    st = _slot_types(times, size)
    if with_w:
        level = np.cumsum((st == F0) | (st == F1), axis=1) - np.cumsum(st == WW, axis=1)
    else:
        parts = [_implicit(st[d]) for d in range(p)]
        level = np.stack([a for a, _ in parts])
        done = np.stack([b for _, b in parts])
    cap = int(level.max())
    free_at = bytearray(st.tobytes())  # one byte per (device, slot), 255 (int8 -1) where free: find() scans in C
    st = np.frombuffer(free_at, dtype=np.int8).reshape(p, size)  # the same memory, for the vector tests
    tl = [tt.tolist() for tt in times]  # scalar reads from lists are several times cheaper than from arrays
    backs = [sorted(tl[I1][d] + tl[I0][d]) for d in range(p)] if with_w else []  # a W's input: its k-th backward
    for d, ty, b in _movable(times, with_w):
        row = tl[ty][d]
        now = row[b]
        if ty == WW:
            ready = backs[d][b]
        else:
            src = d + _DOWN[ty]
            ready = tl[ty][src][b] if 0 <= src < p else -1
            if ty != F0:
                before = tl[ty - 1][d][b]
                if before > ready:
                    ready = before
        if b > 0 and row[b - 1] > ready:
            ready = row[b - 1]
        ready += 1
        if ready >= now:
            continue
        at = d * size
        target = free_at.find(255, at + ready, at + now) - at
        if target < 0:
            continue
        if with_w:
            if ty == F0 or ty == F1:  # earliest free slot with the device below the cap from there to `now`
                over = np.flatnonzero(level[d, target:now] >= cap)
                if over.size:
                    target = free_at.find(255, at + target + int(over[-1]) + 1, at + now) - at
                    if target < 0:
                        continue
                level[d, target:now] += 1
            elif ty == WW:
                level[d, target:now] -= 1  # a W earlier only frees sooner
        else:
            target = _first_within_cap_implicit(free_at, at, target, st[d], level[d], done[d], now, ty, cap,
                                                    2 * m)
            if target < 0:
                continue
        st[d, now], st[d, target] = -1, ty
        row[b] = target
        times[ty][d, b] = target
        if with_w and (ty == I1 or ty == I0):
            bk = backs[d]
            del bk[bisect_left(bk, now)]
            insort(bk, target)


def _movable(times: list[np.ndarray], with_w: bool) -> zip:
    """(device, type, micro-batch) of the ops the squeeze visits, by slot, then device, type, micro-batch:
    the warm-up (with W's only) before device 0's first I0, and the cool-down after the first F0 of the
    last micro-batch that comes later. Sorting only these keeps the cost independent of m."""
    p, m = times[F0].shape
    steady = int(times[I0][0, 0])  # device 0's first I0; no other op of device 0 shares its slot
    last_f0 = times[F0][:, m - 1]
    later = np.flatnonzero(last_f0 >= steady)
    picks = []
    if later.size:
        c_dev = int(later[np.lexsort((later, last_f0[later]))[0]])
        c_slot = int(last_f0[c_dev])
    for ty, tt in enumerate(times):
        dev_of = np.arange(p)[:, None]
        sel = np.zeros(tt.shape, dtype=bool)
        if with_w:
            sel |= tt < steady
        if later.size:
            sel |= (tt > c_slot) | ((tt == c_slot) & (dev_of > c_dev))
        d, b = np.nonzero(sel)
        picks.append((tt[d, b], d, np.full(d.size, ty), b))
    slot, dev, typ, mb = (np.concatenate(x) for x in zip(*picks, strict=True))
    order = np.lexsort((mb, typ, dev, slot))
    return zip(dev[order].tolist(), typ[order].tolist(), mb[order].tolist(), strict=True)


def _first_within_cap_implicit(free_at: bytearray, at: int, s: int, st: np.ndarray, level: np.ndarray,
                               done: np.ndarray, now: int, ty: int, cap: int, backs: int) -> int:
    """Earliest free slot from `s` on from which the op can run without raising the device above the cap,
    with implicit W's in the free slots (moving any op shifts where they fall). Updates `level` and
    `done` when a slot is taken; `backs` is the device's number of backwards."""
    while s >= 0:
        back0 = backs - int(np.count_nonzero((st[s:] == I1) | (st[s:] == I0)))
        end = _trial_implicit(free_at, at, s, now, ty, level, done, cap, back0)
        if end:
            return s
        s = free_at.find(255, at + s + 1, at + now) - at
        s = s if s >= 0 else -1
    return -1


def _trial_implicit(free_at: bytearray, at: int, s: int, now: int, ty: int, level: np.ndarray, done: np.ndarray,
                    cap: int, back: int) -> int:
    """Replay `_implicit` slot by slot with the op moved from `now` to `s`: 0 as soon as the device holds more
    than `cap`; else the slot after the last that changed, having written the new counts there.

    W count: done(i) = min(done(i-1) + [slot i free], backwards before i). Past `now` the slots are as
    before, so once done(i) meets the old count the rest is the old (within-cap) state: stop there.
    """
    fwd = int(level[s - 1] + done[s - 1]) if s else 0  # forwards so far
    dn = int(done[s - 1]) if s else 0
    size = level.size
    lv_new, dn_new = [], []
    i = s
    while i < size:
        t = ty if i == s else (255 if i == now else free_at[at + i])
        if t == 255:
            if dn < back:
                dn += 1
        elif t == I1 or t == I0:
            back += 1
        elif t != WW:
            fwd += 1
        if fwd - dn > cap:
            return 0
        lv_new.append(fwd - dn)
        dn_new.append(dn)
        i += 1
        if i > now and dn == done[i - 1]:
            break
    level[s:i], done[s:i] = lv_new, dn_new
    return i


def _eager(times: list[np.ndarray]) -> list[np.ndarray]:
    """Every op as early as its inputs and its device's order allow, one slot per op: the slots the
    order actually takes (the paper's "squeeze"). Timed by the simulator with unit chunk costs."""
    from core.pipeline.simulate import Costs, run_timeline  # the engine sits above the schedule generators

    p, m = times[F0].shape
    orders = [_order(times, d) for d in range(p)]
    s = Schedule("squeeze", p, 2, m, tuple(_rows(t, i) for t, i in orders),
                 v_stage_map(p))
    tl = run_timeline(s, Costs(tf=2.0, tb=2.0, tw=2.0))  # a chunk op then lasts exactly one slot
    out = [np.empty_like(tt) for tt in times]
    for d, (typ, idx) in enumerate(orders):
        start = np.rint(tl.start[tl.ops_of(d)]).astype(np.int64)
        for ty in range(len(times)):
            sel = typ == ty
            out[ty][d, idx[sel]] = start[sel]
    return out


def _order(times: list[np.ndarray], d: int) -> tuple[np.ndarray, np.ndarray]:
    """Device d's ops by slot: (type, index within its type)."""
    slot = np.concatenate([tt[d] for tt in times])
    typ = np.concatenate([np.full(tt.shape[1], ty) for ty, tt in enumerate(times)])
    idx = np.concatenate([np.arange(tt.shape[1]) for tt in times])
    o = np.argsort(slot, kind="stable")
    return typ[o], idx[o]


def _rows(typ: np.ndarray, idx: np.ndarray, w_chunk: np.ndarray | None = None) -> np.ndarray:
    """Op rows (kind, micro, chunk, 0) of one device's order. A W (type WW) finishes the oldest backward
    not yet finished, unless `w_chunk` gives each W's chunk (then the oldest of that chunk)."""
    rows = np.zeros((typ.size, ROW), dtype=np.int32)
    rows[:, 0] = _KIND[typ]
    rows[:, 2] = _CHUNK[typ]
    rows[:, 1] = idx
    is_w, is_back = typ == WW, (typ == I1) | (typ == I0)
    if w_chunk is None:
        rows[is_w, 1:3] = rows[is_back, 1:3][: int(is_w.sum())]
    else:
        rows[is_w, 2] = w_chunk
        for c in (0, 1):
            sel = is_w.copy()
            sel[is_w] = w_chunk == c
            rows[sel, 1] = rows[is_back & (rows[:, 2] == c), 1][: int(sel.sum())]
    return rows


def _final_order(t: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One device's final order: F0, F1, I1, I0 by slot and a W in each free slot while a backward is
    pending, the second chunk's W's first (its backward came first in the V); leftovers at the end."""
    size = int(max(x.max() for x in t)) + 1
    st = _slot_types([x[None, :] for x in t], size)[0]
    _, done = _implicit(st)
    w_slots = np.flatnonzero(np.diff(done, prepend=0) > 0)
    m = t[F0].size
    slot = np.concatenate([*t, w_slots, size + np.arange(2 * m - w_slots.size)])
    typ = np.concatenate([np.full(m, ty) for ty in range(4)] + [np.full(2 * m, WW)])
    idx = np.concatenate([np.arange(m)] * 4 + [np.arange(2 * m)])
    o = np.argsort(slot, kind="stable")
    typ, idx = typ[o], idx[o]
    # Which chunk each W serves: the second chunk's queue (fed by I1) first, else the first chunk's. The W's
    # served to the second chunk follow D(j) = min(D(j-1) + W at j, I1's before j), unrolled as in _implicit.
    is_w = typ == WW
    i1_before = np.cumsum(typ == I1) - (typ == I1)
    n_w = np.cumsum(is_w)
    served = n_w + np.minimum(0, np.minimum.accumulate(i1_before - n_w))
    w_chunk = (np.diff(served, prepend=0)[is_w] > 0).astype(np.int32)
    return typ, idx, w_chunk


# No exact closed form: the authors' estimates of the idle share from 1F1B's B = (p-1)/(m+p-1) when
# T_F = T_B = T_W (zero-bubble repository README; V-Min adds an O(p) overhead it does not size), to compare with
# the simulation, and the peak activation of their table.
def _no_form(name: str, about: str) -> str:
    return (f"{name} has no exact closed form: Qi et al. 2024 estimate its idle share as about {about}, "
            "B = (p-1)/(m+p-1), when T_F = T_B = T_W (see controllable_estimate)")


V_HALF = Entry(
    "v-half", "V-Half", v_half, "V-Half (controllable memory): V shape holding about half of 1F1B's activations", "2",
    True, v_shape=True, no_form=_no_form("v-half", "B/2"), estimate=lambda p, m: gpipe_bubble_share(p, m) / 2,
    derivation="No exact closed form. Qi et al. 2024 estimate the idle share as about B/2, B = (p-1)/(m+p-1) "
               "(1F1B's), when T_F = T_B = T_W. Memory: a schedule that repeats one building block every 6 "
               "slots holds about its block's lifespan (from a micro-batch's first forward on a device to its "
               "last backward there) divided by 6. V-Half's block on device 0 spans about 6p slots, so about p "
               "first-chunk micro-batches are alive at once, each half a device's layers: (p+2)//2 "
               "micro-batches' worth, about half of 1F1B's p.",
    peak_activation=lambda p: (p + 2) // 2)

V_MIN = Entry(
    "v-min", "V-Min", v_min, "V-Min (controllable memory): V shape holding about a third of 1F1B's activations", "2",
    True, v_shape=True, no_form=_no_form("v-min", "2B/3 plus an O(p) overhead"),
    estimate=lambda p, m: 2 * gpipe_bubble_share(p, m) / 3,
    derivation="No exact closed form. Qi et al. 2024 estimate the idle share as about 2B/3 plus an O(p) overhead, "
               "B = (p-1)/(m+p-1), when T_F = T_B = T_W. Its building block is the tightest (about 4p slots on "
               "device 0, so about 2p/3 half-device chunks alive): (p+4)//3 micro-batches' worth, about a third "
               "of 1F1B's. The tight block leaves gaps "
               "the steady state cannot fill when T_F, T_B and T_W differ, so V-Min loses throughput there.",
    peak_activation=lambda p: (p + 4) // 3)
