"""`python -m core plan`, as a user runs it: formats, pins, exports, and one-line errors with exit code 2."""

import ast
import io
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from core.cli import main
from core.cost import calibration
from core.planner.columns import JSON_KEYS
from core.planner.exports import confirmed, flatten_keys
from core.units import GB

ROOT = Path(__file__).resolve().parents[1]
LLAMA70 = ["--model", "llama3-70b", "--gpu", "a100-80gb", "--gpus", "64", "--global-batch", "512"]
BLOOM = ["--model", "bloom-176b", "--gpu", "a100-80gb", "--gpus", "384", "--global-batch", "2048",
         "--fix", "t=4,p=12,d=8,zero=1,mbs=2,recompute=full,sp=off,schedule=1f1b"]
REQUIRED = ("t", "p", "d", "zero_stage", "schedule", "v", "micro_batch_size", "recompute", "memory_bytes",
            "model_state_bytes", "activation_bytes", "fits", "bubble_fraction", "step_time_s", "tokens_per_s", "mfu",
            "reasons")


def plan(capsys, *args):
    code = main(["plan", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_as_a_user_runs_it():
    out = subprocess.run([sys.executable, "-m", "core", "plan", *LLAMA70, "--top", "3"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("Llama 3 70B (70.6B parameters) on 64 x NVIDIA A100 80GB SXM")
    # rank 1: t = 8 inside a server, p = 2, d = 4: counted as the frameworks store it, t = 8 x d = 8 without a
    # pipeline (the winner at the textbook's bytes) needs more than fits
    assert lines[2].startswith("Timed as release bridge-26.06") and "no fit for the A100 family" in lines[2]
    assert lines[6].split()[:4] == ["1", "8", "2", "4"]


def test_json_lists_candidates_with_the_documented_keys(capsys):
    code, out, err = plan(capsys, *LLAMA70, "--json", "--top", "0")
    assert code == 0, err
    data = json.loads(out)
    assert len(data) > 1000 and set(data[0]) == {*JSON_KEYS, "release", "breakdown"} and set(JSON_KEYS) >= set(REQUIRED)
    assert data[0]["release"] == "bridge-26.06"  # which release the step times assume
    best = data[0]
    assert sum(best["breakdown"].values()) == pytest.approx(best["step_time_s"])  # seconds by component
    assert best["rank"] == 1 and best["fits"] and best["reasons"] == [] and best["memory_bytes"] < 85e9
    infeasible = [c for c in data if c["rank"] is None]
    assert infeasible and all(c["reasons"] for c in infeasible)
    assert all(isinstance(r, str) for c in infeasible for r in c["reasons"])


def test_seven_point_five_b_through_the_cli(capsys):
    code, out, _ = plan(capsys, "--model", "zero-7.5b", "--gpu", "v100-32gb", "--gpus", "64", "--global-batch", "512",
                        "--fix", "t=1,p=1,recompute=full,mbs=1", "--memory-framework", "textbook", "--json")
    states = {c["zero_stage"]: round(c["model_state_bytes"] / GB, 2) for c in json.loads(out)}
    assert states == {0: 120.0, 1: 31.41, 2: 16.64, 3: 1.88}


def test_csv_has_every_column(capsys):
    code, out, _ = plan(capsys, *LLAMA70, "--csv", "--top", "20")
    frame = pd.read_csv(io.StringIO(out))
    assert len(frame) == 20 and {"step_time_s", "tp_ratio", "dp_exposed_s", "warnings"} <= set(frame.columns)
    assert list(frame["rank"]) == list(range(1, 21))


def test_pinned_published_layout_with_explanation(capsys):
    code, out, _ = plan(capsys, *BLOOM, "--explain")
    assert code == 0
    assert "1 of 1 candidates feasible" in out
    assert "Recommended for BLOOM-176B on 384 x NVIDIA A100 80GB SXM" in out
    assert "t = 4 (inside a server) x p = 12 1f1b x d = 8, ZeRO-1, micro-batch 2 (m = 128), recompute full" in out
    gemm_eff = calibration.for_family("a100", "16-bit").gemm_eff
    for needle in ("Assumptions:", f"Large-GEMM fraction of peak = {gemm_eff:g}",
                   "GEMM output tile = 256 x 128", "uneven stages: 70 layers over 12 stages",
                   "simulated for 1f1b with p = 12, m = 128", "By component: GEMMs"):
        assert needle in out


def test_exports(capsys):
    code, out, err = plan(capsys, *BLOOM, "--export", "deepspeed")
    cfg = json.loads(out)
    assert set(flatten_keys(cfg)) <= set(confirmed()["deepspeed"]["options"])
    assert cfg["zero_optimization"]["stage"] == 1 and cfg["gradient_accumulation_steps"] == 128
    assert cfg["train_micro_batch_size_per_gpu"] == 2 and "activation_checkpointing" in cfg
    assert "PipeModelDataParallelTopology(num_pp=12, num_mp=4, num_dp=8)" in err and "note: " in err
    code, out, _ = plan(capsys, *BLOOM, "--export", "megatron")
    for flag in ("--tensor-model-parallel-size 4", "--pipeline-model-parallel-size 12", "--micro-batch-size 2",
                 "--global-batch-size 2048", "--recompute-granularity full", "--use-distributed-optimizer"):
        assert flag in out
    # PyTorch's ZeRO-1 (DDP + ZeroRedundancyOptimizer) does not compose with t = 4: refused, not rewritten.
    code, out, err = plan(capsys, *BLOOM, "--export", "fsdp")
    assert code == 2 and out == "" and "takes ZeRO 2 or 3 with tensor parallelism, not ZeRO-1" in err
    assert "--framework torch" in err
    code, out, _ = plan(capsys, *BLOOM[:-1], "t=4,p=12,d=8,zero=2,mbs=2,recompute=full,sp=off,schedule=1f1b",
                        "--export", "torch")
    assert code == 0 and "fully_shard(" in out and "Schedule1F1B(" in out
    ast.parse(out)


def test_leaving_inputs_out_applies_the_documented_defaults(capsys):
    code, out, err = plan(capsys, "--top", "1", "--fix", "t=8,p=16,mbs=1,zero=1,recompute=full,sp=on,schedule=1f1b")
    assert code == 0, err
    assert out.startswith("GPT-3 175B (175B parameters) on 1,024 x NVIDIA H100 80GB SXM (8 per server), global "
                          "batch 1,536 sequences of 2,048 tokens.")
    help_text = subprocess.run([sys.executable, "-m", "core", "plan", "--help"], cwd=ROOT, capture_output=True,
                               text=True, timeout=60).stdout.replace("\n", " ")
    for default in ("default gpt3-175b", "default h100-80gb", "default 1024", "default 1536", "default any"):
        assert default in " ".join(help_text.split())


@pytest.mark.parametrize("args,needle", [
    (["--model", "llama3-8b", "--gpus", "64", "--fix", "t=8,p=16"], "t x p = 8 x 16 = 128 > 64 GPUs"),
    (["--gpus", "64", "--fix", "t=3"], "t = 3 does not divide 64 GPUs"),
    (["--fix", "t=8,p=8,d=8"], "t x p x d = 8 x 8 x 8 = 512 != 1,024 GPUs"),
    (["--framework", "megatron", "--fix", "schedule=zb-h1"], "Megatron-LM has no zb-h1 schedule"),
    (["--framework", "deepspeed", "--fix", "t=8,p=8,zero=3"], "DeepSpeed takes ZeRO 0 or 1 with pipeline parallelism"),
    (["--framework", "torch", "--fix", "zero=1,offload=optimizer"], "PyTorch (FSDP2, torch.distributed.pipelining) "
                                                                    "cannot offload optimizer"),
    (["--min-headroom", "90"], "min headroom 90 GB >= the 85.0 GB usable per GPU"),
])
def test_every_empty_result_says_which_pin_cannot_work(capsys, args, needle):
    code, out, err = plan(capsys, *args, "--top", "3")
    assert code == 0 and needle in out, out
    code, out, err = plan(capsys, *args, "--json")
    assert json.loads(out) == [] or all(r["rank"] is None for r in json.loads(out))
    assert needle in err


def test_framework_filter_keeps_only_what_it_runs(capsys):
    for name, schedules in (("megatron", {"1f1b", "interleaved"}), ("deepspeed", {"1f1b"})):
        code, out, err = plan(capsys, *LLAMA70, "--framework", name, "--json", "--top", "0")
        rows = json.loads(out)
        assert rows and all(name in r["frameworks"] for r in rows)
        assert {r["schedule"] for r in rows if r["p"] > 1} <= schedules
        if name == "deepspeed":
            assert all(r["zero_stage"] <= 1 for r in rows if r["p"] > 1)
            assert not any(r["sequence_parallel"] for r in rows) and {r["recompute"] for r in rows} <= {"none", "full"}
        assert f"Framework {'Megatron-LM' if name == 'megatron' else 'DeepSpeed'}" in err
    code, out, _ = plan(capsys, *LLAMA70, "--json", "--top", "0")
    rows = json.loads(out)
    assert all(set(r["frameworks"]) <= {"megatron", "deepspeed", "torch"} for r in rows)
    assert any(r["frameworks"] == ["megatron", "deepspeed", "torch"] for r in rows)


def test_min_headroom_keeps_only_roomy_layouts(capsys):
    code, out, _ = plan(capsys, *LLAMA70, "--min-headroom", "20", "--json", "--top", "0")
    rows = json.loads(out)
    feasible = [r for r in rows if r["rank"] is not None]
    assert feasible and all(r["headroom_bytes"] >= 20e9 for r in feasible)
    assert any("too little headroom" in x for r in rows for x in r["reasons"])
    assert all("headroom_bytes" in r for r in rows)


def test_an_export_the_framework_cannot_run_is_refused_with_the_reason(capsys):
    code, out, err = plan(capsys, *LLAMA70, "--fix", "t=8,p=2,schedule=zb-h1,zero=2,mbs=1,recompute=full",
                          "--export", "megatron")
    assert code == 2 and "Megatron-LM has no zb-h1 schedule" in err and "--framework megatron" in err


def test_custom_model_and_gpu(capsys):
    code, out, err = plan(capsys, "--layers", "32", "--hidden", "4096", "--heads", "32", "--seq", "2048", "--vocab",
                          "50000", "--gpus", "16", "--gpu-mem", "40", "--gpu-tflops", "312", "--gpus-per-node", "8",
                          "--global-batch", "256", "--json", "--top", "1")
    assert code == 0, err
    best = json.loads(out)[0]
    assert best["fits"] and best["memory_bytes"] <= 40e9  # a typed memory is the device's, all of it usable


@pytest.mark.parametrize("args,needle", [
    (["--gpus", "0"], "gpus: '0' is out of range"),
    (["--hidden", "1024"], "give --model or a custom architecture (--hidden)"),
    (["--layers", "12", "--heads", "16"], "give --model or a custom architecture (--layers, --heads)"),
    (["--layers", "2000"], "depth: '2000' is out of range"),
    (["--framework", "jax"], "framework: 'jax' is not allowed"),
    (["--min-headroom", "-1"], "min_headroom: '-1' is out of range"),
    (["--fix", "q=1"], "--fix: 'q=1' is not KEY=VALUE"),
    (["--micro-batch-sizes", "1,x"], "mb_sizes"),
    (["--fix", "zero=4"], "zero: '4' is not allowed"),
])
def test_bad_arguments_give_one_line_and_exit_2(capsys, args, needle):
    base = dict(zip(LLAMA70[::2], LLAMA70[1::2], strict=True))
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    code, out, err = plan(capsys, *[x for kv in base.items() for x in kv])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err


def test_nothing_feasible_is_explained_not_a_crash(capsys):
    code, out, err = plan(capsys, "--model", "llama3-70b", "--gpu", "h100-80gb", "--gpus", "13", "--global-batch",
                          "512", "--json", "--feasible-only")
    assert code == 0 and json.loads(out) == []
    assert "G = 13 is prime" in err and "None of the 115 candidates is feasible" in err
    assert "t does not divide the heads (1 candidates)" in err  # t = 13 is listed, not dropped
    code, out, err = plan(capsys, "--model", "llama3-70b", "--gpu", "h100-80gb", "--gpus", "13", "--global-batch",
                          "512", "--export", "megatron")
    assert code == 2 and "no feasible candidate to export" in err


def test_layers_with_a_preset_plans_the_preset_at_that_depth(capsys):
    # Llama 3 70B's block stacked 8 times (a framework's proxy run): 8 / 80 of its layers, the same embeddings
    code, out, err = plan(capsys, *LLAMA70[:2], "--layers", "8", "--gpus", "8", "--global-batch", "16", "--json",
                          "--top", "1")
    assert code == 0, err
    from core.model import presets
    from core.model.counts import model_params
    full, proxy = presets.model("llama3-70b"), presets.model("llama3-70b").with_layers(8)
    assert proxy.name == "Llama 3 70B at 8 layers" and proxy.params_published is None
    # a Llama 3 70B layer: q and o 8192^2, k and v 8192 x 1024, SwiGLU 3 x 8192 x 28672, two RMSNorm weights
    layer = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192
    assert model_params(full) - model_params(proxy) == 72 * layer == 72 * 855_654_400
    assert json.loads(out)[0]["fits"]
