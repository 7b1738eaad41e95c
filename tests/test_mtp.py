"""Multi-token prediction (DeepSeek-V3's MTP) and the end stages counted in the pipeline split: parameter counts
against the published totals, Megatron-Bridge's own DeepSeek-V3 layout string, what the last stage runs and holds."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from core.cost import collective, layer_ops, step_time
from core.cost.step_input import Assumptions, Layouts, Setting
from core.errors import InputError
from core.memory import experts, per_gpu
from core.model import counts, presets, stage_split
from core.params.planner import PlannerParams
from core.planner.export_megatron import megatron_args
from core.planner.layout import Layout


def test_deepseek_v3_mtp_module_matches_the_published_size():
    # Hugging Face's DeepSeek-V3 is 685B: 671B main model + 14B MTP module, whose copy holds its own embedding and
    # output head (shared with the main model in training, so not counted again here)
    m = presets.model("deepseek-v3")
    mtp = counts.mtp_params(m)
    assert m.mtp_layers == 1 and m.params == 671e9
    assert mtp["experts"] == 256 * 3 * 7168 * 2048
    assert mtp["total"] / 1e9 == pytest.approx(11.61, abs=0.01)
    assert (mtp["total"] + 2 * m.vocab * m.hidden) / 1e9 == pytest.approx(14.0, abs=0.6)
    assert counts.mtp_params(presets.model("llama3-405b"))["total"] == 0.0


def test_megatron_bridge_deepseek_v3_layout_is_the_ends_in_split_placement():
    # scripts/performance/configs/deepseek/deepseek_v3_llm_pretrain.yaml (Bridge d83f5a0d9), p 8 x v 4 = 32 stages
    assert stage_split.layout_string(61, 32, 1) == "Et|(tt|)*30mL"
    mid, first, last = stage_split.stage_layers(61, 8, 4, 1, True)
    assert (float(mid), float(first), float(last)) == (2.0, 1.0, 0.0)
    # Llama 3 405B: 126 layers + embedding + loss over 16 stages = 8 slots each (Megatron's account-for flags)
    assert [float(x) for x in stage_split.stage_layers(126, 16, 1, 0, True)] == [8.0, 7.0, 7.0]
    assert [float(x) for x in stage_split.stage_layers(126, 16, 1, 0, False)] == [8.0, 8.0, 8.0]
    assert stage_split.layout_string(61, 32, 0) == "Et|(tt|)*29t|tL"  # 1 + 29 x 2 + 1 + 1 = 61
    # No pipeline: nothing to lighten; two stages: the ends share every layer
    assert [float(x) for x in stage_split.stage_layers(61, 1, 1, 1, True)] == [61.0, 61.0, 61.0]
    assert [float(x) for x in stage_split.stage_layers(5, 2, 1, 0, True)] == [3.0, 3.0, 2.0]
    for layers, stages, mtp in ((61, 32, 1), (32, 8, 0), (10, 3, 1), (5, 2, 0), (96, 12, 2)):
        text = stage_split.layout_string(layers, stages, mtp)
        unrolled = re.sub(r"\(([^)]+)\)\*(\d+)", lambda g: g.group(1) * int(g.group(2)), text)
        parts = unrolled.split("|")
        assert len(parts) == stages and unrolled.count("t") == layers and unrolled.count("m") == mtp


def _setting(model, **a):
    return Setting(model, presets.gpu("h100-80gb"), Assumptions(**a), gpus=1024, batch=8192, precision="fp8")


def test_the_last_stage_runs_each_prediction_depth_as_a_layer_and_an_output_layer():
    m = presets.model("deepseek-v3")
    lay = Layouts(t=2, p=8, d=64, ep=64, etp=1, micro_batch_size=1, chunks=4, m=128, sp=True)
    plain = step_time.stage_costs(_setting(replace(m, mtp_layers=0)), lay)
    mtp = step_time.stage_costs(_setting(m), lay)
    r = Assumptions().rates(presets.gpu("h100-80gb"), True)
    fabric = collective.Fabric.of(presets.gpu("h100-80gb"), Assumptions())
    extra = layer_ops.mtp_times(m, r, 1.0, 2, True, fabric)
    one_layer = {k: mtp.body[k] / 8 for k in ("gemm", "attention", "memory_bound")}
    for k, c in (("gemm", "gemm"), ("attention", "attention"), ("memory_bound", "memory")):
        added = sum(extra[ph][c] for ph in layer_ops.PHASES)
        assert float(mtp.tail[k] - plain.tail[k]) == pytest.approx(float(added + one_layer[k]), rel=1e-9)
    assert float(mtp.head["gemm"]) == pytest.approx(float(plain.head["gemm"]))  # the first stage is untouched
    # the extra output layer alone: the logits GEMM of 4,096 tokens x 129,280 / 2 x 7,168, forward and two backward
    assert float(sum(extra[ph]["gemm"] for ph in "FBW")) > float(one_layer["gemm"])
    # ends in the split: the last of the 32 stages holds no layer, so its tail is one full layer lighter than even
    ends = step_time.stage_costs(_setting(m, ends_in_split=True), lay)
    assert float(mtp.tail["gemm"] - ends.tail["gemm"]) == pytest.approx(2 * float(one_layer["gemm"]), rel=1e-9)
    assert float(mtp.head["gemm"] - ends.head["gemm"]) == pytest.approx(float(one_layer["gemm"]), rel=1e-9)
    assert float(ends.factors(4)[0]) < 1.0 < float(ends.factors(4)[1])


def test_the_last_stage_holds_the_prediction_depth_and_an_embedding_copy():
    m = presets.model("deepseek-v3")
    mm, plain = per_gpu.ModelMemory.of(m), per_gpu.ModelMemory.of(replace(m, mtp_layers=0))
    dense = counts.mtp_params(m)["dense"]
    assert mm.mtp_dense == pytest.approx(dense) and plain.mtp_dense == 0.0
    for p, copy in ((8, m.vocab * m.hidden), (1, 0.0)):  # untied: the last stage builds its own embedding
        with_mtp, _ = per_gpu.dense_split(mm, 2, p)
        without, _ = per_gpu.dense_split(plain, 2, p)
        assert float(with_mtp - without) == pytest.approx((dense + copy) / 2)
    # routed experts: the last stage's leftover layers plus the depth, when that beats the fullest stage
    assert float(experts.moe_layers_on_fullest(m, 16, 1)) == 4.0   # 61 - 15 x 4 = 1 layer + MTP = 2 < 4
    assert float(experts.moe_layers_on_fullest(m, 61, 1)) == 2.0   # one layer per stage, the last also the MTP
    assert float(experts.moe_layers_on_fullest(m, 61, 0)) == 1.0


def test_megatron_export_emits_the_depth_and_the_layout():
    h100 = presets.gpu("h100-80gb")
    base = Layout(model=presets.model("deepseek-v3"), gpu=h100, t=2, p=8, d=64, ep=64, etp=1, global_batch=8192,
                  schedule="interleaved", v=4, sequence_parallel=True)
    args, notes = megatron_args(replace(base, ends_in_split=True))
    assert args[args.index("--mtp-num-layers") + 1] == "1"
    assert args[args.index("--pipeline-model-parallel-layout") + 1] == "Et|(tt|)*30mL"
    args, _ = megatron_args(base)
    assert "--pipeline-model-parallel-layout" not in args and "--mtp-num-layers" in args
    llama = Layout(model=presets.model("llama3-405b"), gpu=h100, t=8, p=16, d=64, global_batch=2048,
                   ends_in_split=True)
    args, _ = megatron_args(llama)
    assert "--account-for-loss-in-pipeline-split" in args and "--mtp-num-layers" not in args


def test_inputs_take_mtp_layers_and_ends_in_split_with_their_ranges():
    q = PlannerParams.from_strings({"model": "custom", "mlp": "swiglu", "mtp_layers": "2", "ends_in_split": "true"})
    assert q.mtp_layers == 2 and q.ends_in_split is True
    assert PlannerParams.from_strings({"ends_in_split": "false"}).ends_in_split is False
    with pytest.raises(InputError, match="mtp_layers"):
        PlannerParams.from_strings({"model": "custom", "mtp_layers": "9"})
    with pytest.raises(InputError, match="ends_in_split"):
        PlannerParams.from_strings({"ends_in_split": "maybe"})
    m = presets.custom_model({"mlp": "swiglu", "mtp_layers": 1})
    assert m.mtp_layers == 1 and counts.mtp_params(m)["total"] > 0
    assert np.isfinite(counts.mtp_params(m)["dense"])
