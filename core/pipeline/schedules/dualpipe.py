"""DualPipeV (DeepSeek-V3's DualPipe folded into a V; deepseek-ai/DualPipe).

Device r holds stages r and 2p-1-r. In the steady state it fuses a forward of one chunk with a
backward of the other ("F+B": DualPipe overlaps the pair's computation with its communication). A
pair starts when both inputs are there and lasts F&B, taken here as F + B. With t_f = t_b the
simulated bubble equals the README's (PP/2-1)(F&B+B-3W). Backwards near the end
are split into I and W so the W's fill the drain; each W takes the oldest pending I (FIFO).
"""

from __future__ import annotations

from core.errors import InputError
from core.pipeline.schedules.bidirectional import (
    DERIVATION,
    DUALPIPE_README,
    drain_backwards,
    pairs_fit,
    steady_pairs,
    weights_take_oldest,
)
from core.pipeline.schedules.ir import I, Schedule, W, pattern, v_stage_map
from core.pipeline.schedules.record import Case, ClosedForm, Engines, Entry, Search


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
            (steady_pairs(m - 2 * p + b, unfused_first=(r == p - 1)), "0110" * (m - 2 * p + b)),  # 4: F0&B1, F1&B0
            ("BF+B" * a, "110" * a),  # 5
            (drain_backwards(r), "10" * b),  # 6: backwards of both chunks, split from the middle on
            ("WI" * a, "X0" * a),  # 7: a pending W, then a split chunk-0 backward
            ("W" * b, "X" * b),  # 8: the remaining W's
        ]
        kinds = "".join(k for k, _ in steps)
        chunks = "".join(c for _, c in steps)
        devices.append(pattern(kinds, weights_take_oldest(kinds, chunks)))
    return Schedule("dualpipev", p, 2, m, tuple(devices), v_stage_map(p))


assert I == 2 and W == 3  # the letters above are PyTorch's: I input-gradient, W weight-gradient


def _bubble(c: Case) -> float:
    f, b, w = c.tf / 2, (c.tb + c.tw) / 2, c.tw / 2  # per chunk: a device holds two
    return (c.p - 1) * ((f + b) + b - 3 * w) * c.iterations


DUALPIPEV = Entry(
    "dualpipev", "DualPipeV", dualpipev, "DeepSeek DualPipeV: V shape, overlapped F&B pairs", "2", True,
    min_m=lambda p: 2 * p, v_shape=True,
    closed_form=ClosedForm(_bubble, "(PP/2-1)(F&B+B-3W), PP = 2p stages, F&B = F+B", "makespan", DUALPIPE_README,
                           "t_f = t_b (forward = input-gradient backward), t_w <= t_f, m >= 2p (2 x devices)",
                           pairs_fit),
    derivation="DualPipe cut in half (Sea AI Lab's \"cut-in-half\"): a V over p devices, 2p stages of half a "
               "device each, PP = 2p in the formula below. " + DERIVATION,
    peak_activation=lambda p: (2 * p + 1) / 2, engines=Engines(torch="ScheduleDualPipeV"), search=Search(rank=6))
