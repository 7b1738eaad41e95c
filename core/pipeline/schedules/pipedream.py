"""PipeDream (Harlap et al., arXiv 1806.03377): asynchronous 1F1B with no flush between iterations.

Iterations follow each other as one continuous 1F1B stream, so the fill and drain bubble is paid
once, not once per iteration. The price is staleness: a micro-batch's backward must use the
weights its forward used, so each device stashes one weight version per iteration still in flight.
"""

from __future__ import annotations

import numpy as np

from core.pipeline.schedules.flush import one_f_one_b
from core.pipeline.schedules.ir import B, F, I, Schedule
from core.pipeline.schedules.record import ClosedForm, Entry


def pipedream(p: int, m: int, v: int = 1, iterations: int = 1) -> Schedule:
    """`iterations` mini-batches of m micro-batches each, streamed through 1F1B without a flush."""
    stream = one_f_one_b(p, m * iterations)
    notes = ("no flush: weights update after each iteration's last backward on each device",)
    return Schedule("pipedream", p, 1, m, stream.devices, stream.stage_map, iterations, notes)


PIPEDREAM = Entry(
    "pipedream", "PipeDream", pipedream, "asynchronous 1F1B, no flush: bubble once, stale weights", "1", streams=True,
    closed_form=ClosedForm(lambda c: (c.p - 1) * c.full, "(p-1)(t_f+t_b), once for all iterations", "makespan",
                           "Harlap et al. 2018", "any m; the bubble is paid once, not per iteration"),
    derivation="The fill and drain of 1F1B, (p-1)(t_f+t_b), are paid once: with no flush the next iteration's "
               "forwards fill the drain. The price is stale weights (up to p versions stashed on device 0).")


def weight_versions(s: Schedule) -> np.ndarray:
    """Per device: most weight versions stored at once (the current weights plus every older version
    that an in-flight micro-batch's backward still needs).

    A device's weights change once it has run the backwards of all m micro-batches of an iteration.
    A flushed schedule needs 1; PipeDream's first stage needs up to p when m = 1.
    """
    out = np.zeros(s.p, dtype=np.int64)
    for d, rows in enumerate(s.devices):
        kind = rows[:, 0]
        is_f = kind == F
        is_b = (kind == B) | (kind == I)
        n_b = np.cumsum(is_b)  # backwards finished after each op
        n_f = np.cumsum(is_f)
        version_of_f = (n_b[is_f] - is_b[is_f]) // s.m  # weights version each forward used
        change = np.concatenate([[0], np.diff(version_of_f) != 0]).cumsum()
        current = n_b // s.m
        busy = n_f > n_b  # some micro-batch in flight after this op
        newest = version_of_f[np.maximum(n_f - 1, 0)]
        oldest_idx = np.minimum(n_b, version_of_f.size - 1)
        distinct = np.where(busy, change[np.maximum(n_f - 1, 0)] - change[oldest_idx] + 1, 0)
        stored = distinct + np.where(busy & (newest == current), 0, 1)
        out[d] = stored.max()
    return out
