"""GPipe and 1F1B: one chunk per device, a pipeline flush at the end of every iteration."""

from __future__ import annotations

from core.pipeline.schedules.ir import B, F, Schedule, alternate, chain, loop_stage_map, ops


def gpipe(p: int, m: int, v: int = 1) -> Schedule:
    """All forwards, then all backwards: every device holds all m micro-batches at its peak."""
    order = chain(ops(F, range(m)), ops(B, range(m)))
    devices = tuple(order for _ in range(p))  # every device runs the same order
    return Schedule("gpipe", p, 1, m, devices, loop_stage_map(p, 1))


def one_f_one_b(p: int, m: int, v: int = 1) -> Schedule:
    """Warm up with p-1-d forwards, then alternate one forward and one backward, then drain.

    Same bubble as GPipe; device d never holds more than min(p - d, m) micro-batches.
    """
    forwards, backwards = ops(F, range(m)), ops(B, range(m))
    devices = []
    for d in range(p):
        warm = min(p - 1 - d, m)
        steady = m - warm
        devices.append(chain(forwards[:warm], alternate(forwards[warm:], backwards[:steady]), backwards[steady:]))
    return Schedule("1f1b", p, 1, m, tuple(devices), loop_stage_map(p, 1))

