"""How many candidates a plan evaluates, counted before any is enumerated (core.planner.budget keeps the work of one
request within its budget with it).

The grid (core.planner.grid) crosses every layout row (t, p, d, cp, ep) with the switches and keeps, per row, what
applies to it. What it keeps depends on a few properties of the row only (`_signature`): t itself (sequence
parallelism and TP overlap at t = 1 or within a server, the key/value heads a framework splits), whether p = 1 and
which interleave depths p allows, whether cp and ep are 1 (the frameworks that run them), and the row's offload flag.
d never matters, and the micro-batch size multiplies every count. So the count is the grid of one row per distinct
signature and one micro-batch size, each row weighted by how many layouts share its signature, times the number
of micro-batch sizes: a product over the axes per class of layouts, exact, in milliseconds for a search of millions.
tests/test_planner_budget.py checks it against the enumerated grid.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from core.params.planner import PlannerParams
from core.planner import grid


def count(q: PlannerParams, degrees: np.ndarray, model, gpus_per_node: int,
          offload_where: np.ndarray | None = None) -> int:
    """The number of candidates core.planner.grid.grid returns for these arguments, without enumerating them."""
    if len(degrees) == 0:
        return 0
    flags = None if offload_where is None else np.asarray(offload_where, dtype=bool)
    keys = _signature(degrees, model, flags)
    _, first, weight = np.unique(keys, axis=0, return_index=True, return_counts=True)
    one = replace(q, mb_sizes=q.mb_sizes[:1])
    c, _ = grid.grid(one, degrees[first], model, gpus_per_node, None if flags is None else flags[first])
    per_row = np.bincount(c.layout, minlength=len(first))
    return int(len(q.mb_sizes) * int((per_row * weight).sum()))


def _signature(degrees: np.ndarray, model, offload_where: np.ndarray | None) -> np.ndarray:
    """Per layout row, everything of it the grid reads (one row of integers each)."""
    t, p, cp, ep = degrees[:, 0], degrees[:, 1], degrees[:, 3], degrees[:, 4]
    depths = grid.depth_mask(model.layers, p, np.arange(2, grid.MAX_V + 1))
    depth_bits = (depths.astype(np.int64) << np.arange(depths.shape[1])).sum(axis=1)
    offload = np.ones(len(degrees), dtype=np.int64) if offload_where is None else offload_where.astype(np.int64)
    return np.stack([t, p == 1, depth_bits, cp == 1, ep == 1, offload], axis=1).astype(np.int64)
