"""A PyTorch action table (torch.distributed.pipelining's CSV, one row per rank) as a Schedule, so the simulator
can time the order a job really runs: `python -m core simulate --from-csv FILE` and the Pipeline page's upload.

The text is read by core.pipeline.action_table (bounded: every index and count is checked against the simulator's
limits as it is read). A rank's stages become its chunks in increasing order, so the table fixes p, v (stages per
rank), m and the stage map; costs are the caller's. Anything else (a micro-batch run twice or missing, ranks
holding different numbers of stages, a W before its I) is an InputError naming the row or the stage and
micro-batch. The checks sort the table's own actions, so they take memory in proportion to them, not to
stages x micro-batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from core.errors import InputError
from core.pipeline.action_table import Actions, read_table
from core.pipeline.result import PipelineParams, PipelineResult
from core.pipeline.schedules.ir import B, F, I, Schedule, W
from core.pipeline.simulate import compile_schedule, run_timeline


def schedule_from_actions(data: str | bytes, name: str = "csv") -> Schedule:
    """The Schedule an action table describes (checked: every stage on one rank, every micro-batch's forward and
    backward exactly once per stage, W only after its I)."""
    t = read_table(data)
    p, v = t.p, len(t.owned[0])
    _check_stage_map(t.owned)
    m = 1 + int(t.micro.max())
    _check_each_once(t, p * v, m)
    chunk_of = np.zeros(p * v, dtype=np.int32)  # at most the number of stages the table names
    stage_map = np.array(t.owned, dtype=np.int64).reshape(p, v)
    chunk_of[stage_map] = np.arange(v, dtype=np.int32)
    rows = np.stack([t.kind, t.micro, chunk_of[t.stage], t.fused], axis=1)
    devices = np.split(rows, np.flatnonzero(np.diff(t.rank)) + 1)
    return Schedule(name, p, v, m, tuple(devices), stage_map,
                    notes=("imported from a PyTorch action table: the order as given, timed with your costs",))


def _check_stage_map(owned: tuple[tuple[int, ...], ...]) -> None:
    """Every rank holds the same number of stages v, and the stages are 0..p*v-1, each on one rank."""
    p, v = len(owned), len(owned[0])
    other = next((r for r, s in enumerate(owned) if len(s) != v), None)
    if other is not None:
        raise InputError(f"action table, row {other + 1} (rank {other}): ranks hold different numbers of stages "
                         f"({_short([len(s) for s in owned])}); the simulator needs the same count on each")
    rank_of: dict[int, int] = {}
    for r, stages in enumerate(owned):
        for x in stages:
            if x in rank_of:
                raise InputError(f"action table, row {r + 1} (rank {r}): stage {x} is also on row {rank_of[x] + 1}; "
                                 f"stages {_short(sorted(x for s in owned for x in s))} are not 0..{p * v - 1}, "
                                 "each on one rank")
            rank_of[x] = r
    missing = next((x for x in range(p * v) if x not in rank_of), None)
    if missing is not None:
        raise InputError(f"action table: no row holds stage {missing}; stages {_short(sorted(rank_of))} are not "
                         f"0..{p * v - 1}, each on one rank")


def _check_each_once(t: Actions, n_stages: int, m: int) -> None:
    """Each (stage, micro-batch) has one forward and one backward (B, or I then W on the same rank)."""
    key = t.stage.astype(np.int64) * m + t.micro
    cells, inverse = np.unique(key, return_inverse=True)  # the (stage, micro-batch) cells the table touches
    counts = np.bincount(inverse * 4 + t.kind, minlength=4 * cells.size).reshape(-1, 4)
    position = np.arange(key.size)
    first_i, first_w = (_first_at(cells.size, inverse, position, t.kind == k) for k in (I, W))
    early = np.flatnonzero((first_w >= 0) & (first_i > first_w))
    if early.size:
        at = int(first_w[early].min())
        s, mb, r = int(t.stage[at]), int(t.micro[at]), int(t.rank[at])
        raise InputError(f"action table, row {r + 1} (rank {r}): {s}W{mb} comes before {s}I{mb}")
    forward, backward = counts[:, F], counts[:, B] + counts[:, I]
    wrong = np.flatnonzero((forward != 1) | (backward != 1) | (counts[:, I] != counts[:, W]))
    if wrong.size:
        k = int(wrong[0])
        s, mb, c = int(cells[k]) // m, int(cells[k]) % m, counts[k]
    elif cells.size < n_stages * m:  # a cell no action touches: the first gap in the sorted keys
        gap = np.flatnonzero(cells != np.arange(cells.size))
        k = int(gap[0]) if gap.size else cells.size
        s, mb, c = k // m, k % m, np.zeros(4, dtype=np.int64)
    else:
        return
    r = next(r for r, stages in enumerate(t.owned) if s in stages)
    raise InputError(f"action table, row {r + 1} (rank {r}): stage {s}, micro-batch {mb} has {int(c[F])} forward(s), "
                     f"{int(c[B] + c[I])} backward(s) and {int(c[W])} W(s); each needs one forward and one backward "
                     "(B, or I then W)")


def _first_at(size: int, inverse: np.ndarray, position: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per cell, the file position of its first action picked by `mask` (-1 where there is none)."""
    out = np.full(size, -1, dtype=np.int64)
    picked, first = np.unique(inverse[mask], return_index=True)
    out[picked] = position[mask][first]
    return out


def _short(values: list[int]) -> str:
    return ", ".join(str(x) for x in values[:12]) + (" ..." if len(values) > 12 else "")


@dataclass(frozen=True, eq=False)
class ImportedResult(PipelineResult):
    """A timed imported table: the same numbers as a generated schedule's, with no closed form to compare."""

    source: str = "csv"

    @cached_property
    def formula(self) -> tuple[None, str]:
        return None, "an imported action table has no closed form: the bubble is the simulated one"

    def summary(self) -> dict[str, Any]:
        out = super().summary()
        out["schedule"] = self.source
        out["params"] = {**out["params"], "schedule": self.source, "v": self.schedule.v}
        return out


def simulate_actions(data: str | bytes, tf: float = 1.0, tb: float = 2.0, tw: float = 0.0, tcomm: float = 0.0,
                     source: str = "csv") -> ImportedResult:
    """Time an action table (its text, or an upload's bytes) with the given per-device costs (a chunk costs 1/v of
    them, as everywhere)."""
    s = schedule_from_actions(data, source)
    holder = "interleaved" if s.v > 1 else "1f1b"  # any schedule with v chunks per device: it carries the costs
    params = PipelineParams(schedule=holder, p=s.p, m=s.m, v=max(s.v, 2), tf=tf, tb=tb, tw=tw, tcomm=tcomm)
    return ImportedResult(params, s, run_timeline(s, params.costs(), compile_schedule(s)), source)
