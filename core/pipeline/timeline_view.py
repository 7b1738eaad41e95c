"""Bounded drawing data for a simulated timeline: what a chart needs, never the timeline itself.

A browser draws a few thousand bars comfortably, but the largest allowed timeline has 1,048,576 ops.
So a view holds, whatever the configuration:
- up to `max_bars` drawn ops: one bar per op (device, start, duration, kind, micro-batch, label);
- more: per device and per time bin, the busy share of each kind (p x kinds x bins), drawn as an
  image. Shares are exact overlaps of ops with bins, not samples: a bin half filled by forwards and
  half by backwards says 0.5 and 0.5.
Activation memory likewise: the exact step curves when they are short, and always the maximum held
within each time bin (so a downsampled curve never hides a peak).

Fused pairs (DualPipeV's overlapped F&B): the simulator gives the F zero duration and the partner
backward the pair's whole time; here the partner becomes one bar of kind "F&B" labelled with both
micro-batches, and the zero-length F is not drawn. Other zero-length ops (W when t_w = 0) are not
drawn either: they take no time.
Pure numpy. Sizes are bounded by max_bars, bins and p <= 64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.pipeline.schedules.ir import F
from core.pipeline.timeline import Timeline

KIND_LABELS = ("F", "B", "I", "W", "R", "F&B")  # the op kinds of schedules.ir, plus the pair
KIND_TITLES = ("forward", "backward", "input-gradient backward", "weight-gradient backward", "recompute forward",
               "overlapped forward & backward pair")
FB = 5  # display kind of a fused pair
NUM_KINDS = len(KIND_LABELS)

MAX_BARS = 3000  # drawn ops up to which every op is its own bar
BINS = 600  # time bins of an aggregated view (about 2 px each on a wide screen)
MAX_STEPS = 20_000  # memory events up to which the exact step curves are kept


@dataclass(frozen=True, eq=False)
class Bars:
    """One entry per drawn op, device-major and in time order within a device."""

    device: np.ndarray  # int16
    start: np.ndarray  # float64
    dur: np.ndarray  # float64
    kind: np.ndarray  # int8 display kind (index into KIND_LABELS)
    micro: np.ndarray  # int32 micro-batch (of the backward, for a pair)
    chunk: np.ndarray  # int16 chunk on the device (of the backward, for a pair)
    stage: np.ndarray  # int32 global stage (of the backward, for a pair)
    pair_micro: np.ndarray  # int32 micro-batch of the forward in a pair, -1 otherwise
    pair_stage: np.ndarray  # int32 stage of the forward in a pair, -1 otherwise
    label: np.ndarray  # str: "3" on an op of micro-batch 3, "F7 B3" on a pair

    @property
    def end(self) -> np.ndarray:
        return self.start + self.dur

    def __len__(self) -> int:
        return int(self.start.size)


@dataclass(frozen=True, eq=False)
class Heat:
    """Busy share of every display kind in each time bin of each device."""

    edges: np.ndarray  # (bins + 1,) time
    share: np.ndarray  # (p, NUM_KINDS, bins) float32 in [0, 1]

    @property
    def busy(self) -> np.ndarray:
        """(p, bins): the share of each bin in which the device computes anything."""
        return np.minimum(self.share.sum(axis=1), 1.0)


@dataclass(frozen=True, eq=False)
class Memory:
    """Micro-batches whose activations a device holds (full-stage units), over time."""

    steps: tuple[tuple[np.ndarray, np.ndarray], ...] | None  # per device (time, held) step points, or None
    edges: np.ndarray  # (bins + 1,) time
    peak: np.ndarray  # (p, bins) float32: most held at any moment within each bin

    @property
    def exact(self) -> bool:
        return self.steps is not None


@dataclass(frozen=True, eq=False)
class TimelineView:
    p: int
    makespan: float
    num_ops: int  # all ops of the timeline, drawn or not
    drawn_ops: int  # ops with a duration (a pair counts once)
    bars: Bars | None  # per-op bars, or None when aggregated
    heat: Heat | None  # per-bin shares, or None when every op is a bar
    memory: Memory

    @property
    def aggregated(self) -> bool:
        return self.bars is None

    def boundaries(self) -> np.ndarray:
        """Times at which something starts or ends (bar mode), else the bin edges: the cursor's steps."""
        if self.bars is not None:
            return np.unique(np.concatenate([[0.0, self.makespan], self.bars.start, self.bars.end]))
        return self.heat.edges.copy()

    def running_at(self, t: float) -> list[str]:
        """Per device, the op running at time t ("F3", "F7 B3", "idle"); bar mode only (else [])."""
        if self.bars is None:
            return []
        bars = self.bars
        out = ["idle"] * self.p
        on = np.flatnonzero((bars.start <= t) & (t < bars.end))
        for i in on.tolist():
            out[int(bars.device[i])] = op_name(bars, i)
        return out

    def held_at(self, t: float) -> np.ndarray | None:
        """Per device, micro-batches held right after time t; None when only binned maxima are kept."""
        if self.memory.steps is None:
            return None
        out = np.zeros(self.p)
        for d, (time, held) in enumerate(self.memory.steps):
            i = int(np.searchsorted(time, t, side="right")) - 1
            out[d] = held[i] if i >= 0 else 0.0
        return out


def span(views: Sequence[TimelineView]) -> float:
    """The shared time axis of stacked views: the longest makespan."""
    return max((v.makespan for v in views), default=0.0)


def cursor_time(views: Sequence[TimelineView], percent: float) -> float:
    """The time a cursor at `percent` of the shared axis points at."""
    return span(views) * min(max(percent, 0.0), 100.0) / 100.0


def step_cursor(views: Sequence[TimelineView], percent: float, direction: int) -> float:
    """The cursor (in percent) moved to the next moment anything starts or ends (direction +1), or back (-1).

    Percentages are rounded up to 1e-4, so a stepped cursor sits on or just after its boundary (within
    1e-6 of the axis); moves skip boundaries closer than 1e-5 of the axis, so a step never stalls.
    """
    total = span(views)
    if total <= 0:
        return 100.0
    t, tol = cursor_time(views, percent), 1e-5 * total
    b = np.unique(np.concatenate([v.boundaries() for v in views]))
    if direction > 0:
        later = b[b > t + tol]
        t = float(later[0]) if later.size else total
    else:
        earlier = b[b < t - tol]
        t = float(earlier[-1]) if earlier.size else 0.0
    return min(100.0, math.ceil(t / total * 1e6) / 1e4)


def op_name(bars: Bars, i: int) -> str:
    """Short name of bar i: "F3", "B3", "W3", "F7 B3" (pair)."""
    k = int(bars.kind[i])
    if k == FB:
        return f"F{int(bars.pair_micro[i])} B{int(bars.micro[i])}"
    return f"{KIND_LABELS[k]}{int(bars.micro[i])}"


def timeline_view(tl: Timeline, max_bars: int = MAX_BARS, bins: int = BINS, max_steps: int = MAX_STEPS
                  ) -> TimelineView:
    """The bounded view of `tl`: bars when at most `max_bars` ops take time, else per-bin shares."""
    if bins < 1 or max_bars < 0:
        raise ValueError("bins must be >= 1 and max_bars >= 0")
    p = tl.schedule.p
    makespan = tl.makespan
    kind, dur = tl.kind.astype(np.int8), tl.end - tl.start
    fused = _fused(tl)
    shown = dur > 0
    shown[fused] = False  # a pair is drawn on its partner
    partner = np.flatnonzero(fused) + 1
    kind = kind.copy()
    kind[partner] = FB
    drawn = int(shown.sum())
    edges = np.linspace(0.0, makespan, bins + 1) if makespan > 0 else np.linspace(0.0, 1.0, bins + 1)
    memory = _memory(tl, edges, max_steps)
    if drawn <= max_bars:
        return TimelineView(p, makespan, tl.num_ops, drawn, _bars(tl, kind, shown, fused), None, memory)
    return TimelineView(p, makespan, tl.num_ops, drawn, None, Heat(edges, _shares(tl, kind, edges)), memory)


def _fused(tl: Timeline) -> np.ndarray:
    """Fused forwards (the first op of an overlapped pair), as a mask over the timeline's ops."""
    s = tl.schedule
    if not any(bool(rows[:, 3].any()) for rows in s.devices):
        return np.zeros(tl.num_ops, dtype=bool)
    return s.flat()[4] & (tl.kind == F)


def _bars(tl: Timeline, kind: np.ndarray, shown: np.ndarray, fused: np.ndarray) -> Bars:
    idx = np.flatnonzero(shown)
    pair_micro = np.full(tl.num_ops, -1, dtype=np.int32)
    pair_stage = np.full(tl.num_ops, -1, dtype=np.int32)
    f = np.flatnonzero(fused)
    pair_micro[f + 1] = tl.micro[f]
    pair_stage[f + 1] = tl.stage[f]
    micro = tl.micro[idx].astype(np.int32)
    k = kind[idx]
    label = micro.astype(str).astype(object)
    pairs = np.flatnonzero(k == FB)
    for j in pairs.tolist():
        label[j] = f"F{pair_micro[idx[j]]} B{micro[j]}"
    start = tl.start[idx].astype(float)
    return Bars(tl.device[idx].astype(np.int16), start, tl.end[idx] - start, k, micro, tl.chunk[idx].astype(np.int16),
                tl.stage[idx].astype(np.int32), pair_micro[idx], pair_stage[idx], label.astype(str))


def _device_bounds(tl: Timeline) -> np.ndarray:
    return np.append(tl.seg, tl.num_ops).astype(np.int64)


def _shares(tl: Timeline, kind: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """(p, kinds, bins) busy share per bin, from each device's cumulative busy time per kind.

    Ops of a device do not overlap and are stored in time order, so the busy time of kind k up to
    time x is (busy of kind k in the ops that started before the op running at x) plus the part of
    that op done by x. Evaluated at the bin edges and differenced: exact, O(ops + p x bins x kinds).
    """
    p, nb = tl.schedule.p, edges.size - 1
    bounds = _device_bounds(tl)
    start, dur = tl.start, tl.end - tl.start
    last = np.empty((p, nb + 1), dtype=np.int64)  # the last op of the device starting at or before each edge
    for d in range(p):
        lo, hi = int(bounds[d]), int(bounds[d + 1])
        last[d] = lo + np.searchsorted(start[lo:hi], edges, side="right") - 1
    first = bounds[:-1, None]
    valid = last >= first
    li = np.where(valid, last, 0)
    done = np.where(valid, np.clip(edges[None, :] - start[li], 0.0, dur[li]), 0.0)
    out = np.zeros((p, NUM_KINDS, nb), dtype=np.float32)
    widths = np.diff(edges)
    for k in np.unique(kind).tolist():
        w = np.where(kind == k, dur, 0.0)
        before = np.cumsum(w) - w  # busy of kind k in earlier ops (all devices, device-major)
        cum = np.where(valid, before[li] - before[first] + np.where(kind[li] == k, done, 0.0), 0.0)
        out[:, k, :] = np.clip(np.diff(cum, axis=1) / widths, 0.0, 1.0)
    return out


def _memory(tl: Timeline, edges: np.ndarray, max_steps: int) -> Memory:
    curve = tl.memory_curve()
    dev, t, held = curve["device"], curve["time"], curve["activation"]
    p, nb = tl.schedule.p, edges.size - 1
    bounds = np.searchsorted(dev, np.arange(p + 1))
    peak = np.zeros((p, nb), dtype=np.float64)
    # value carried into each bin: the level after the last event strictly before the bin's start
    for d in range(p):
        lo, hi = int(bounds[d]), int(bounds[d + 1])
        i = np.searchsorted(t[lo:hi], edges[:-1], side="left") - 1
        peak[d] = np.where(i >= 0, held[lo + np.maximum(i, 0)], 0.0) if hi > lo else 0.0
    if t.size:  # events inside each bin: events are time-sorted within a device, so (device, bin) never decreases
        b = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, nb - 1)
        key = dev.astype(np.int64) * nb + b
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        flat = peak.ravel()
        flat[key[starts]] = np.maximum(flat[key[starts]], np.maximum.reduceat(held, starts))
    steps = None
    if t.size <= max_steps:
        steps = []
        for d in range(p):
            lo, hi = int(bounds[d]), int(bounds[d + 1])
            steps.append((np.concatenate([[0.0], t[lo:hi], [tl.makespan]]),
                          np.concatenate([[0.0], held[lo:hi], [held[hi - 1] if hi > lo else 0.0]])))
        steps = tuple(steps)
    return Memory(steps, edges, np.maximum(peak, 0.0).astype(np.float32))
