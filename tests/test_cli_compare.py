"""`python -m core simulate --frontier / --compare [--equal-memory]`, run as a user would.

Expected numbers and their sources (asserted on the simulator in tests/test_pipeline_memory_schedules.py):
- Qi et al. 2024, "Pipeline Parallelism with Controllable Memory" (arXiv 2405.15362): peak activation
  1F1B p, V-Half (p+2)//2, V-Min (p+4)//3; at p = 8, m = 32 with t_f = t_b = t_w = 1 their reference
  implementation's bubble rates 0.0813 (V-Half) and 0.1233 (V-Min); 1F1B (p-1)/(m+p-1) = 7/39.
- GPipe (Huang et al. 2019): idle share (p-1)/(m+p-1), 3/11 at p = 4, m = 8.
Equal memory keeps the global batch: a schedule holding k micro-batches of size m/m' holds k x m/m'
of the reference's, so it needs the smallest valid m' with k x m/m' <= the target (derived by hand below).
"""

import json
import math
import subprocess
import sys

import pytest

from core.pipeline.compare import FRONTIER_OPS, frontier, match_memory
from core.pipeline.result import PipelineParams, simulate
from tests.conftest import ROOT

UNIT = ["--tf", "1", "--tb", "1", "--tw", "1"]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "core", "simulate", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def cli_json(*args):
    out = cli(*args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def by_name(data):
    return {r["schedule"]: r for r in data["schedules"]}


def test_frontier_peak_activation_is_the_published_one_at_p8_m32():
    rows = by_name(cli_json("-p", "8", "-m", "32", *UNIT, "--frontier"))
    assert len(rows) == 12
    assert (rows["1f1b"]["peak_activation"], rows["v-half"]["peak_activation"], rows["v-min"]["peak_activation"]) \
        == (8, (8 + 2) // 2, (8 + 4) // 3)
    assert rows["1f1b"]["bubble_fraction"] == pytest.approx(7 / 39)
    assert rows["v-half"]["bubble_fraction"] == pytest.approx(0.0813, abs=5e-5)
    assert rows["v-min"]["bubble_fraction"] == pytest.approx(0.1233, abs=5e-5)
    assert {n for n, r in rows.items() if r["pareto"]} >= {"zbv", "v-half", "v-min"} and not rows["gpipe"]["pareto"]


def test_frontier_gpipe_idle_share_and_relative_to_ideal_at_p4_m8():
    rows = by_name(cli_json("-p", "4", "-m", "8", "--tf", "1", "--tb", "2", "--frontier"))
    g = rows["gpipe"]
    assert g["bubble_fraction"] == pytest.approx(3 / 11)  # (p-1)/(m+p-1)
    assert g["bubble_vs_ideal"] == pytest.approx(3 / 8)  # (p-1)/m
    assert g["makespan"] == 33 and g["peak_activation"] == 8  # (m+p-1)(t_f+t_b); GPipe holds all m


def test_frontier_text_names_refusals_and_marks_the_schedule():
    out = cli("--schedule", "interleaved", "-p", "4", "-m", "6", "--frontier")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("> interleaved") and "—" in line for line in lines)
    assert "interleaved runs micro-batches in rounds of p = 4" in out.stdout
    assert "dualpipe needs m >= 8 for p = 4" in out.stdout
    gpipe = next(line for line in lines if line.strip().startswith("gpipe"))
    assert gpipe.split()[1:5] == ["6", "0.3333", "0.5000", "27"]  # 3/9, 3/6, (6+3) x 3


def test_frontier_keeps_the_pages_operation_budget():
    data = cli_json("-p", "64", "-m", "1024", "--frontier")
    assert data["operation_limit"] == FRONTIER_OPS
    rows = by_name(data)
    assert rows["zbv"]["peak_activation"] is None and f"{FRONTIER_OPS:,}" in rows["zbv"]["note"]
    assert rows["1f1b"]["peak_activation"] == 64


def test_equal_memory_1f1b_against_v_half_is_hand_derived():
    data = cli_json("--schedule", "v-half", "-p", "8", "-m", "32", *UNIT, "--compare", "1f1b", "--compare",
                    "gpipe", "--equal-memory")
    assert data["target"] == 5
    rows = by_name(data)
    one = rows["1f1b"]
    # 1F1B holds p = 8 micro-batches of 32/m' of v-half's: 8 x 32 / m' <= 5 needs m' >= 51.2
    assert one["m"] == math.ceil(8 * 32 / 5) == 52 and one["v"] is None
    assert one["peak_activation"] == pytest.approx(8 * 32 / 52) and one["micro_batch_scale"] == pytest.approx(32 / 52)
    mt = match_memory(PipelineParams(schedule="v-half", p=8, m=32, tf=1, tb=1, tw=1), "1f1b")
    assert (one["m"], one["peak_activation"]) == (mt.params.m, mt.memory)
    # idle share does not change with the micro-batch's size: 1F1B at m = 52 with unit costs, (p-1)/(m+p-1)
    assert one["bubble_fraction"] == pytest.approx(7 / 59) and one["bubble_vs_ideal"] == pytest.approx(7 / 52)
    assert one["makespan"] == pytest.approx(59 * 3 * 32 / 52)  # (m'+p-1)(t_f+t_b+t_w), costs x 32/52
    assert rows["gpipe"]["m"] is None and rows["gpipe"]["note"].startswith("gpipe cannot hold 5")


def test_equal_memory_v_shapes_against_1f1b_at_p4_m8():
    data = cli_json("--compare", "v-half", "--compare", "v-min", "--compare", "interleaved", "--equal-memory")
    rows = by_name(data)
    assert data["target"] == 4 and rows["1f1b"]["m"] == 8  # 1F1B holds p = 4 at the defaults (p = 4, m = 8)
    # V-Half holds (4+2)//2 = 3: 3 x 8 / m' <= 4 needs m' >= 6; V-Min holds (4+4)//3 = 2: m' >= 4
    assert (rows["v-half"]["m"], rows["v-half"]["peak_activation"]) == (6, 4)
    assert (rows["v-min"]["m"], rows["v-min"]["micro_batch_scale"]) == (4, 2)
    alone = simulate(PipelineParams(schedule="v-half", p=4, m=6)).timeline
    assert rows["v-half"]["bubble_fraction"] == pytest.approx(alone.bubble_fraction)
    assert rows["v-half"]["makespan"] == pytest.approx(alone.makespan * 8 / 6)
    ref = PipelineParams(schedule="1f1b", p=4, m=8)
    inter = match_memory(ref, "interleaved")
    assert (rows["interleaved"]["m"], rows["interleaved"]["v"]) == (inter.params.m, inter.params.v)


def test_equal_memory_text_shows_m_prime_and_the_reason():
    out = cli("--schedule", "v-half", "-p", "8", "-m", "32", *UNIT, "--compare", "1f1b", "--compare", "gpipe",
              "--equal-memory")
    assert out.returncode == 0, out.stderr
    one = next(line for line in out.stdout.splitlines() if line.startswith("1f1b"))
    assert one.split()[:5] == ["1f1b", "52", "—", "0.6154", "4.923"]
    assert "gpipe cannot hold 5 micro-batches' worth" in out.stdout


def test_compare_at_the_same_inputs():
    rows = by_name(cli_json("--schedule", "1f1b", "-p", "4", "-m", "8", "--compare", "gpipe", "--compare",
                            "dualpipe"))
    assert list(rows) == ["1f1b", "gpipe", "dualpipe"]
    for name in ("1f1b", "gpipe"):
        assert rows[name]["makespan"] == 33 and rows[name]["bubble_fraction"] == pytest.approx(3 / 11)
    assert (rows["1f1b"]["peak_activation"], rows["gpipe"]["peak_activation"]) == (4, 8)
    dual = simulate(PipelineParams(schedule="dualpipe", p=4, m=8)).summary()
    assert rows["dualpipe"]["makespan"] == dual["makespan"] and rows["dualpipe"]["note"] == ""
    refused = by_name(cli_json("-p", "4", "-m", "6", "--compare", "interleaved"))["interleaved"]
    assert refused["makespan"] is None and "m must be a multiple of p" in refused["note"]


def test_cli_prints_what_the_page_shows():
    """The page's own functions (ui/pipeline/memory.py) against the CLI's JSON, one setting."""
    from ui.pipeline.memory import _frontier, matched

    params = PipelineParams(schedule="v-half", p=8, m=32, tf=1, tb=1, tw=1)
    page = {r["schedule"]: r for r in _frontier(params)}
    assert page == {r["schedule"]: r for r in frontier(params, max_ops=FRONTIER_OPS)}
    cli_rows = by_name(cli_json("--schedule", "v-half", "-p", "8", "-m", "32", *UNIT, "--frontier"))
    for name, r in page.items():
        c = cli_rows[name]
        assert (c["peak_activation"], c["bubble_fraction"], c["bubble_vs_ideal"], c["makespan"], c["note"]) == \
            (r["peak activation"], r["idle share"], r["relative to ideal"], r["makespan"], r["note"])
    _, rows, refused = matched(params, ["1f1b", "interleaved", "gpipe"])
    eq = by_name(cli_json("--schedule", "v-half", "-p", "8", "-m", "32", *UNIT, "--compare", "1f1b", "--compare",
                          "interleaved", "--compare", "gpipe", "--equal-memory"))
    for r in rows:
        c = eq[r["schedule"]]
        assert (c["m"], c["v"], c["micro_batch_scale"], c["peak_activation"]) == \
            (r["m"], r["v"], r["micro-batch size (x this one's)"], r["activation memory"])
    assert refused == [f"gpipe: {eq['gpipe']['note']}"]


@pytest.mark.parametrize("args", [
    ["--compare", "nope"], ["--compare"], ["--equal-memory"], ["--frontier", "--compare", "gpipe"],
    ["--frontier", "--ascii"], ["--compare", "gpipe", "--csv-actions"], ["--compare", "1f1b"],
    ["--frontier", "--from-csv", "x.csv"], ["--schedule", "interleaved", "-m", "6", "--compare", "gpipe"],
    ["--schedule", "interleaved", "-m", "6", "--compare", "gpipe", "--equal-memory"],
    ["--frontier", "-p", "65"],
])
def test_bad_arguments_give_one_line_and_exit_2(args):
    out = cli(*args)
    assert out.returncode == 2, out.stdout
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_bad_names_and_missing_compare_say_what_to_do():
    assert "'nope' is not allowed; choose one of gpipe" in cli("--compare", "nope").stderr
    assert "--equal-memory needs at least one --compare NAME" in cli("--equal-memory").stderr


def test_help_documents_every_new_flag():
    out = cli("--help").stdout
    for flag in ("--frontier", "--compare NAME", "--equal-memory"):
        assert flag in out
    assert f"{FRONTIER_OPS:,}" in out and "up to 11" in out


def test_every_row_has_the_same_keys():
    for args in (["--frontier"], ["--compare", "gpipe", "--compare", "interleaved", "-m", "6"],
                 ["--compare", "v-min", "--compare", "gpipe", "--equal-memory"]):
        rows = cli_json(*args)["schedules"]
        assert len({tuple(sorted(r)) for r in rows}) == 1, args
