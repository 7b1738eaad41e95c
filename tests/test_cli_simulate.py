"""`python -m core simulate`, run as a user would: output formats and exit codes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "core", "simulate", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def test_json_has_the_documented_keys():
    out = cli("--schedule", "1f1b", "-p", "4", "-m", "8", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for key in ("makespan", "bubble_fraction", "bubble_vs_ideal", "formula_bubble_fraction", "peak_inflight",
                "num_ops"):
        assert key in data
    assert data["makespan"] == 33 and data["num_ops"] == 64
    assert data["bubble_fraction"] == pytest.approx(3 / 11) == data["formula_bubble_fraction"]
    assert data["peak_inflight"] == [4, 3, 2, 1]


def test_json_formula_is_null_without_a_closed_form():
    data = json.loads(cli("--schedule", "zbv", "--tf", "1", "--tb", "2", "--tw", "1", "--json").stdout)
    assert data["formula_bubble_fraction"] is None and data["formula_note"]


def test_ascii_prints_the_seed_timeline():
    out = cli("--schedule", "gpipe", "-p", "4", "-m", "4", "--ascii")
    assert out.stdout.splitlines()[0] == "  stage 0: 0123.........aabbccdd"


def test_csv_actions_and_chrome_trace(tmp_path):
    out = cli("--schedule", "zb-h1", "-p", "2", "-m", "2", "--csv-actions")
    assert out.stdout.splitlines() == ["0F0,0F1,0I0,0W0,0I1,0W1", "1F0,1I0,1F1,1I1,1W0,1W1"]
    target = tmp_path / "trace.json"
    out = cli("--chrome-trace", str(target))
    assert out.returncode == 0 and json.loads(target.read_text())["traceEvents"]


@pytest.mark.parametrize("args", [
    ["-p", "0"], ["-m", "-1"], ["--tf", "nan"], ["--schedule", "nope"], ["--bogus"], ["-p", "x"],
    ["--schedule", "interleaved", "-m", "6"], ["-p", "64", "-m", "1024", "--schedule", "interleaved", "-v", "8",
                                               "--iterations", "16"],
    ["--tf", "1.5", "--ascii"], ["--json", "--ascii"], ["--stage-costs", "1,2," + "1" * 300],
])
def test_bad_arguments_give_one_line_and_exit_2(args):
    out = cli(*args)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
