"""Sliding-window attention (GPT-OSS, Gemma 2 / 3, Mistral 7B v0.1): the window and the share of layers that use it
scale the score work (FLOPs and a fused kernel's time) and nothing else; the importers read it and the Megatron-LM
export writes it."""

import json

import numpy as np
import pytest

from core.configs.check import check
from core.cost import flops
from core.model import presets
from core.model.counts import score_share, window_ratio
from core.params.planner import PlannerParams
from core.planner import plan as planner

GPT_OSS_20B = {"layers": 24, "hidden": 2880, "heads": 64, "kv_heads": 8, "head_dim": 64, "ffn": 2880,
               "vocab": 201088, "seq": 4096, "mlp": "swiglu", "tied": False, "experts": 32, "top_k": 4,
               "expert_ffn": 2880}


def test_the_score_work_of_a_windowed_layer():
    # s queries see min(i, w) keys: s w - w^2 / 2 against s^2 / 2; a window covering the sequence changes nothing
    assert window_ratio(4096, 128) == pytest.approx((4096 * 128 - 128 ** 2 / 2) / (4096 ** 2 / 2))
    assert window_ratio(4096, 8192) == 1.0 and window_ratio(4096, 0) == 1.0
    model = presets.custom_model({**GPT_OSS_20B, "window": 128, "window_share": 0.5})
    assert score_share(model) == pytest.approx(0.5 + 0.5 * window_ratio(4096, 128))
    full = presets.custom_model(GPT_OSS_20B)
    assert score_share(full) == 1.0
    # FLOPs: only the score term moves (4 s x width x share per token and layer, forward), by exactly that share
    diff = flops.training_flops(full, 1) - flops.training_flops(model, 1)
    per_token = 3 * 4.0 * 4096 * 64 * 64 * (1 - score_share(model)) * 24
    assert diff == pytest.approx(per_token * 4096, rel=1e-9)


def test_a_fused_kernel_runs_faster_an_eager_one_does_not():
    base = dict(model="custom", **{k: v for k, v in GPT_OSS_20B.items()}, gpu="h100-80gb", gpus=8, batch=64,
                fix_t=1, fix_p=1, fix_ep=8, zero="3", mb_sizes=(1.0,), recompute="full", optimizer_dtype="pure-bf16")
    got = {}
    for flash in ("true", "false"):
        for window in (0, 128):
            row = planner.plan(PlannerParams(**base, flash=flash, window=window, window_share=0.5)).best()
            got[flash, window] = (row["attention_s"], row["memory_bytes"])
    assert got["true", 128][0] < 0.75 * got["true", 0][0]  # half the layers sweep 128 keys, not 4,096
    assert got["true", 128][1] == got["true", 0][1]  # no weights, no activations
    assert got["false", 128] == got["false", 0]  # an eager attention computes the s x s scores and masks them


@pytest.mark.parametrize("config, window, share", [
    ({"model_type": "gpt_oss", "sliding_window": 128,
      "layer_types": ["sliding_attention", "full_attention"] * 12}, 128, 0.5),
    ({"model_type": "gemma2", "sliding_window": 4096}, 4096, 0.5),
    ({"model_type": "gemma3_text", "sliding_window": 1024, "sliding_window_pattern": 6}, 1024, 5 / 6),
    ({"model_type": "mistral", "sliding_window": 4096}, 4096, 1.0),
    ({"model_type": "qwen3", "sliding_window": 32768, "use_sliding_window": False}, None, None),
])
def test_hugging_face_configs_say_their_windows(config, window, share):
    shape = {"num_hidden_layers": 24, "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 8,
             "intermediate_size": 8192, "vocab_size": 32000}
    raw = check([("config.json", json.dumps({**shape, **config}))], {"gpus": "8"}).reading.raw
    if window is None:
        assert "window" not in raw
    else:
        assert (int(raw["window"]), float(raw["window_share"])) == (window, pytest.approx(share, abs=1e-6))


def test_megatron_flags_read_and_write_the_window():
    script = ("torchrun pretrain_gpt.py --num-layers 24 --hidden-size 2880 --num-attention-heads 64 --kv-channels 64 "
              "--group-query-attention --num-query-groups 8 --ffn-hidden-size 2880 --swiglu --seq-length 4096 "
              "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 64 --bf16 "
              "--window-size 128,0 --window-attn-skip-freq 2 --vocab-size 201088")
    raw = check([("run.sh", script)], {"gpus": "8"}).reading.raw
    assert (raw["window"], raw["window_share"]) == ("128", "0.5")
    q = PlannerParams(model="custom", **GPT_OSS_20B, window=1024, window_share=5 / 6, gpu="h100-80gb", gpus=8,
                      batch=64, fix_t=1, fix_p=1, fix_ep=8, zero="1", mb_sizes=(1.0,), recompute="full")
    text = planner.plan(q).export("megatron").text
    assert "--window-size 1024,0" in text and "--window-attn-skip-freq 6" in " ".join(text.split())
    assert np.isclose(float(check([("x.sh", text)], {}).reading.raw["window_share"]), 5 / 6, atol=1e-6)
