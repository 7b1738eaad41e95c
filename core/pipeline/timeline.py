"""The simulator's result: every op's times, and the metrics measured from them.

Two bubble conventions are reported side by side, always labelled:
- `bubble_fraction`: idle share of the timeline, idle / (p x makespan)  (GPipe: (p-1)/(m+p-1));
- `bubble_vs_ideal`: idle relative to busy time                           (GPipe: (p-1)/m).
Bubble *times* come in two flavours too: `bubble_time` is the worst device's idle time within the
makespan; `span_bubble_time` is the worst device's idle time between its own first and last op, the
Zero Bubble paper's per-stage measure (it ignores the start-up offset of later stages).

Activation memory is counted in micro-batches of one device's whole share of layers (L/p layers, so
1F1B's device 0 holds p; a chunk of a V or interleaved schedule counts 1/v, a DualPipe chunk 1): a
micro-batch is held on a device from its F's start until its backward is finished (B, or W for a split
backward). `peak_activation` weighs each stage by the costs' per-stage memory (uneven layers, the
embedding, the output layer and loss); `peak_inflight` counts micro-batches as if stages were equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from core.pipeline.schedules.ir import F, Schedule

#                         F   B   I   W   R
_HELD_DELTA = np.array([1, -1, 0, -1, 0], dtype=np.int64)  # F takes activations, B or W frees them
_PENDING_DELTA = np.array([0, 0, 1, -1, 0], dtype=np.int64)  # I leaves work for W


def peak_held(kind: np.ndarray, seg: np.ndarray, stages_per_device: int) -> np.ndarray:
    """Per device: most micro-batches whose activations are held at once (full-stage units), from the ops' kinds
    in device order alone (`seg`: each device's first op). No time is needed: a device's ops never overlap, so the
    order of its own ops sets the count; the planner reads it before simulating (core.planner.simulation)."""
    return np.maximum(np.maximum.reduceat(np.cumsum(_HELD_DELTA[kind]), seg), 0) / stages_per_device


def weighted_peak(kind: np.ndarray, seg: np.ndarray, stage: np.ndarray, device: int, weight: np.ndarray) -> float:
    """The most activations device `device` holds at once when each global stage's micro-batch weighs
    `weight[stage]` (its layers relative to a full chunk's): where a device's chunks hold unequal layers (the
    embedding or the loss taking a chunk's slot), micro-batches of a light chunk count for less."""
    lo = int(seg[device])
    hi = int(seg[device + 1]) if device + 1 < len(seg) else len(kind)
    steps = _HELD_DELTA[kind[lo:hi]] * np.asarray(weight, dtype=float)[stage[lo:hi]]
    return float(max(np.cumsum(steps).max(initial=0.0), 0.0))


def weighted_ends(ops, num_stages: int, stages_per_device: float, last: int, ends: tuple[float, float]
                  ) -> tuple[float, float]:
    """The first and the last stage's devices' layer-weighted peaks (weighted_peak), each in units of its own
    layers: `ends` are the first and the last stage's layers over a middle stage's (core.model.stage_split
    end_ratios); `ops` has the order's kind, seg and stage (a compiled schedule or a Timeline). NaN where an end
    device holds no layers."""
    weight = np.ones(num_stages)
    weight[0], weight[-1] = ends
    out = []
    for device, own in ((0, ends[0]), (last, ends[1])):
        layers = stages_per_device - 1.0 + own  # the device's layers in a middle chunk's units
        if layers <= 0:
            return float("nan"), float("nan")
        out.append(weighted_peak(ops.kind, ops.seg, ops.stage, device, weight) / layers)
    return out[0], out[1]


def stage_held(kind: np.ndarray, stage: np.ndarray, which: int) -> float:
    """Most micro-batches whose activations stage `which` itself holds at once (its ops run on one device, in
    order): what the embedding (first stage) or the output layer and loss (last stage) keep, wherever the device
    also runs other chunks."""
    ops = kind[stage == which]
    return float(max(np.cumsum(_HELD_DELTA[ops]).max(initial=0), 0))


def end_counts(peak: np.ndarray, kind: np.ndarray, stage: np.ndarray, last_device: int) -> tuple[float, ...]:
    """What memory needs of a schedule's order (core.memory.per_gpu.InFlight), from each device's peak held
    (`peak`, peak_held) and the ops' kinds and stages: (the first device's peak, the last stage's device's, the
    most of any other device or 0, the micro-batches the first and the last stage themselves hold)."""
    others = np.delete(peak, [0, last_device])
    return (float(peak[0]), float(peak[last_device]), float(others.max()) if others.size else 0.0,
            stage_held(kind, stage, 0), stage_held(kind, stage, int(stage.max())))


@dataclass(frozen=True, eq=False)
class Timeline:
    schedule: Schedule
    costs: object
    device: np.ndarray
    kind: np.ndarray
    micro: np.ndarray
    chunk: np.ndarray
    stage: np.ndarray
    start: np.ndarray
    end: np.ndarray
    seg: np.ndarray  # offset of each device's first op (ops are device-major)
    dur: np.ndarray

    @classmethod
    def build(cls, s: Schedule, c, start: np.ndarray, dur: np.ndarray, costs) -> Timeline:
        """From the compiled schedule `c` (core.pipeline.simulate.Compiled) and the computed start times."""
        return cls(s, costs, c.device, c.kind, c.micro, c.chunk, c.stage, start, start + dur, c.seg, dur)

    # ---- time ---------------------------------------------------------------------------------
    @cached_property
    def makespan(self) -> float:
        return float(self.end.max())

    @cached_property
    def busy(self) -> np.ndarray:
        return np.add.reduceat(self.dur, self.seg)

    @property
    def idle(self) -> np.ndarray:
        return self.makespan - self.busy

    @cached_property
    def bubble_fraction(self) -> float:
        """Idle share of the whole timeline (all devices, from 0 to the makespan)."""
        return float(1.0 - self.busy.sum() / (self.schedule.p * self.makespan))

    @cached_property
    def bubble_vs_ideal(self) -> float:
        """Idle time relative to the busy (ideal) time; x here is x/(1+x) as a share."""
        total = self.busy.sum()
        return float((self.schedule.p * self.makespan - total) / total)

    @property
    def bubble_time(self) -> float:
        """Worst device's idle time within the makespan."""
        return float(self.idle.max())

    @cached_property
    def span_bubble_time(self) -> float:
        """Worst device's idle time between its own first op and last op (Zero Bubble paper)."""
        first = np.minimum.reduceat(self.start, self.seg)
        last = np.maximum.reduceat(self.end, self.seg)
        return float((last - first - self.busy).max())

    # ---- memory -------------------------------------------------------------------------------
    @cached_property
    def _levels(self) -> tuple[np.ndarray, np.ndarray]:
        """Held and pending-W counts (chunk units) after every op, in device order.

        Ops of one device never overlap and are stored in device order, so a running sum over ops is
        already in time order (a release at the end of one op precedes an allocation at the next op's
        start), and each device's deltas sum to zero, so the sum restarts at zero on every device.
        """
        k = self.kind
        return np.cumsum(_HELD_DELTA[k]), np.cumsum(_PENDING_DELTA[k])

    def _per_device_peak(self, levels: np.ndarray) -> np.ndarray:
        return np.maximum(np.maximum.reduceat(levels, self.seg), 0) / self.schedule.stages_per_device

    @cached_property
    def stage_memory(self) -> np.ndarray:
        """One micro-batch's activations on each global stage, in micro-batches of a device's share."""
        s = self.schedule
        w = np.full(s.num_stages, 1.0 / s.stages_per_device)
        given = np.asarray(getattr(self.costs, "stage_memory", ())[: s.num_stages], dtype=float)
        w[: given.size] = given
        return w

    @cached_property
    def _activation(self) -> np.ndarray:
        """Activations held after every op (stage-weighted), restarting at zero on every device."""
        delta = _HELD_DELTA[self.kind] * self.stage_memory[self.stage]
        level = np.cumsum(delta)
        before = np.concatenate([[0.0], level[self.seg[1:] - 1]])
        level -= np.repeat(before, np.diff(np.append(self.seg, level.size)))
        return level

    @cached_property
    def peak_activation(self) -> np.ndarray:
        """Per device: most activations held at once, in micro-batches of one device's share of layers."""
        return np.maximum(np.maximum.reduceat(self._activation, self.seg), 0.0)

    @cached_property
    def peak_inflight(self) -> np.ndarray:
        """Per device: most micro-batches whose activations are held at once (full-stage units)."""
        return peak_held(self.kind, self.seg, self.schedule.stages_per_device)

    @cached_property
    def peak_pending_w(self) -> np.ndarray:
        """Per device: most micro-batches whose input gradient is done but weight gradient is not."""
        return self._per_device_peak(self._levels[1])

    def memory_curve(self) -> dict[str, np.ndarray]:
        """Step curves per device: after each event at `time`, `held` and `pending_w` hold (micro-batches
        of a device's share) and `activation` (the same, stage-weighted: what `peak_activation` peaks at).

        An F allocates at its start; B or W free at their end; I moves work to pending W at its end.
        """
        held, pend = self._levels
        k = self.kind
        keep = (_HELD_DELTA[k] != 0) | (_PENDING_DELTA[k] != 0)
        t = np.where(k == F, self.start, self.end)[keep]
        v = self.schedule.stages_per_device
        return {"device": self.device[keep], "time": t, "held": held[keep] / v, "pending_w": pend[keep] / v,
                "activation": self._activation[keep]}

    # ---- summary ------------------------------------------------------------------------------
    @property
    def num_ops(self) -> int:
        return int(self.kind.size)

    def ops_of(self, device: int) -> slice:
        stop = self.seg[device + 1] if device + 1 < self.schedule.p else self.kind.size
        return slice(int(self.seg[device]), int(stop))
