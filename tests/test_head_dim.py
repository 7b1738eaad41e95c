"""A head size decoupled from hidden / heads (Megatron-LM --kv-channels, Hugging Face head_dim): Qwen3's published
counts, one layer's FLOPs and activations by hand, the exports, the bad-input messages, and every older preset's
numbers exactly as before the change (tests/data/presets_before_head_dim.json, written by `numbers` at 55cf5c8)."""

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from core.cost import flops, layer_ops
from core.errors import InputError
from core.memory import activations as act
from core.memory.context_parallel import kv_chunk_bytes
from core.memory.per_gpu import ModelMemory
from core.model import counts, presets
from core.params.planner import PlannerParams
from core.planner import validation
from core.planner.export_megatron import megatron_args
from core.planner.layout import Layout

BEFORE = Path(__file__).parent / "data" / "presets_before_head_dim.json"


def numbers(m) -> dict[str, float]:
    """Counts, FLOPs, activation and ring-buffer bytes of one model through APIs that predate head_dim."""
    row = {f"count_{k}": v for k, v in counts.breakdown(m).items()}
    row |= {"matmul_per_layer": counts.matmul_params_per_layer(m), "core_width": counts.attention_core_width(m),
            "largest_layer": counts.largest_layer_params(m), "attention_params": counts.attention_params(m)}
    for r in ("none", "selective", "full"):
        row[f"flops_{r}"] = float(flops.training_flops(m, 1, r))
    row["model_flops"] = float(flops.model_flops(m, 1))
    row["palm_flops"] = float(flops.convention_flops(m, 1, "palm"))
    mm = ModelMemory.of(m)
    row["mm_dense"], row["mm_layer"] = mm.dense_params, mm.layer_params
    for t in (1, 8):
        for sp in (False, True):
            for rc in ("none", "selective", "full"):
                for fp8 in (False, True):
                    s = act.Shape(m.seq, 1, m.hidden, m.heads, t, sp, rc, m.vocab, 1, fp8, m.flash_attention,
                                  m.parallel_block)
                    row[f"act_{t}_{sp}_{rc}_{fp8}"] = float(s.per_layer())
    row["kv_chunk"] = float(kv_chunk_bytes(m.seq, 1, m.hidden, m.heads, m.kv_heads, 2, 4))
    return row


@pytest.mark.parametrize("key", sorted(json.loads(BEFORE.read_text())))
def test_every_older_preset_counts_flops_and_memory_as_before(key):
    before = json.loads(BEFORE.read_text())[key]
    m = presets.model(key)
    assert not m.decoupled_heads and m.kv_channels == 0 and m.head_dim == m.hidden // m.heads
    assert numbers(m) == pytest.approx(before, rel=1e-12)


# Qwen3 model cards (Hugging Face): total, non-embedding, active; the architecture count to the parameter, with the
# q and k norms (2 x 128 weights per layer, within the cards' rounding).
QWEN3 = {
    "qwen3-32b": (32.8e9, 31.2e9, None, 32_762_106_880 + 64 * 256),
    "qwen3-30b-a3b": (30.5e9, 29.9e9, 3.3e9, 30_532_110_336 + 48 * 256),
    "qwen3-235b-a22b": (235e9, 234e9, 22e9, 235_093_610_496 + 94 * 256),
}


@pytest.mark.parametrize("key", sorted(QWEN3))
def test_qwen3_counts_match_the_published_totals(key):
    total, non_embedding, active, exact = QWEN3[key]
    m = presets.model(key)
    parts = counts.breakdown(m)
    assert m.head_dim == 128 and m.decoupled_heads and m.attention_width == m.heads * 128
    assert parts["total"] == exact
    assert parts["total"] == pytest.approx(total, rel=2e-3)  # the cards round to 0.1B (235B: to 1B)
    assert parts["total"] - parts["embedding"] == pytest.approx(non_embedding, rel=2e-3)
    if active:  # 3.35B and 22.19B: the cards' 3.3B and 22B, rounded down
        assert parts["active"] == pytest.approx(active, rel=2e-2) and parts["active"] > active
    assert m.params == total


def test_qwen3_30b_a3b_attention_by_hand():
    m = presets.model("qwen3-30b-a3b")
    # Q 2048 x 4096, K and V 2048 x 512 each, O 4096 x 2048 (hidden / heads = 64 would give 2048 x 2048 and 2 x 256)
    assert counts.attention_params(m) == 2048 * 4096 * 2 + 2 * 2048 * 512 == 18_874_368
    assert counts.attention_core_width(m) == 4096
    assert counts.layer_matmul_params(2048, 32, 4, 768, True, head_dim=128) == 18_874_368 + 3 * 2048 * 768


def _custom(**kw):
    base = {"layers": 2, "hidden": 1024, "heads": 16, "kv_heads": 4, "head_dim": 128, "ffn": 4096, "vocab": 1000,
            "mlp": "swiglu", "seq": 2048}
    return presets.custom_model({**base, **kw})


def test_one_layers_flops_by_hand_for_a_decoupled_head_size():
    m = _custom()
    h, a, kv, d, f, s = 1024, 16, 4, 128, 4096, 2048
    weights = h * a * d * 2 + 2 * h * kv * d + 3 * h * f  # Q, O; K, V; SwiGLU
    assert weights == 4_194_304 + 1_048_576 + 12_582_912
    forward = 2 * weights + 4 * s * a * d * 0.5  # causal half of the QK^T and softmax x V work
    assert float(flops.layer_flops(m, 1, "none", 0.5)) == s * 3 * forward == 270_582_939_648
    # the per-operation model multiplies the same shapes: (qk head, v head, QKV width, O input width)
    assert layer_ops._attention_shape(m) == (128.0, 128.0, 2048.0 + 1024.0, 2048.0)
    coupled = replace(m, kv_channels=0)  # hidden / heads = 64: half the attention width
    assert coupled.head_dim == 64 and counts.attention_core_width(coupled) == 1024


def test_activations_and_ring_buffers_follow_the_attention_width():
    m = _custom()
    s, b, h, w = 2048, 1, 1024, 2048
    mem = ModelMemory.of(m)
    assert (mem.head_dim, mem.attn_width) == (128, w)
    shape = act.Shape(s, b, h, m.heads, 1, False, "selective", attn_width=w)
    # 10 replicated + (16 + 8 w / h) sharded s b h: Q, K, V and the projection input are w wide
    assert float(shape.per_layer()) == s * b * h * (10 + 16 + 8 * 2) == 88_080_384
    fp8 = act.Shape(s, b, h, m.heads, 1, False, "selective", fp8=True, attn_width=w)
    assert float(fp8.per_layer()) == s * b * h * (8 + 12 + 7 * 2)
    # K and V of 4 heads of 128 for s / cp tokens, 2 bytes each
    assert float(kv_chunk_bytes(s, b, h, m.heads, m.kv_heads, 1, 2, head_dim=128)) == 2 * 1024 * 4 * 128 * 2


def test_replace_never_carries_a_stale_head_size():
    shrunk = replace(presets.model("llama3-8b"), hidden=64, heads=8, kv_heads=2)
    assert shrunk.head_dim == 8 and not shrunk.decoupled_heads


def test_megatron_export_names_kv_channels_only_when_decoupled():
    h100 = presets.gpu("h100-80gb")
    qwen = Layout(model=presets.model("qwen3-32b"), gpu=h100, t=8, p=1, d=1, global_batch=8)
    args, _ = megatron_args(qwen)
    assert args[args.index("--kv-channels") + 1] == "128"
    assert args[args.index("--num-attention-heads") + 1] == "64" and args[args.index("--hidden-size") + 1] == "5120"
    llama, _ = megatron_args(replace(qwen, model=presets.model("llama3-8b")))
    assert "--kv-channels" not in llama


@pytest.mark.parametrize(("fields", "message"), [
    ({"head_dim": 127}, "head_dim 127: rotary position embeddings rotate channel pairs, so the head size must be even"),
    ({"head_dim": 2000}, "head_dim: 2000 is out of range; allowed 0 to 1,024"),
    ({"head_dim": -1}, "head_dim: -1 is out of range; allowed 0 to 1,024"),
    ({"head_dim": "wide"}, "head_dim: 'wide' is not valid"),
    ({"heads": 256, "head_dim": 1024}, "heads x head_dim = 256 x 1024 = 262,144: the attention width may be at most"),
    ({"heads": 24, "head_dim": 0}, "hidden 1024 must be divisible by heads 24 (hidden / heads is the head size): set "
                                   "heads to 8 (head size 128), leave heads at 0 to derive it, or give head_dim"),
])
def test_bad_head_sizes_are_refused_with_the_rule(fields, message):
    with pytest.raises(InputError, match=re.escape(message)):
        _custom(**fields)


def test_an_odd_head_size_is_allowed_without_rotary_positions():
    m = _custom(mlp="gelu", head_dim=45)  # GPT block: learned positions, nothing rotates
    assert m.head_dim == 45 and counts.attention_core_width(m) == 16 * 45


def test_heads_zero_derives_them_from_the_given_head_size():
    m = _custom(heads=0, kv_heads=0, head_dim=64)
    assert (m.heads, m.kv_heads, m.head_dim) == (16, 16, 64) and not m.decoupled_heads


def test_planner_url_takes_head_dim():
    q = PlannerParams.from_strings({"model": "custom", "layers": "48", "hidden": "2048", "heads": "32",
                                    "kv_heads": "4", "head_dim": "128", "mlp": "swiglu"})
    assert q.head_dim == 128
    with pytest.raises(InputError, match="head_dim"):
        PlannerParams.from_strings({"model": "custom", "head_dim": "1e9"})


def test_the_megatron_bridge_qwen3_rows_are_held_out_predictions():
    rows = {r["key"]: r for r in validation.data()["rows"]}
    for key in ("mb260401-qwen3_30b_a3b-16", "mb260401-qwen3_235b_a22b-256"):
        row = rows[key]
        assert row["role"] == "held-out" and "unmatched" not in row and row["model"]["head_dim"] == 128
        out = validation.step_row(row)
        assert out["fits"] and out["predicted_s"] > 0 and out["predicted_value"] > 0
