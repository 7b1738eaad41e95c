"""Schedules and timelines in other tools' formats.

- PyTorch `torch.distributed.pipelining`: one CSV row per rank of actions "{stage}{F|B|I|W}{micro}"
  (e.g. 0F1, 3B0; I/W for a split backward), the table `PipelineScheduleMulti._load_csv` reads.
  One iteration is exported (micro-batches 0..m-1). Recompute is not an action there (checkpointing
  lives inside the stage module). A fused F&B pair (DualPipe's overlapped pair) is PyTorch's
  "(0F7;7B3)OVERLAP_F_B": its runtime runs the two and sends both results after the pair, as we time it.
- Chrome trace JSON (chrome://tracing, ui.perfetto.dev): one thread per device, one time unit = 1 ms.
"""

from __future__ import annotations

import csv
import io
import json

from core.errors import InputError
from core.pipeline.schedules.ir import KIND_NAMES, R, Schedule
from core.pipeline.timeline import Timeline

_CATEGORY = {"F": "forward", "B": "backward", "I": "backward-input", "W": "backward-weight", "R": "recompute"}


def pytorch_actions(s: Schedule) -> list[list[str]]:
    """Per rank, the action strings of one iteration."""
    if s.name == "pipedream":
        raise InputError("pipedream is asynchronous (no flush); torch.distributed.pipelining schedules are "
                         "synchronous, so it has no action table there")
    if s.num_stages != s.stage_map.size:
        raise InputError(f"{s.name} sends half the micro-batches each way through two copies of the model, so "
                         "every stage sits on two ranks; torch.distributed.pipelining runs each micro-batch "
                         "through one chain of stages, one rank per stage, so it has no action table for it "
                         "(DualPipeV, the V-shaped form, exports)")
    table = []
    for d, rows in enumerate(s.devices):
        actions, pair = [], []
        for kind, micro, chunk, fused in rows.tolist():
            if kind == R or micro >= s.m:
                continue
            pair.append(f"{int(s.stage_map[d, chunk])}{KIND_NAMES[kind]}{micro}")
            if not fused:
                actions.append(pair[0] if len(pair) == 1 else f"({';'.join(pair)})OVERLAP_F_B")
                pair = []
        table.append(actions + pair)
    return table


def pytorch_actions_csv(s: Schedule) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(pytorch_actions(s))
    return out.getvalue()


def chrome_trace(tl: Timeline) -> str:
    """A Chrome/Perfetto trace: complete events ("ph": "X") with microsecond timestamps."""
    s = tl.schedule
    events = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": f"{s.name} p={s.p} m={s.m}"}}]
    events += [{"name": "thread_name", "ph": "M", "pid": 0, "tid": d, "args": {"name": f"device {d}"}}
               for d in range(s.p)]
    for d, k, mb, c, st, a, b in zip(tl.device.tolist(), tl.kind.tolist(), tl.micro.tolist(), tl.chunk.tolist(),
                                     tl.stage.tolist(), tl.start.tolist(), tl.end.tolist(), strict=True):
        letter = KIND_NAMES[k]
        events.append({"name": f"{letter}{mb}", "cat": _CATEGORY[letter], "ph": "X", "pid": 0, "tid": d,
                       "ts": round(a * 1000.0, 3), "dur": round((b - a) * 1000.0, 3),
                       "args": {"micro_batch": mb, "stage": st, "chunk": c}})
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}, separators=(",", ":"))
