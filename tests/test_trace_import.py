"""A PyTorch action table back into the simulator: our own exports round-trip to the same timeline, PyTorch's
extra actions are skipped, and a malformed table is one clear InputError (`simulate --from-csv`)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from core.errors import InputError
from core.params.pipeline import SCHEDULE_NAMES
from core.pipeline.result import PipelineParams, simulate
from core.pipeline.trace_export import pytorch_actions_csv
from core.pipeline.trace_import import schedule_from_actions, simulate_actions
from tests.conftest import ROOT

SYNCHRONOUS = [s for s in SCHEDULE_NAMES if s not in ("pipedream", "dualpipe")]  # no PyTorch table for these


@pytest.mark.parametrize("name", SYNCHRONOUS)
@pytest.mark.parametrize("p,m,v", [(4, 8, 2), (3, 12, 3), (8, 16, 2)])
def test_our_export_reads_back_to_the_same_timeline(name, p, m, v):
    try:
        ours = simulate(PipelineParams(schedule=name, p=p, m=m, v=v, tf=1.0, tb=2.0, tw=0.5, tcomm=0.1))
    except InputError:
        return  # a configuration the schedule itself refuses (odd p for a V schedule, m below its minimum)
    back = simulate_actions(pytorch_actions_csv(ours.schedule), 1.0, 2.0, 0.5, 0.1)
    assert back.timeline.makespan == pytest.approx(ours.timeline.makespan, abs=1e-9)
    assert np.allclose(back.timeline.peak_inflight, ours.timeline.peak_inflight)
    assert back.timeline.bubble_fraction == pytest.approx(ours.timeline.bubble_fraction)
    assert (back.schedule.p, back.schedule.m) == (ours.schedule.p, ours.schedule.m)


def test_pytorch_bookkeeping_actions_are_skipped_and_pairs_fused():
    table = ("0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0REDUCE_GRAD,0RESHARD\n"
             "1UNSHARD,1RECV_F0,1F0,1RECV_F1,(1F1;1B0)OVERLAP_F_B,1SEND_B0,1B1,1SEND_B1,1REDUCE_GRAD\n")
    s = schedule_from_actions(table)
    assert (s.p, s.v, s.m) == (2, 1, 2) and s.listing(1) == ["F0", "F1+", "B0", "B1"]


@pytest.mark.parametrize("table,needle", [
    ("0F0,0X0\n", "'0X0' is not an action"),
    ("0F0,0F0,0B0\n", "stage 0, micro-batch 0 has 2 forward"),
    ("0F0\n", "0 backward"),
    ("0F0,0W0,0I0\n", "0W0 comes before 0I0"),
    ("0F0,2F0,0B0,2B0\n1F0,1B0\n", "ranks hold different numbers of stages"),
    ("0F0,0B0\n2F0,2B0\n", "are not 0..1"),
    ("\n\n", "no actions"),
    ("0F0,0B0\n" * 65, "at most 64"),
    ("0F0,0B0,0F2000,0B2000\n", "micro-batches"),
])
def test_a_malformed_table_is_one_clear_error(table, needle):
    with pytest.raises(InputError, match=needle):
        simulate_actions(table)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "core", "simulate", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def test_from_csv_gives_the_same_json_keys_as_a_named_schedule(tmp_path):
    path = tmp_path / "zbv.csv"
    path.write_text(cli("--schedule", "zbv", "-p", "4", "-m", "8", "--csv-actions").stdout, encoding="utf-8")
    named = json.loads(cli("--schedule", "zbv", "-p", "4", "-m", "8", "--tf", "1", "--tb", "1", "--tw", "1",
                           "--json").stdout)
    out = cli("--from-csv", str(path), "--tf", "1", "--tb", "1", "--tw", "1", "--json")
    assert out.returncode == 0, out.stderr
    imported = json.loads(out.stdout)
    assert set(imported) == set(named)
    assert imported["makespan"] == named["makespan"] and imported["peak_inflight"] == named["peak_inflight"]
    assert imported["schedule"] == "csv:zbv.csv" and imported["formula_bubble_fraction"] is None
    assert "no closed form" in cli("--from-csv", str(path)).stdout


@pytest.mark.parametrize("args,needle", [
    (["-p", "4"], "the table fixes the schedule, p, m and v"),
    (["--tf", "-1"], "tf"),
])
def test_from_csv_argument_errors_exit_2(tmp_path, args, needle):
    path = tmp_path / "t.csv"
    path.write_text("0F0,0B0\n", encoding="utf-8")
    out = cli("--from-csv", str(path), *args)
    assert out.returncode == 2 and needle in out.stderr
    missing = cli("--from-csv", str(tmp_path / "missing.csv"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
