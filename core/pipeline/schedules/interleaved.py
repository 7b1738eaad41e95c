"""Schedules with v chunks per device in the loop layout (chunk c of device d is stage c*p + d)."""

from __future__ import annotations

import numpy as np

from core.errors import InputError
from core.pipeline.schedules.ir import ROW, B, F, Schedule, alternate, chain, loop_stage_map, ops
from core.pipeline.schedules.record import Case, ClosedForm, Engines, Entry, Search


def _round_order(kind: int, p: int, m: int, v: int, reverse_chunks: bool) -> np.ndarray:
    """Megatron's order of (micro-batch, chunk): rounds of p micro-batches, chunk by chunk.

    The k-th op of a device works on chunk (k // p) % v (reversed for backwards) and on micro-batch
    (k // (p*v)) * p + k % p.
    """
    k = np.arange(m * v)
    chunk = (k // p) % v
    if reverse_chunks:
        chunk = v - 1 - chunk
    micro = (k // (p * v)) * p + k % p
    out = np.zeros((k.size, ROW), dtype=np.int32)
    out[:, 0], out[:, 1], out[:, 2] = kind, micro, chunk
    return out


def interleaved(p: int, m: int, v: int = 2) -> Schedule:
    """Interleaved 1F1B (Narayanan et al. 2021): v smaller chunks per device cut the bubble by v.

    Device d warms up with 2(p-1-d) + (v-1)p forwards, then alternates one forward and one backward.
    """
    if v < 2:
        raise InputError("interleaved needs v >= 2 chunks per device (with v = 1 it is 1f1b)")
    if m % p:
        lo, hi = (m // p) * p, (m // p + 1) * p
        hint = f"{lo} or {hi}" if lo else f"{hi}"
        raise InputError(f"interleaved runs micro-batches in rounds of p = {p}: m must be a multiple of p "
                         f"(got m = {m}; try m = {hint})")
    forwards = _round_order(F, p, m, v, reverse_chunks=False)
    backwards = _round_order(B, p, m, v, reverse_chunks=True)
    total = m * v
    devices = []
    for d in range(p):
        warm = min(2 * (p - 1 - d) + (v - 1) * p, total)
        steady = total - warm
        devices.append(chain(forwards[:warm], alternate(forwards[warm:], backwards[:steady]), backwards[steady:]))
    return Schedule("interleaved", p, v, m, tuple(devices), loop_stage_map(p, v))


def looped_bfs(p: int, m: int, v: int = 2) -> Schedule:
    """Breadth-first looping (PyTorch's LoopedBFS): GPipe chunk by chunk.

    All micro-batches go through chunk 0, then chunk 1, ...; backwards run the chunks in reverse.
    The bubble matches interleaving, but every micro-batch of every chunk is held at the peak.
    """
    order = chain(*(ops(F, range(m), c) for c in range(v)), *(ops(B, range(m), c) for c in reversed(range(v))))
    return Schedule("looped-bfs", p, v, m, tuple(order.copy() for _ in range(p)), loop_stage_map(p, v))


# Both cut the fill and drain by v: each step moves one chunk of 1/v of a device's layers.
def _chunked_bubble(c: Case) -> float:
    return (c.p - 1) * c.full / c.v * c.iterations


INTERLEAVED = Entry(
    "interleaved", "interleaved", interleaved, "Megatron interleaved 1F1B: v chunks per device, bubble / v", "v",
    min_m=lambda p: p,
    closed_form=ClosedForm(_chunked_bubble, "(p-1)(t_f+t_b)/v", "makespan", "Narayanan et al. 2021",
                           "m a multiple of p (Megatron runs micro-batches in rounds of p)",
                           lambda c: f"m = {c.m}, p = {c.p}" if c.m % c.p else ""),
    derivation="Each device holds v chunks of 1/v of its layers, so a fill or drain step moves one chunk: the "
               "same p-1 steps cost (t_f+t_b)/v each, (p-1)(t_f+t_b)/v in all. Megatron-LM runs micro-batches "
               "in rounds of p, hence m a multiple of p. The price: v times more point-to-point messages and "
               "a first device holding p(1 + (p-1)/(pv)) micro-batches.",
    engines=Engines(torch="ScheduleInterleaved1F1B", megatron="forward_backward_pipelining_with_interleaving"),
    search=Search(rank=2, by_default=True))

LOOPED_BFS = Entry(
    "looped-bfs", "looped BFS", looped_bfs, "GPipe chunk by chunk over v looped chunks (PyTorch LoopedBFS)", "v",
    closed_form=ClosedForm(_chunked_bubble, "(p-1)(t_f+t_b)/v", "makespan", "Narayanan et al. 2021", "m >= p",
                           lambda c: f"m = {c.m} < p = {c.p}" if c.m < c.p else ""),
    derivation="The chunks of interleaving, run breadth-first (all micro-batches through chunk 0, then chunk "
               "1, ...): the fill and drain shrink by v as in interleaving, but every micro-batch of every "
               "chunk is held at the peak.")
