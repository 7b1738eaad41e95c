"""GPipe and 1F1B: one chunk per device, a pipeline flush at the end of every iteration."""

from __future__ import annotations

from core.pipeline.schedules.ir import B, F, Schedule, alternate, chain, loop_stage_map, ops
from core.pipeline.schedules.record import ClosedForm, Engines, Entry, Search


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


# The bubble both share, and where it comes from.
def gpipe_bubble_share(p: int, m: int) -> float:
    """(p-1)/(m+p-1): idle share of a flushed GPipe/1F1B timeline with equal stages."""
    return (p - 1) / (m + p - 1)


FILL_DRAIN = ClosedForm(lambda c: (c.p - 1) * c.full * c.iterations, "(p-1)(t_f+t_b)", "makespan",
                        "Huang et al. 2019; Narayanan et al. 2021", "any m")

_FILL_DRAIN_WORDS = ("The last device starts its first forward only after the p-1 devices before it have each run "
                     "one forward: (p-1) t_f of waiting. At the end, the first device runs its last backward p-1 "
                     "backward steps after the last device: (p-1) t_b more. Every device waits (p-1)(t_f+t_b) in "
                     "total, whatever m. Over the makespan (m+p-1)(t_f+t_b) that is the idle share (p-1)/(m+p-1); "
                     "relative to the ideal m(t_f+t_b) it is (p-1)/m.")

GPIPE = Entry(
    "gpipe", "GPipe", gpipe, "all forwards, then all backwards (GPipe); holds m micro-batches", "1",
    closed_form=FILL_DRAIN, derivation=_FILL_DRAIN_WORDS + " GPipe holds all m micro-batches at its peak.",
    engines=Engines(torch="ScheduleGPipe"), search=Search(rank=7, one_stage=True))

ONE_F_ONE_B = Entry(
    "1f1b", "1F1B", one_f_one_b, "one forward, one backward (PipeDream-Flush); same bubble, holds p", "1",
    closed_form=FILL_DRAIN,
    derivation=_FILL_DRAIN_WORDS + " 1F1B reorders the same work (one forward, one backward) so device d holds at "
                                   "most p-d micro-batches: the bubble is GPipe's, the memory is not.",
    peak_activation=lambda p: p,
    engines=Engines(torch="Schedule1F1B", megatron="forward_backward_pipelining_without_interleaving",
                    deepspeed="TrainSchedule"),
    search=Search(rank=1, by_default=True, one_stage=True))
