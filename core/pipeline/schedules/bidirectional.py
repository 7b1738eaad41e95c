"""DualPipe (DeepSeek-V3 report; deepseek-ai/DualPipe): the bidirectional original of DualPipeV.

Half the micro-batches enter at device 0 and run down the devices, half enter at device p-1 and run
up. Each device therefore holds two stages of 1/p of the model: stage d of the downward copy (chunk 0)
and stage p-1-d of the upward copy (chunk 1), i.e. two copies of the parameters across the pipeline.
Both directions cross the same stage numbers, so the schedule has p stages on a micro-batch's path
(`Schedule.stages`), and a chunk costs a whole device share (t_f, not t_f/2).

Device r and its mirror p-1-r run the same program with the directions swapped ("near" is the
direction that enters at the device's own end). The program has DualPipe's eight steps, with
h = min(r, p-1-r) and H = p/2: forwards of the near direction fill the pipe, then both directions,
then the far direction's first backwards split into I and W, then the steady state of overlapped
pairs F&B (a forward of one direction with a backward of the other), then the drain, where the
backwards are split from the middle on so that the W's fill the gaps. Each W takes the oldest
pending I (DualPipe's WeightGradStore is a FIFO queue).

Micro-batches 0..m/2-1 run downward, m/2..m-1 upward. PyTorch's torch.distributed.pipelining runs
every micro-batch through one chain of stages, each stage on one rank, so it cannot run DualPipe
(two copies of each stage, two entry points); the V-shaped DualPipeV is the form it can run.
"""

from __future__ import annotations

import math

import numpy as np

from core.errors import InputError
from core.pipeline.schedules.ir import Schedule, pattern
from core.pipeline.schedules.record import Case, ClosedForm, Entry


def dualpipe(p: int, m: int, v: int = 2) -> Schedule:
    if p % 2 or m % 2 or m < 2 * p:
        raise InputError(f"dualpipe needs an even number of devices p and an even m >= 2p (half the "
                         f"micro-batches go each way); got p = {p}, m = {m}"
                         + (f"; try m = {max(2 * p, m + m % 2)}" if p % 2 == 0 else "; try p = " + str(p + 1)))
    half, n = p // 2, m // 2
    devices = []
    for r in range(p):
        h = min(r, p - 1 - r)
        a, b = half - h - 1, h + 1  # devices between this one and the middle; this one and those nearer its end
        steps = [
            ("F" * 2 * a, "0" * 2 * a),  # 1: the near direction's forwards fill the pipe
            ("FF" * b, "01" * b),  # 2: both directions
            ("IWF" * a, "1X1" * a),  # 3: far-direction backwards, split, each W right away
            (steady_pairs(n - p + b, unfused_first=(h == half - 1)), "0110" * (n - p + b)),  # 4: F0&B1, F1&B0
            ("BF+B" * a, "110" * a),  # 5
            (drain_backwards(h), "10" * b),  # 6: backwards of both, split from the middle on
            ("WI" * a, "X0" * a),  # 7
            ("W" * b, "X" * b),  # 8: the pending W's
        ]
        kinds = "".join(k for k, _ in steps)
        phases = weights_take_oldest(kinds, "".join(c for _, c in steps))
        rows = pattern(kinds, phases)
        if r >= half:  # phase 0 is the near direction: the upward copy (chunk 1) on the lower half
            rows[:, 2] ^= 1
        rows[rows[:, 2] == 1, 1] += n  # the upward direction's micro-batches are numbered after the downward's
        devices.append(rows)
    stage_map = np.stack([np.arange(p), p - 1 - np.arange(p)], axis=1)
    return Schedule("dualpipe", p, 2, m, tuple(devices), stage_map, stages=p,
                    notes=(f"micro-batches 0..{n - 1} run from device 0 down, {n}..{m - 1} from device {p - 1} up; "
                           "each device holds stage d of one copy and stage p-1-d of the other",))


def steady_pairs(n: int, unfused_first: bool) -> str:
    """n steady steps of two overlapped pairs; the devices next to the turn (DualPipe's two middle ones, DualPipeV's
    last) run their very first pair unfused."""
    out = "F+BF+B" * n
    return out.replace("F+B", "FB", 1) if unfused_first and n else out


def drain_backwards(h: int) -> str:
    """h+1 pairs of backwards (far, near); from the middle pair on they are split (I) so W's can follow."""
    mid, out = (h + 1) // 2, []
    for i in range(h + 1):
        if i < mid:
            out.append("BB")
        elif i == mid:
            out.append("II" if h % 2 else "BI")
        else:
            out.append("II")
    return "".join(out)


def weights_take_oldest(kinds: str, phases: str) -> str:
    """Give every W (phase 'X') the phase of the oldest I it has not yet been matched with (a FIFO queue)."""
    k = np.frombuffer(kinds.replace("+", "").encode(), dtype=np.uint8)
    c = np.frombuffer(phases.encode(), dtype=np.uint8).copy()
    c[k == ord("W")] = c[k == ord("I")][: int((k == ord("W")).sum())]
    return c.tobytes().decode()


# The DualPipe README's bubble, for DualPipe and for its V-shaped half, and when the simulation reproduces it.
DUALPIPE_README = "deepseek-ai/DualPipe README"


def pairs_fit(c: Case) -> str:
    """The README's form counts F&B + B - 3W per step: exact when t_f = t_b, t_w <= t_f and m >= 2p."""
    if c.m < 2 * c.p:
        return f"m = {c.m} < 2p = {2 * c.p}"
    if not math.isclose(c.tf, c.tb) or c.tw > c.tf:
        return f"t_f, t_b, t_w = {c.tf:g}, {c.tb:g}, {c.tw:g}"
    return ""


def _bubble(c: Case) -> float:
    f, b, w = c.tf, c.tb + c.tw, c.tw  # a chunk is a whole device share: 1/p of the model
    return (c.p / 2 - 1) * ((f + b) + b - 3 * w) * c.iterations


DERIVATION = (
    "Half the micro-batches enter at device 0 and half at device p-1, through two copies of the "
    "model. A micro-batch meets PP/2 stages before the middle instead of PP, so the fill and drain "
    "last PP/2-1 steps, not PP-1. In the steady state a step is an overlapped pair F&B (one "
    "direction's forward with the other's backward). In the fill a device waits for a pair per "
    "step, in the drain for a full backward B per step: F&B+B. Three weight-gradient chunks per "
    "step are deferred into those gaps (the far direction's first backwards split into B and W, "
    "and the split backwards of the drain), hence -3W. F&B is taken as F+B here: the simulator "
    "does not model the communication a pair hides. The form is exact when t_f = t_b and "
    "t_w <= t_f; otherwise the W's no longer fit the gaps.")

DUALPIPE = Entry(
    "dualpipe", "DualPipe", dualpipe, "DeepSeek DualPipe: both directions at once, two parameter copies, overlapped "
    "F&B pairs (PyTorch cannot run it: its stages form one chain)", "2", True, min_m=lambda p: 2 * p,
    bidirectional=True,
    closed_form=ClosedForm(_bubble, "(PP/2-1)(F&B+B-3W), PP = p stages, F&B = F+B", "makespan", DUALPIPE_README,
                           "p even, m even and m >= 2p (half each way), t_f = t_b, t_w <= t_f",
                           lambda c: f"p = {c.p}, m = {c.m}" if c.p % 2 or c.m % 2 else pairs_fit(c)),
    derivation=DERIVATION, peak_activation=lambda p: p + 1)
