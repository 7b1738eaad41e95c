"""PyTorch action tables and Chrome traces made from schedules and timelines."""

import csv
import io
import json
import re

import pytest

from core.errors import InputError
from core.pipeline.result import PipelineParams, simulate
from core.pipeline.trace_export import chrome_trace, pytorch_actions_csv

OVERLAP = re.compile(r"^\((\w+);(\w+)\)OVERLAP_F_B$")  # DualPipe's fused pair, as PyTorch writes it
ACTION = re.compile(r"^(\d+)([FBIW])(\d+)$")


@pytest.mark.parametrize("schedule,split", [("1f1b", False), ("interleaved", False), ("zb-h1", True),
                                            ("zbv", True), ("dualpipev", True)])
def test_pytorch_csv_has_one_row_per_rank_and_every_action_once(schedule, split):
    r = simulate(PipelineParams(schedule=schedule, p=4, m=8, v=2, iterations=2))
    rows = list(csv.reader(io.StringIO(pytorch_actions_csv(r.schedule))))
    assert len(rows) == 4
    cells = [a for row in rows for cell in row for a in OVERLAP.sub(r"\1;\2", cell).split(";")]
    seen = [ACTION.match(a).groups() for a in cells]
    assert ("OVERLAP_F_B" in "".join(c for row in rows for c in row)) == (schedule == "dualpipev")
    stages = r.params.num_stages
    for kind in ("F",) + (("I", "W") if split and schedule != "dualpipev" else ()):
        got = sorted((int(s), int(mb)) for s, k, mb in seen if k == kind)
        assert got == sorted((s, mb) for s in range(stages) for mb in range(8)), kind  # one iteration
    backwards = sorted((int(s), int(mb)) for s, k, mb in seen if k in "BI")
    assert backwards == sorted((s, mb) for s in range(stages) for mb in range(8))
    assert rows[0][0] == "0F0"


def test_rank_rows_follow_the_schedule_order():
    r = simulate(PipelineParams(schedule="1f1b", p=4, m=8))
    first = pytorch_actions_csv(r.schedule).splitlines()[0].split(",")
    assert first[:6] == ["0F0", "0F1", "0F2", "0F3", "0B0", "0F4"]


def test_pipedream_has_no_synchronous_action_table():
    r = simulate(PipelineParams(schedule="pipedream", p=4, m=8, iterations=2))
    with pytest.raises(InputError, match="asynchronous"):
        pytorch_actions_csv(r.schedule)


def test_chrome_trace_is_valid_json_with_one_event_per_op():
    r = simulate(PipelineParams(schedule="zb-h1", p=4, m=8, tw=1.0))
    trace = json.loads(chrome_trace(r.timeline))
    ops = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(ops) == r.timeline.num_ops
    assert {e["cat"] for e in ops} == {"forward", "backward-input", "backward-weight"}
    last = max(e["ts"] + e["dur"] for e in ops)
    assert last == pytest.approx(r.timeline.makespan * 1000.0)
    assert {e["tid"] for e in ops} == {0, 1, 2, 3}
