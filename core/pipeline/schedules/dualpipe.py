"""DualPipeV (DeepSeek-V3's DualPipe folded into a V; deepseek-ai/DualPipe).

Device r holds stages r and 2p-1-r. In the steady state it fuses a forward of one chunk with a
backward of the other ("F+B": DualPipe overlaps the pair's computation with its communication). A
pair starts when both inputs are there and lasts F&B, taken here as F + B. With t_f = t_b the
simulated bubble equals the README's (PP/2-1)(F&B+B-3W). Backwards near the end
are split into I and W so the W's fill the drain; each W takes the oldest pending I (FIFO).
"""

from __future__ import annotations

import numpy as np

from core.errors import InputError
from core.pipeline.schedules.ir import I, Schedule, W, pattern, v_stage_map


def dualpipev(p: int, m: int, v: int = 2) -> Schedule:
    if m < 2 * p:
        raise InputError(f"dualpipev needs m >= 2p micro-batches (2 x {p} devices = {2 * p}); got m = {m}")
    devices = []
    for r in range(p):
        a, b = p - r - 1, r + 1  # devices after r, and r itself with the devices before it
        steps = [
            ("F" * 2 * a, "0" * 2 * a),  # 1: forwards of chunk 0 fill the V's first arm
            ("FF" * b, "01" * b),  # 2: both chunks
            ("IWF" * a, "111" * a),  # 3: first backwards of chunk 1, split, W right away
            (_steady_pairs(m - 2 * p + b, last=(r == p - 1)), "0110" * (m - 2 * p + b)),  # 4: F0&B1, F1&B0
            ("BF+B" * a, "110" * a),  # 5
            (_drain_backwards(r), "10" * b),  # 6: backwards of both chunks, split from the middle on
            ("WI" * a, "X0" * a),  # 7: a pending W, then a split chunk-0 backward
            ("W" * b, "X" * b),  # 8: the remaining W's
        ]
        kinds = "".join(k for k, _ in steps)
        chunks = "".join(c for _, c in steps)
        devices.append(pattern(kinds, _fifo_weight_chunks(kinds, chunks)))
    return Schedule("dualpipev", p, 2, m, tuple(devices), v_stage_map(p))


def _steady_pairs(n: int, last: bool) -> str:
    """n steps of two overlapped pairs; the last device runs its very first pair unfused."""
    steps = "F+BF+B" * n
    return steps.replace("F+B", "FB", 1) if last and n else steps


def _drain_backwards(r: int) -> str:
    """Pairs (chunk 1, chunk 0) of backwards; from the middle pair on they are split (I) not full (B)."""
    n, mid = r + 1, (r + 1) // 2
    out = []
    for i in range(n):
        if i < mid:
            out.append("BB")
        elif i == mid:
            out.append("II" if r % 2 else "BI")
        else:
            out.append("II")
    return "".join(out)


def _fifo_weight_chunks(kinds: str, chunks: str) -> str:
    """Each W (chunk 'X' above) works on the chunk of the oldest I not yet matched: FIFO order."""
    k = np.frombuffer(kinds.replace("+", "").encode(), dtype=np.uint8)
    c = np.frombuffer(chunks.encode(), dtype=np.uint8).copy()
    is_i, is_w = k == ord("I"), k == ord("W")
    c[is_w] = c[is_i][: int(is_w.sum())]
    return c.tobytes().decode()


assert I == 2 and W == 3  # the letters above are PyTorch's: I input-gradient, W weight-gradient
