"""Published layouts are feasible at their published settings, and rank near the top (numbers quoted in the README).

BLOOM-176B: TP 4 x PP 12 x DP 8, ZeRO-1, micro-batch 2, full recompute, no sequence parallelism, 384 A100 80GB.
Llama 3 405B: TP 8 x PP 16 x DP 64 on 8,192 H100, interleaved, FSDP (ZeRO-3 in the preset), sequence parallel and
full recompute (assumed in assets/models.json). Each is checked twice: in the planner's full search (default
switches) and with its published switches pinned, so that only t x p x d is searched.
"""

import pytest

from core.params.planner import PlannerParams
from core.planner import plan as planner
from core.planner.layout import from_published
from core.units import GB

BLOOM = dict(model="bloom-176b", gpu="a100-80gb", gpus=384, batch=2048)
BLOOM_SWITCHES = dict(mb_sizes=(2,), zero="1", recompute="full", sp="off", schedule="1f1b")
LLAMA = dict(model="llama3-405b", gpu="h100-80gb", gpus=8192, batch=2048)
LLAMA_SWITCHES = dict(mb_sizes=(1,), zero="3", recompute="full", sp="on", schedule="interleaved", v=2)


def _published_row(result, key):
    pub = from_published(key)
    f = result.frame
    sel = ((f["t"] == pub.t) & (f["p"] == pub.p) & (f["d"] == pub.d) & (f["zero_stage"] == pub.zero_stage)
           & (f["micro_batch_size"] == pub.micro_batch_size) & (f["schedule"] == pub.schedule) & (f["v"] == pub.v)
           & (f["recompute"] == pub.recompute) & (f["sequence_parallel"] == pub.sequence_parallel))
    assert sel.sum() == 1
    return f[sel].iloc[0]


def test_bloom_is_feasible_and_third_with_its_switches():
    r = planner.plan(PlannerParams(**BLOOM, **BLOOM_SWITCHES))
    row = _published_row(r, "bloom-176b")
    assert row["feasible"] and row["reasons"] == ()
    assert row["m"] == 128 and row["inflight"] == 12  # 1F1B holds p micro-batches on the first stage
    assert row["model_state_bytes"] / GB == pytest.approx(24.73, abs=0.01)  # (2 + 2 + 12/8) x 4.50e9 per rank
    assert 45 < row["memory_bytes"] / GB < 55 < r.usable / GB
    assert row["rank"] == 3 and len(r.feasible) == 8
    assert row["step_time_s"] / r.best()["step_time_s"] < 1.01  # within 1 % of the best t x p x d
    assert 150 < row["tflops_per_gpu"] < 170  # BigScience reported about 150 TFLOP/s per GPU


def test_bloom_in_the_full_search():
    r = planner.plan(PlannerParams(**BLOOM))
    row = _published_row(r, "bloom-176b")
    assert row["feasible"]
    assert row["rank"] == 101 and len(r.feasible) == 337  # rows no framework runs are not feasible
    assert row["frameworks"] == ("megatron", "deepspeed")
    assert row["step_time_s"] / r.best()["step_time_s"] < 1.45


def test_llama3_405b_is_feasible_with_its_switches():
    r = planner.plan(PlannerParams(**LLAMA, **LLAMA_SWITCHES))
    row = _published_row(r, "llama3-405b")
    assert row["feasible"] and row["m"] == 32
    assert row["inflight"] == pytest.approx(23.5)  # interleaved v = 2: p (1 + (p-1)/(p v)) micro-batches
    assert row["memory_bytes"] / GB < 40
    assert row["rank"] == 6 and len(r.feasible) == 10
    zero1 = planner.plan(PlannerParams(**LLAMA, **{**LLAMA_SWITCHES, "zero": "1"}))
    assert _published_row_at(zero1, 1)["rank"] == 3


def _published_row_at(result, zero):
    f = result.frame
    sel = (f["t"] == 8) & (f["p"] == 16) & (f["d"] == 64) & (f["zero_stage"] == zero)
    assert sel.sum() == 1
    return f[sel].iloc[0]


def test_llama3_405b_in_the_full_search():
    r = planner.plan(PlannerParams(**LLAMA))
    row = _published_row(r, "llama3-405b")
    assert row["feasible"] and len(r.feasible) == 113
    assert row["rank"] == 77  # ZeRO-3 re-gathers the parameters for each of the 32 micro-batches
    assert row["frameworks"] == ("torch",)  # FSDP with a pipeline: Megatron-FSDP + PP is not confirmed
    f = r.frame
    same = f[(f["t"] == 8) & (f["p"] == 16) & (f["d"] == 64) & (f["schedule"] == "interleaved")
             & (f["micro_batch_size"] == 1) & (f["recompute"] == "full") & f["sequence_parallel"]]
    ranks = dict(zip(same["zero_stage"], same["rank"], strict=True))
    assert ranks[2] == 19 and ranks[1] == 20
