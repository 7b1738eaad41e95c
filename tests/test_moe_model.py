"""Mixture-of-experts and MLA parameter counts against the published totals, and presets at another length.

Sources: Mistral AI, 'Mixtral of experts' (Dec 2023): 46.7B total, 12.9B per token; Mistral AI, 'Cheaper,
Better, Faster, Stronger' (Apr 2024): Mixtral 8x22B 141B total, 39B active; DeepSeek-AI, 'DeepSeek-V3 Technical
Report', arXiv:2412.19437: 671B total, 37B activated per token. MLA's count is Megatron-LM's
theoretical_memory_usage.py formula.
"""

import json

import pytest

from core.cli import main
from core.errors import InputError
from core.model import counts, presets
from core.model.blocks import MoeConfig
from core.params.planner import PlannerParams
from core.planner.candidates import resolve


def test_mixtral_8x7b_is_46_7b_total_12_9b_active():
    parts = counts.breakdown(presets.model("mixtral-8x7b"))
    assert parts["total"] == 46_702_792_704  # 32 x (attention 41.9M + 8 experts x 176.2M + router + norms) + 2 V h
    assert parts["active"] == 12_879_925_248  # 2 of 8 experts per layer
    assert round(parts["total"] / 1e9, 1) == 46.7 and round(parts["active"] / 1e9, 1) == 12.9


def test_deepseek_v3_is_671b_total_37b_active():
    m = presets.model("deepseek-v3")
    parts = counts.breakdown(m)
    assert round(parts["total"] / 1e9) == 671
    # 37.55B with both embeddings (Mixtral's convention above), 36.6B without the input embedding: "37B".
    assert parts["active"] / 1e9 == pytest.approx(37.55, abs=0.01)
    assert (parts["active"] - m.vocab * m.hidden) / 1e9 == pytest.approx(36.6, abs=0.05)
    assert m.moe_layers == 58 and m.layers - m.moe_layers == 3  # first_k_dense_replace = 3


def test_mixtral_8x22b_is_141b_total_39b_active():
    parts = counts.breakdown(presets.model("mixtral-8x22b"))
    assert round(parts["total"] / 1e9) == 141 and round(parts["active"] / 1e9) == 39


def test_mla_attention_count_is_megatrons():
    # q: 1536 (7168 + 128 x 192 + 1); kv: 512 (7168 + 128 x 256 + 1) + 7168 x 64; out: 128 x 128 x 7168
    m = presets.model("deepseek-v3")
    assert counts.attention_params(m) == 1536 * (7168 + 128 * 192 + 1) + 512 * (7168 + 128 * 256 + 1) \
        + 7168 * 64 + 128 * 128 * 7168 == 187_107_328
    assert counts.attention_core_width(m) == 128 * (192 + 128) / 2


def test_dense_models_are_unchanged_and_active_equals_total():
    for key in ("gpt3-175b", "llama3-405b", "bloom-176b"):
        m = presets.model(key)
        parts = counts.breakdown(m)
        old = counts.arch_params(counts.Architecture.of(m))
        assert parts["total"] == pytest.approx(float(old), rel=1e-12)
        assert parts["active"] == parts["total"] and parts["experts"] == 0
        assert counts.matmul_params_per_layer(m) == pytest.approx(
            float(counts.layer_matmul_params(m.hidden, m.heads, m.kv_heads, m.ffn, m.swiglu)), rel=1e-12)


def test_expert_and_dense_parts_add_up_to_the_count_in_use():
    m = presets.model("deepseek-v3")
    assert m.expert_params + m.dense_params == pytest.approx(m.params)
    assert m.params == 671e9 and m.expert_params / m.params == pytest.approx(653.91 / 671.03, rel=1e-4)


def test_moe_layer_pattern_follows_megatrons_layer_freq():
    assert MoeConfig(8, 2).layer_counts(32) == (0, 32)
    assert MoeConfig(256, 8, first_dense=3).layer_counts(61) == (3, 58)
    assert MoeConfig(128, 1, every=2).layer_counts(48) == (24, 24)  # Llama 4 Maverick's interleaving
    with pytest.raises(InputError):
        MoeConfig(8, 9)


def test_custom_moe_model_from_cli_values():
    m = presets.custom_model({"layers": "32", "hidden": "4096", "heads": "32", "kv_heads": "8", "ffn": "14336",
                              "vocab": "32000", "mlp": "swiglu", "tied": "false", "experts": "8", "top_k": "2"})
    assert counts.breakdown(m)["total"] == 46_702_792_704
    with pytest.raises(InputError, match="top_k"):
        presets.custom_model({"experts": "4", "top_k": "8"})


def test_a_preset_at_another_sequence_length():
    m = presets.chosen_model("llama3-405b", seq=131072)
    assert m.seq == 131072 and m.layers == 126 and m.params == presets.model("llama3-405b").params
    assert presets.chosen_model("llama3-405b").seq == 8192
    q, notices = PlannerParams.from_url({"model": "llama3-405b", "seq": "131072"})
    assert notices == [] and resolve(q)[0].seq == 131072
    assert resolve(PlannerParams(model="custom"))[0].seq == 2048  # 0 = the custom default


def test_llama3_128k_layout_is_recorded_with_its_cp():
    long = presets.model("llama3-405b").layouts[1]
    assert (long.t, long.cp, long.p, long.d, long.gpus, long.seq) == (8, 16, 16, 8, 16384, 131072)


def test_model_cli_prints_total_and_active(capsys):
    assert main(["model", "--model", "mixtral-8x7b", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["params_architecture"] == 46_702_792_704 and info["params_active_architecture"] == 12_879_925_248
    assert info["params_total"] == 46.7e9 and info["moe"]["experts"] == 8
    assert main(["model", "--model", "deepseek-v3"]) == 0
    text = capsys.readouterr().out
    assert "params_active" in text and "37.55B" in text and "671.03B" in text
    assert main(["model", "--model", "llama3-405b", "--seq", "131072", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["seq"] == 131072
    assert main(["model", "--model", "llama3-405b", "--layers", "4"]) == 2
    assert "not both" in capsys.readouterr().err
