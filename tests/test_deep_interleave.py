"""One layer per virtual stage: NVIDIA's GPT-3 175B and Nemotron-4 340B recipes run v = 12 (96 layers on p = 8),
which the inputs refused at v > 8. v now goes to Megatron-LM's own limit, one layer per virtual stage (v <= L / p),
on the planner, the Pipeline page's simulator and the exports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from core.params.pipeline import PIPELINE
from core.pipeline.result import PipelineParams, simulate
from tests.conftest import ROOT

PLAN = [sys.executable, "-m", "core", "plan", "--model", "gpt3-175b", "--gpus", "1024", "--gpu", "h100-80gb",
        "--global-batch", "1536"]


def _plan(*extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*PLAN, *extra], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_96_layer_model_runs_v_12_on_p_8():
    done = _plan("--fix", "t=8,p=8,v=12,schedule=interleaved", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    feasible = [r for r in rows if r["feasible"]]
    assert feasible and all(r["v"] == 12 and r["p"] == 8 for r in rows)
    assert feasible[0]["bubble_fraction"] < 0.04  # 1F1B's share here is 8.3 %: twelve chunks a device


def test_more_chunks_than_layers_is_refused_with_the_reason():
    done = _plan("--fix", "t=8,p=8,v=16,schedule=interleaved")
    assert done.returncode == 0, done.stderr
    assert "0 of " in done.stdout and "too many chunks: p x v = 128 > 96 layers" in done.stdout


def test_the_megatron_export_names_v_12():
    done = _plan("--fix", "t=8,p=8,v=12,schedule=interleaved", "--top", "1", "--export", "megatron")
    assert done.returncode == 0, done.stderr
    assert "--num-virtual-stages-per-pipeline-rank 12" in done.stdout


def test_the_simulator_runs_v_12_and_its_bubble_is_the_closed_form():
    result = simulate(PipelineParams(schedule="interleaved", p=8, m=16, v=12))
    # Megatron-LM's interleaved 1F1B, t_b = 2 t_f, no W: bubble relative to ideal (p - 1) / (v m)
    ideal = 16 * 3.0
    assert (result.timeline.makespan - ideal) / ideal == pytest.approx((8 - 1) / (12 * 16))
    assert int(PIPELINE["v"].hi) == 64
