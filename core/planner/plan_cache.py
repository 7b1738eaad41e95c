"""The part of a plan that no step-time assumption changes, kept for the next plan of the same question.

A lecturer moving an efficiency slider, or the planner page re-planning after an assumption, asks the same
question again: the same candidates (core.planner.grid), batch split, model states, memory gate and the placement
before simulating (the micro-batches each schedule holds in flight, the activations they take, which candidates
fit: the schedule's order alone sets them). Only four assumptions reach them: the embedding and loss in the split
(memory placement), the MoE capacity factor (expert activations), the context-parallel K/V exchange (its buffers)
and the reserve fraction (usable memory); every other assumption is reset in the key, so a re-plan under another
one rebuilds only what depends on it (costs, simulation keys, times, the ranking).

One entry is kept, and only when its arrays hold at most MAX_BYTES (a bigger question, near the work budget's
400,000 candidates, is rebuilt each time rather than held); the arrays are shared with the plans that read them and
are never written to (they are marked read-only here, so a writer fails loudly).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace

import numpy as np

from core.params.planner import ASSUMPTIONS, PlannerParams

KEEP = ("ends_in_split", "moe_capacity", "reserve_frac", "cp_comm")  # the assumptions the kept part reads
MAX_BYTES = 96 * 2**20  # the kept entry's arrays (object arrays counted by their pointers)
_KEPT: dict = {}


def question(q: PlannerParams) -> PlannerParams:
    """The question without the step-time assumptions the kept part ignores: what a re-plan shares with its plan
    (the page routes both to one worker process by it, ui/planner/cache.py)."""
    return replace(q, **{k: ASSUMPTIONS[k].default for k in ASSUMPTIONS if k not in KEEP})


def key(q: PlannerParams, degrees: np.ndarray, offload_where) -> tuple:
    """The question without the step-time assumptions the kept part ignores, with its searched degrees."""
    where = None if offload_where is None else np.asarray(offload_where).tobytes()
    return question(q), np.asarray(degrees).tobytes(), where


def kept(k: tuple, build: Callable[[], tuple]) -> tuple:
    """`build()` once per key (the last key only), its arrays frozen."""
    got = _KEPT.get(k)
    if got is not None:
        return got
    got = build()
    _KEPT.clear()
    arrays: list[np.ndarray] = []
    for part in got:
        _walk(part, arrays)
    if sum(a.nbytes for a in {id(a): a for a in arrays}.values()) <= MAX_BYTES:
        for a in arrays:
            a.flags.writeable = False
        _KEPT[k] = got
    return got


def clear() -> None:
    _KEPT.clear()


def _walk(obj, out: list, depth: int = 0) -> None:
    """The arrays of a kept record (dicts, tuples and dataclasses, three levels deep)."""
    if depth > 3:
        return
    if isinstance(obj, np.ndarray):
        out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _walk(v, out, depth + 1)
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            _walk(v, out, depth + 1)
    elif hasattr(obj, "__dataclass_fields__"):
        for f in fields(obj):
            _walk(getattr(obj, f.name), out, depth + 1)
