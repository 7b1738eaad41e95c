"""PyTorch's own schedule classes' action tables, without processes: each class is built with stand-in stages
that carry only what its order generation reads (stage index, stage count, rank, group size)."""

from __future__ import annotations

import csv
import io

import torch
from torch.distributed.pipelining import schedules as S

CLASSES = {  # our name -> (PyTorch class, stages per rank, stage placement)
    "gpipe": (S.ScheduleGPipe, 1, "loop"), "1f1b": (S.Schedule1F1B, 1, "loop"),
    "interleaved": (S.ScheduleInterleaved1F1B, None, "loop"), "looped-bfs": (S.ScheduleLoopedBFS, None, "loop"),
    "zbv": (S.ScheduleZBVZeroBubble, 2, "v"), "dualpipev": (S.ScheduleDualPipeV, 2, "v"),
}


class _Stage:
    def __init__(self, index: int, n: int, rank: int, size: int) -> None:
        self.stage_index, self.num_stages, self.group_rank, self.group_size = index, n, rank, size
        self.is_first, self.is_last = index == 0, index == n - 1
        self.submod = torch.nn.Identity()
        self.stage_index_to_group_rank: dict = {}


def actions_csv(name: str, p: int, m: int, v: int = 2) -> str:
    """PyTorch's compute-only order for our schedule `name` (its pipeline_order), as an action-table CSV."""
    cls, fixed, style = CLASSES[name]
    v = fixed or v
    rows = []
    for rank in range(p):
        index = [rank, 2 * p - 1 - rank] if style == "v" else [c * p + rank for c in range(v)]
        stages = [_Stage(i, p * v, rank, p) for i in index]
        sched = cls(stages[0] if v == 1 else stages, n_microbatches=m, loss_fn=lambda out, target: out)
        rows.append([str(a) for a in sched.pipeline_order[rank] if a is not None])
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()
