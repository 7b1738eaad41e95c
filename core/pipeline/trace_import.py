"""A PyTorch action table (torch.distributed.pipelining's CSV, one row per rank) as a Schedule, so the simulator
can time the order a job really runs: `python -m core simulate --from-csv FILE` and the Pipeline page's upload.

Read: compute actions "{stage}{F|B|I|W}{micro}" and overlapped pairs "({a};{b})OVERLAP_F_B" (timed as one fused
op, as the simulator times DualPipe's pairs). Skipped: what does not take compute time in the simulator
(SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD) and empty cells. A rank's stages become its
chunks in increasing order, so the table fixes p, v (stages per rank), m and the stage map; costs are the
caller's. Anything else (an unknown action, a micro-batch run twice, ranks holding different numbers of stages,
a table larger than the simulator's limits) is an InputError naming the cell.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from core.errors import InputError
from core.params.pipeline import MAX_OPS, PIPELINE
from core.pipeline.result import PipelineParams, PipelineResult
from core.pipeline.schedules.ir import ROW, B, F, I, Schedule, W
from core.pipeline.simulate import compile_schedule, run_timeline

MAX_BYTES = 8_000_000  # the largest table read (MAX_OPS actions of ~7 characters)
_KIND = {"F": F, "B": B, "I": I, "W": W}
_COMPUTE = re.compile(r"^(\d+)(F|B|I|W)(\d+)$")
_OVERLAP = re.compile(r"^\((.*)\)OVERLAP_F_B$")
_OTHER = re.compile(r"^(\d+)(SEND_F|RECV_F|SEND_B|RECV_B)(\d+)$|^(\d+)(UNSHARD|RESHARD|REDUCE_GRAD)$")


def read_actions(text: str) -> list[list[tuple[int, int, int, bool]]]:
    """Per rank, its compute actions (stage, kind, micro, fused-with-next), in order."""
    if len(text) > MAX_BYTES:
        raise InputError(f"action table: {len(text):,} characters; the limit is {MAX_BYTES:,}")
    ranks = []
    for r, row in enumerate(csv.reader(io.StringIO(text))):
        out: list[tuple[int, int, int, bool]] = []
        for cell in (c.strip() for c in row):
            if not cell or cell == "None" or _OTHER.match(cell):
                continue
            pair = _OVERLAP.match(cell)
            parts = pair.group(1).split(";") if pair else [cell]
            for k, part in enumerate(p.strip() for p in parts):
                got = _COMPUTE.match(part)
                if not got:
                    raise InputError(f"action table, rank {r}: {cell[:40]!r} is not an action such as 0F1, 3B0, "
                                     "2I5, 2W5 or (0F7;7B3)OVERLAP_F_B")
                out.append((int(got.group(1)), _KIND[got.group(2)], int(got.group(3)), k < len(parts) - 1))
        ranks.append(out)
    while ranks and not ranks[-1]:
        ranks.pop()
    if not ranks:
        raise InputError("action table: no actions (expected one CSV row of actions per rank)")
    return ranks


def schedule_from_actions(text: str, name: str = "csv") -> Schedule:
    """The Schedule an action table describes (checked: every stage on one rank, every micro-batch's forward and
    backward exactly once per stage, W only after its I)."""
    ranks = read_actions(text)
    p = len(ranks)
    if p > PIPELINE["p"].hi:
        raise InputError(f"action table: {p} ranks; the simulator runs at most {PIPELINE['p'].hi:g}")
    owned = [sorted({a[0] for a in acts}) for acts in ranks]
    v = len(owned[0])
    if any(len(s) != v for s in owned):
        raise InputError("action table: ranks hold different numbers of stages "
                         f"({', '.join(str(len(s)) for s in owned)}); the simulator needs the same count on each")
    stages = sorted(x for s in owned for x in s)
    if stages != list(range(p * v)):
        raise InputError(f"action table: stages {_short(stages)} are not 0..{p * v - 1}, each on one rank")
    n_ops = sum(len(a) for a in ranks)
    if n_ops > MAX_OPS:
        raise InputError(f"action table: {n_ops:,} actions; the simulator's limit is {MAX_OPS:,}")
    m = 1 + max(a[2] for acts in ranks for a in acts)
    if m > PIPELINE["m"].hi:
        raise InputError(f"action table: {m:,} micro-batches; the simulator runs at most {PIPELINE['m'].hi:g}")
    _check_each_once(ranks, p * v, m)
    chunk_of = {(r, s): c for r, s_list in enumerate(owned) for c, s in enumerate(s_list)}
    devices = []
    for r, acts in enumerate(ranks):
        rows = np.zeros((len(acts), ROW), dtype=np.int32)
        for i, (stage, kind, micro, fused) in enumerate(acts):
            rows[i] = (kind, micro, chunk_of[(r, stage)], int(fused))
        devices.append(rows)
    stage_map = np.array(owned, dtype=np.int64).reshape(p, v)
    return Schedule(name, p, v, m, tuple(devices), stage_map,
                    notes=("imported from a PyTorch action table: the order as given, timed with your costs",))


def _check_each_once(ranks, n_stages: int, m: int) -> None:
    seen = np.zeros((n_stages, m, 4), dtype=np.int64)
    for r, acts in enumerate(ranks):
        split_done = set()
        for stage, kind, micro, _ in acts:
            if kind == W and (stage, micro) not in split_done:
                raise InputError(f"action table, rank {r}: {stage}W{micro} comes before {stage}I{micro}")
            if kind == I:
                split_done.add((stage, micro))
            seen[stage, micro, kind] += 1
    forward = seen[:, :, F]
    backward = seen[:, :, B] + seen[:, :, I]
    wrong = (forward != 1) | (backward != 1) | (seen[:, :, I] != seen[:, :, W])
    partly = wrong & ((forward + backward) > 0)  # name a cell the table does touch, when there is one
    bad = np.argwhere(partly if partly.any() else wrong)
    if bad.size:
        s, mb = (int(x) for x in bad[0])
        raise InputError(f"action table: stage {s}, micro-batch {mb} has {int(forward[s, mb])} forward(s), "
                         f"{int(backward[s, mb])} backward(s) and {int(seen[s, mb, W])} W(s); each needs one "
                         "forward and one backward (B, or I then W)")


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


def simulate_actions(text: str, tf: float = 1.0, tb: float = 2.0, tw: float = 0.0, tcomm: float = 0.0,
                     source: str = "csv") -> ImportedResult:
    """Time an action table with the given per-device costs (a chunk costs 1/v of them, as everywhere)."""
    s = schedule_from_actions(text, source)
    holder = "interleaved" if s.v > 1 else "1f1b"  # any schedule with v chunks per device: it carries the costs
    params = PipelineParams(schedule=holder, p=s.p, m=s.m, v=max(s.v, 2), tf=tf, tb=tb, tw=tw, tcomm=tcomm)
    return ImportedResult(params, s, run_timeline(s, params.costs(), compile_schedule(s)), source)
