"""`python -m core zero | activations | equivalence` in a subprocess: numbers, JSON shape, exit codes."""

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT  # this checkout, not a fixed path (a worktree must test its own code)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def cli_json(*args: str):
    r = cli(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_zero_json_reproduces_table1_at_nd_64():
    out = cli_json("zero", "--params", "7.5e9", "--nd", "64")
    assert list(out) == ["dp", "zero1", "zero2", "zero3"]
    for key in out:
        assert {"params", "grads", "optimizer", "total"} <= set(out[key])
        assert out[key]["total"] == out[key]["params"] + out[key]["grads"] + out[key]["optimizer"]
    got = [out[k]["total"] / 1e9 for k in ("dp", "zero1", "zero2", "zero3")]
    assert [abs(a - b) <= 0.06 for a, b in zip(got, (120, 31.4, 16.6, 1.88), strict=True)] == [True] * 4
    assert [out[k]["comm_psi"] for k in out] == [2, 2, 2, 3]


def test_zero_json_seventy_b_only_stage3_fits():
    out = cli_json("zero", "--params", "70e9", "--nd", "64", "--gpu-mem", "80")
    assert [round(out[k]["total"] / 1e9, 1) for k in out] == [1120.0, 293.1, 155.3, 17.5]
    assert [out[k]["fits"] for k in out] == [False, False, False, True]
    assert out["zero3"]["smallest_nd"] == 14 and out["zero2"]["smallest_nd"] is None


def test_zero_seed_002_examples_and_single_stage():
    out = cli_json("zero", "--params", "7e9", "--nd", "8")
    assert [out[k]["total"] / 1e9 for k in ("zero1", "zero2", "zero3")] == pytest.approx([38.5, 26.25, 14.0])
    one = cli_json("zero", "--params", "13e9", "--nd", "16", "--stage", "1")
    assert list(one) == ["zero1"] and one["zero1"]["total"] / 1e9 == pytest.approx(61.75)


def test_zero_with_tp_pp_offload_and_deepspeed():
    out = cli_json("zero", "--params", "70e9", "--nd", "8", "--t", "8", "--p", "1", "--offload", "optimizer",
                   "--deepspeed", "--largest-layer", "1e9", "--gpus-per-node", "8")
    assert out["zero2"]["gpu"] == pytest.approx(2 * 70e9 / 8)
    assert out["zero2"]["cpu_per_node"] == pytest.approx(8 * 14 * 70e9 / 8 / 8)
    assert out["zero3"]["deepspeed_gpu"] == 4 * 1e9 + int(2 * 70e9 / 8)


def test_zero_human_output_labels_units_and_warns_about_activations():
    r = cli("zero", "--params", "7.5e9", "--nd", "64")
    assert r.returncode == 0
    assert "GB = 1e9 bytes, GiB = 2^30 bytes" in r.stdout and "31.41" in r.stdout and "64.0x" in r.stdout
    assert "activations" in r.stdout


def test_zero_presets_list():
    r = cli("zero", "--presets")
    assert r.returncode == 0 and "adam-8bit" in r.stdout and "Dettmers" in r.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (["zero", "--params", "-1", "--nd", "8"], "params"),
        (["zero", "--params", "0", "--nd", "8"], "params"),
        (["zero", "--params", "1e9", "--nd", "0"], "nd"),
        (["zero", "--params", "1e9", "--nd", "2.5"], "whole number"),
        (["zero", "--params", "1e9", "--nd", "64", "--gpus", "32"], "exceeds"),
        (["zero", "--params", "1e9", "--nd", "8", "--k", "nan"], "finite"),
        (["zero", "--params", "1e99", "--nd", "8"], "out of range"),
        (["zero", "--params", "1e9", "--nd", "8", "--stage", "5"], "not allowed"),
        (["zero", "--params", "1e9", "--nd", "8", "--stage", "0", "--offload", "optimizer"], "stage 1"),
        (["zero", "--params", "1e9", "--nd", "8", "--bogus"], "unrecognized"),
        (["zero", "--params", "1e9", "--nd", "8", "--split", "embedding-on-ends"], "embedding"),
        (["activations", "-p", "4"], "inflight"),
        (["activations", "--seq", "0"], "seq"),
        (["activations", "--inflight", "2", "--schedule", "1f1b", "-p", "4"], "not both"),
        (["equivalence", "--ranks", "0"], "ranks"),
        (["equivalence", "--ranks", "64", "--steps", "1000", "--size", "100000"], "at most"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(args, needle):
    r = cli(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr


def test_activations_json_per_layer_matches_korthikanti():
    out = cli_json("activations", "--seq", "2048", "--mb", "1", "--hidden", "12288", "--heads", "96",
                   "--layers", "96", "-t", "8", "--sequence-parallel", "--recompute", "selective",
                   "-p", "8", "--inflight", "8", "--vocab", "51200")
    assert out["per_layer"] == pytest.approx(34 * 2048 * 12288 / 8)
    assert out["layers_per_stage"] == 12 and out["inflight"] == 8 and out["inflight_source"] == "given"
    assert out["first_stage"]["layers"] == pytest.approx(out["per_layer"] * 12 * 8)
    modes = out["modes"]
    assert modes["full recompute"] < modes["tensor parallel + selective recompute"] < modes["tensor parallel"]


def test_activations_together_with_model_states():
    out = cli_json("activations", "--seq", "4096", "--hidden", "8192", "--heads", "64", "--layers", "80",
                   "--params", "70e9", "--nd", "64", "--zero-stage", "3", "--gpu-mem", "80")
    tg = out["together"]
    assert tg["states"] == pytest.approx(17.5e9)
    assert tg["fits_states_only"] and not tg["fits"]  # the classic mistake: activations forgotten


@pytest.mark.parametrize("schedule,expected", [("1f1b", 4.0), ("gpipe", 8.0)])
def test_activations_inflight_comes_from_the_pipeline_simulator(schedule, expected):
    # seed 000 step 3: p = 4, m = 8, GPipe holds 8 micro-batches on stage 0, 1F1B holds 4
    out = cli_json("activations", "--layers", "32", "-p", "4", "-m", "8", "--schedule", schedule)
    assert out["inflight"] == expected and out["inflight_source"].startswith("pipeline simulator")


def test_equivalence_json():
    out = cli_json("equivalence", "--ranks", "4", "--steps", "20")
    assert out["max_abs_diff"] == 0.0 and out["max_abs_diff_clipped"] == 0.0
    assert out["state_per_rank_sharded"] == [500] * 4 and out["state_per_rank_replicated"] == 2000
