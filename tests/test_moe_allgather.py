"""Megatron-Core's default token dispatcher, allgather (core.cost.expert_comm.allgather_time): every rank of the
t x ep group gathers all of the group's tokens, and the importer assumes it where a Megatron-LM script with experts
names no dispatcher."""

import numpy as np
import pytest

from core.configs import megatron_args
from core.cost import collective, expert_comm
from core.model import presets
from core.params.planner import PlannerParams
from core.planner import plan as planner
from core.planner.export_megatron import megatron_export
from core.planner.layout import Layout

H100 = presets.gpu("h100-80gb")
FABRIC = collective.Fabric(H100.intra_bytes_per_s, H100.inter_bytes_per_s, 8, 1e-5, 1.4e-5)


def _time(seq=4096, t=1, ep=8, recompute="none"):
    tokens = expert_comm.tokens_per_gpu(seq, 1, t, 1)
    return float(expert_comm.allgather_time(tokens, 4096, 8, t * ep, 8, FABRIC, recompute))


def test_one_layer_is_four_collectives_of_the_groups_tokens():
    # forward: gather (hidden bf16 + probabilities fp32 + routing map) and reduce-scatter the combine; backward:
    # reduce-scatter (hidden + probabilities) and gather the combine's gradient; all over the 8 ranks of one server
    tokens, h, e = 8 * 4096, 4096, 8
    one = collective.cost
    want = (one("all-gather", tokens * (2 * h + 4 * e + e), 8, 8, FABRIC).seconds
            + 2 * one("reduce-scatter", tokens * 2 * h, 8, 8, FABRIC).seconds
            + one("reduce-scatter", tokens * (2 * h + 4 * e), 8, 8, FABRIC).seconds
            - one("reduce-scatter", tokens * 2 * h, 8, 8, FABRIC).seconds
            + one("all-gather", tokens * 2 * h, 8, 8, FABRIC).seconds)
    assert _time() == pytest.approx(want, rel=1e-9)
    # the group is t x ep: under TP each rank holds s b / t tokens, so t = 2, ep = 4 gathers ep sequences on 8 ranks,
    # as t = 1, ep = 8 does with half the sequence
    assert _time(t=2, ep=4) == pytest.approx(_time(seq=2048), rel=1e-9)
    # full recompute gathers again in the backward; the forward is about half the layer's traffic
    assert 1.4 < _time(recompute="full") / _time() < 1.6


def test_the_planner_times_allgather_slower_than_alltoall_and_gives_it_no_ep_overlap():
    pins = {"model": "mixtral-8x7b", "gpus": "64", "batch": "256", "fix_t": "2", "fix_p": "4", "fix_ep": "8",
            "zero": "1", "mb_sizes": "1", "schedule": "interleaved", "v": "2", "recompute": "selective",
            "sp": "on", "tp_comm_overlap": "off"}
    rows = {d: planner.plan(PlannerParams.from_strings({**pins, "moe_dispatcher": d})).frame.iloc[0]
            for d in ("alltoall", "allgather")}
    assert rows["allgather"]["a2a_s"] > 1.5 * rows["alltoall"]["a2a_s"]
    overlap = planner.plan(PlannerParams.from_strings({**pins, "moe_dispatcher": "allgather",
                                                       "moe_a2a_overlap": "true"})).frame.iloc[0]
    assert overlap["a2a_exposed_s"] == pytest.approx(overlap["a2a_s"])  # Megatron-Core refuses the overlap there


@pytest.mark.parametrize("flags, kind, how", [
    ("", "allgather", "assumed"),  # Megatron-Core's default
    ("--moe-token-dispatcher-type allgather", "allgather", "read"),
    ("--moe-token-dispatcher-type alltoall", "alltoall", "read"),
    ("--moe-token-dispatcher-type flex --moe-enable-deepep", "deepep", "read"),
])
def test_a_megatron_script_reads_its_dispatcher(flags, kind, how):
    r = megatron_args.read("torchrun pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 4 "
                           f"--seq-length 512 --num-experts 8 --moe-router-topk 2 {flags}")
    assert r.raw["moe_dispatcher"] == kind
    assert how in {e.kind for e in r.entries if "dispatcher" in e.name}
    dense = megatron_args.read("torchrun pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 4")
    assert "moe_dispatcher" not in dense.raw


def test_the_export_names_the_dispatcher_and_reads_back():
    lay = Layout(model=presets.model("mixtral-8x7b"), gpu=H100, t=1, p=1, d=8, ep=8, global_batch=64,
                 zero_stage=1, moe_dispatcher="allgather")
    text = megatron_export(lay).text
    assert "--moe-token-dispatcher-type allgather" in text
    assert megatron_args.read(text).raw["moe_dispatcher"] == "allgather"
    assert np.isfinite(_time())


def test_the_export_does_not_ask_megatron_for_the_ep_overlap_with_allgather():
    lay = Layout(model=presets.model("mixtral-8x7b"), gpu=H100, t=1, p=1, d=8, ep=8, global_batch=64,
                 zero_stage=1, moe_dispatcher="allgather", moe_a2a_overlap=True)
    art = megatron_export(lay)
    assert "--overlap-moe-expert-parallel-comm" not in art.text
    assert any("allgather dispatcher" in n for n in art.notes)
