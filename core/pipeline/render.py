"""Text timeline in the course's notation, one character per time unit.

digit  = forward of micro-batch i (i mod 10)     lowercase letter = backward (B or I) of micro-batch i
capital = weight-gradient W of micro-batch i     '*' = recompute forward          '.' = idle
Integer op times are required (one character per tick); the page hides this view otherwise.
"""

from __future__ import annotations

import numpy as np

from core.errors import InputError
from core.pipeline.schedules.ir import B, F, I, R, W
from core.pipeline.timeline import Timeline

MAX_WIDTH = 5000  # characters per row; beyond this a text view is no help


def _symbol(kind: int, micro: int) -> str:
    if kind == F:
        return str(micro % 10)
    if kind in (B, I):
        return chr(ord("a") + micro % 26)
    if kind == W:
        return chr(ord("A") + micro % 26)
    if kind == R:
        return "*"
    raise ValueError(kind)


def text_timeline(tl: Timeline) -> str:
    """Rows like '  stage 0: 0123......aa4bb5' (one row per device; 'device' when it holds chunks)."""
    if not (np.allclose(tl.start, np.round(tl.start)) and np.allclose(tl.end, np.round(tl.end))):
        raise InputError("the text timeline needs integer op times (choose whole-number costs and chunks)")
    width = int(round(tl.makespan))
    if width > MAX_WIDTH:
        raise InputError(f"the timeline is {width} ticks long; the text view shows at most {MAX_WIDTH}")
    label = "stage" if tl.schedule.v == 1 else "device"
    rows = []
    for d in range(tl.schedule.p):
        line = ["."] * width
        sl = tl.ops_of(d)
        for k, mb, a, b in zip(tl.kind[sl].tolist(), tl.micro[sl].tolist(), tl.start[sl].tolist(), tl.end[sl].tolist(),
                               strict=True):
            ch = _symbol(k, mb)
            for t in range(int(round(a)), int(round(b))):
                line[t] = ch
        rows.append(f"  {label} {d}: {''.join(line)}")
    return "\n".join(rows)
