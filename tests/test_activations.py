"""Activation memory (Korthikanti et al. 2022) checked against an independent tensor-by-tensor count."""

import itertools

import numpy as np
import pytest

from core.errors import InputError
from core.memory import activations as act

# Section 4.1 of the paper, bytes per layer per micro-batch in units of s*b*h (16-bit values, 1-byte masks):
# (name, coefficient, kind): "rep" = held whole on every tensor-parallel rank unless sequence parallel,
# "tp" = split by tensor parallelism; the attention-core terms are coefficients of a*s^2*b, split by t.
TENSORS = [
    ("qkv input (after layer norm)", 2, "rep"), ("Q and K", 4, "tp"), ("V", 2, "tp"),
    ("attention projection input", 2, "tp"), ("attention dropout mask", 1, "rep"),
    ("MLP input", 2, "rep"), ("GeLU input", 8, "tp"), ("second linear input", 8, "tp"),
    ("MLP dropout mask", 1, "rep"), ("two layer-norm inputs", 4, "rep"),
]
CORE = [("softmax output", 2), ("softmax dropout mask", 1), ("dropout output", 2)]  # x a s^2 b


def by_hand(s, b, h, a, t, sp, recompute):
    sbh = s * b * h
    if recompute == "full":
        return 2 * sbh / (t if sp else 1)
    total = sum(c * sbh / (t if (kind == "tp" or sp) else 1) for _, c, kind in TENSORS)
    if recompute == "none":
        total += sum(c for _, c in CORE) * a * s * s * b / t
    return total


GRID = list(itertools.product((512, 2048, 8192), (1, 4), (4096, 12288), (32, 96), (1, 2, 8)))


@pytest.mark.parametrize("s,b,h,a,t", GRID)
def test_every_mode_matches_the_tensor_count(s, b, h, a, t):
    for sp, recompute in itertools.product((False, True), ("none", "selective", "full")):
        got = float(act.per_layer_bytes(s, b, h, a, t, sp, recompute))
        assert got == pytest.approx(by_hand(s, b, h, a, t, sp, recompute), rel=1e-12), (sp, recompute)


@pytest.mark.parametrize("s,b,h,a,t", GRID)
def test_closed_forms_of_table2(s, b, h, a, t):
    sbh = s * b * h
    f = lambda sp, rc: float(act.per_layer_bytes(s, b, h, a, t, sp, rc))
    assert float(act.per_layer_bytes(s, b, h, a, 1)) == pytest.approx(sbh * (34 + 5 * a * s / h))
    assert f(False, "none") == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert f(True, "none") == pytest.approx(sbh / t * (34 + 5 * a * s / h))
    assert f(False, "selective") == pytest.approx(sbh * (10 + 24 / t))
    assert f(True, "selective") == pytest.approx(34 * sbh / t)
    assert f(False, "full") == pytest.approx(2 * sbh)
    assert f(True, "full") == pytest.approx(2 * sbh / t)
    for sp in (False, True):
        assert f(sp, "full") < f(sp, "selective") < f(sp, "none")


def test_gpt3_attention_term_is_80_against_34():
    s, h, a = 2048, 12288, 96
    assert 5 * a * s / h == 80
    assert float(act.per_layer_bytes(s, 1, h, a)) == s * h * (34 + 80)


def test_vectorised_modes_match_scalar_calls():
    modes = np.array([0, 1, 2, 0])
    sp = np.array([False, True, False, True])
    got = act.per_layer_bytes(2048, 2, 8192, 64, 4, sp, modes)
    names = ("none", "selective", "full")
    for i in range(4):
        assert got[i] == act.per_layer_bytes(2048, 2, 8192, 64, 4, bool(sp[i]), names[modes[i]])
    np.testing.assert_array_equal(act.per_layer_bytes(2048, 2, 8192, 64, 4, False, np.array(["none", "full"])),
                                  act.per_layer_bytes(2048, 2, 8192, 64, 4, False, np.array([0, 2])))


def test_stage_scales_with_layers_and_inflight_and_adds_end_terms():
    s, b, h, a, t, V = 2048, 1, 12288, 96, 8, 51200
    per = float(act.per_layer_bytes(s, b, h, a, t, True, "selective"))
    shape = act.Shape(s, b, h, a, t, True, "selective", V)
    first = act.stage_bytes(shape, 12, 8, first=True, last=False)
    assert float(first["layers"]) == pytest.approx(per * 12 * 8)
    assert float(first["embedding"]) == pytest.approx(s * b * h / t * 8)
    assert float(first["output"]) == 0.0
    last = act.stage_bytes(shape, 12, 1, first=False, last=True)
    assert float(last["output"]) == pytest.approx(4 * s * b * h / t * (1 + V / h))  # the paper's 4sbh/t (1 + v/h)
    none = float(act.per_layer_bytes(s, b, h, a, t, True, "none"))
    assert float(first["recompute_buffer"]) == pytest.approx(none - per)  # one layer rebuilt in backward
    assert float(first["total"]) == pytest.approx(sum(float(first[k]) for k in
                                                      ("layers", "embedding", "output", "recompute_buffer")))


def test_no_vocab_means_no_output_term_and_p1_stage_carries_both_ends():
    r = act.report(act.Shape(2048, 1, 4096, 32, vocab=0), 32, 1, 1)
    assert r["last_stage"] is None and r["first_stage"]["output"] == 0.0
    r = act.report(act.Shape(2048, 1, 4096, 32, vocab=50257), 32, 1, 1)
    assert r["first_stage"]["output"] > 0 and r["first_stage"]["embedding"] > 0


def test_report_for_a_pipeline_uses_ceil_layers_per_stage_and_the_given_inflight():
    r = act.report(act.Shape(2048, 1, 12288, 96, 8, True, "selective", 51200), 96, 7, 7)
    assert r["layers_per_stage"] == 14 and r["inflight"] == 7
    assert r["peak"] == max(r["first_stage"]["total"], r["last_stage"]["total"])
    assert r["modes"]["tensor + sequence parallel + selective recompute"] == pytest.approx(34 * 2048 * 12288 / 8)


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        ({"seq": 0}, "out of range"),
        ({"heads": float("nan")}, "finite"),
        ({"t": 0}, "out of range"),
        ({"hidden": -1}, "out of range"),
        ({"micro_batch_size": 1.5}, "whole number"),
        ({"recompute": "some"}, "not allowed"),
        ({"seq": 1 << 30}, "out of range"),
    ],
)
def test_hostile_inputs(kwargs, needle):
    args = {"seq": 2048, "micro_batch_size": 1, "hidden": 4096, "heads": 32, "t": 1, "recompute": "none"} | kwargs
    with pytest.raises(InputError, match=needle):
        act.per_layer_bytes(**args)


def test_negative_inflight_is_rejected():
    with pytest.raises(InputError, match="inflight"):
        act.stage_bytes(act.Shape(2048, 1, 4096, 32), 4, -1)


def test_flash_attention_keeps_no_scores_in_any_mode_nor_in_the_layer_rebuilt():
    # Fused attention (FlashAttention) never stores the a s^2 scores: "none" keeps what "selective" keeps, and the
    # one layer recomputation rebuilds carries none either (the planner's and the ZeRO page's accounting).
    s, b, h, a, t = 8192, 1, 8192, 64, 8
    flash = act.Shape(s, b, h, a, t, True, "none", flash=True)
    assert float(flash.per_layer()) == float(act.per_layer_bytes(s, b, h, a, t, True, "selective"))
    assert float(act.stage_bytes(flash, 10, 4)["recompute_buffer"]) == 0.0
    full = act.Shape(s, b, h, a, t, True, "full", flash=True)
    rebuilt = float(act.stage_bytes(full, 10, 4)["recompute_buffer"])
    assert rebuilt == pytest.approx(float(act.per_layer_bytes(s, b, h, a, t, True, "selective")
                                          - act.per_layer_bytes(s, b, h, a, t, True, "full")))
    unfused = act.Shape(s, b, h, a, t, True, "none")
    assert float(unfused.per_layer() - flash.per_layer()) == 5 * a * s * s * b / t


def test_megatron_mla_layer_keeps_its_latents_and_wider_query_key():
    """Multi-head latent attention in Megatron-Core's accounting, counted by hand for Moonlight's widths (h 2048,
    16 heads, kv latent 512, qk 128 + rope 64, v 128) with a dense SwiGLU of 11264: the latent's fused norm keeps
    its input, rsigma and GEMM input; query and key are heads x 192, value and output heads x 128; selective
    recompute (mla_up_proj) drops query, key, value and the softmax statistics."""
    h, a, lat, qk, rope, v, f, s, b = 2048, 16, 512, 128, 64, 128, 11264, 4096, 1
    shape = act.Shape(s, b, h, a, flash=True, ffn=f, mlp="swiglu", norm="rmsnorm", dropout=False,
                              rope=True, accounting="megatron", mla=(lat, 0, qk, rope, v))
    norms = 2 * (2 * h + 4 + 2 * h)  # attention and MLP: input, rsigma, GEMM input
    latent = 2 * lat + 4 + 2 * lat
    qkv = 2 * a * (qk + rope) * 2 + 2 * a * v
    by_token = norms + latent + qkv + 2 * a * v + 4 * a + 4 * f + 2 * f
    assert float(shape.per_layer()) == s * b * by_token
    assert float(shape.per_layer("selective")) == s * b * (by_token - qkv - 4 * a)


def test_megatron_qk_layernorm_keeps_each_norms_contiguous_input_and_statistics():
    """--qk-layernorm (TENorm on q and k over the head size): each keeps its input made contiguous (bf16) and fp32
    statistics per head (mean and rsigma for LayerNorm, rsigma for RMSNorm), under no and selective recompute; a
    key/value head stays whole on a rank (4 kv heads at t = 8: one each)."""
    h, a, kv, d, f, s, b, t = 4096, 64, 4, 128, 12288, 4096, 1, 8
    for norm, stats in (("rmsnorm", 4), ("layernorm", 8)):
        base = dict(flash=True, kv_heads=kv, ffn=f, mlp="swiglu", norm=norm, dropout=False, rope=True, t=t,
                    sequence_parallel=True, attn_width=a * d, accounting="megatron")
        plain, qk = (act.Shape(s, b, h, a, qk_norm=on, **base) for on in (False, True))
        extra = s * b * (2 * a * d / t + 2 * d * 1 + stats * a / t + stats * 1)
        for mode in ("none", "selective"):
            assert float(qk.per_layer(mode)) - float(plain.per_layer(mode)) == extra
        assert float(qk.per_layer("full")) == float(plain.per_layer("full"))


def test_torchtitan_per_op_policy_counts_on_from_mla_query_latent():
    """torchtitan's per-op policy saves every other matmul's output, counted from the layer's first: after plain
    attention's four (or MLA's without a query latent) a SwiGLU keeps w1's and w2's outputs; after MLA's five (wq_a,
    wq_b, wkv_a, wkv_b, wo) it keeps w3's instead, and wq_a's, wkv_a's and wo's outputs in the attention."""
    from core.frameworks import pytorch
    from core.frameworks.records import Arch

    def selective(q_lora: bool) -> set[str]:
        arch = Arch(norm="rmsnorm", mlp="swiglu", flash=True, rope=True, dropout=False, mla=True, q_lora=q_lora)
        return {k.name for k in pytorch.eager_block(arch) if "selective" in k.modes}

    plain, latent = selective(False), selective(True)
    assert {"w1 output (silu input)", "w2 output (per-op policy)", "wq output (per-op policy)"} <= plain
    assert "w3 output" not in plain
    assert {"w3 output", "wq_a output (per-op policy)", "wkv_a output (per-op policy)",
            "wo output (per-op policy)"} <= latent
    assert not {"w1 output (silu input)", "w2 output (per-op policy)", "wq output (per-op policy)"} & latent


def test_megatron_recompute_modules_drop_what_each_module_re_runs():
    """--recompute-modules (transformer_config.py) under selective recompute, Megatron-Core with TE, t = 1: layernorm
    drops a MoE layer's pre-MLP norm output (its own TENorm; a dense layer's norm is fused into fc1), moe_act the
    routed experts' activation output (fc1's output stays: the activation is rebuilt from it), moe everything of
    the layer but its input, mlp a dense layer's MLP but its input, shared_experts the shared experts' tensors."""
    h, a, f, fe, k, s, b = 1024, 8, 4096, 512, 4, 256, 2
    base = dict(flash=True, ffn=f, mlp="swiglu", norm="rmsnorm", dropout=False, rope=True, accounting="megatron")
    moe = dict(base, routed=float(k), expert_ffn=float(fe), shared_ffn=float(fe), experts=16.0, moe_layer=True)

    def per_token(modules, **kw):
        return float(act.Shape(s, b, h, a, recompute_modules=modules, **kw).per_layer("selective")) / (s * b)

    core = per_token(("core_attn",), **moe)
    assert core - per_token(("core_attn", "layernorm"), **moe) == 2 * h  # the norm output, bf16
    assert core - per_token(("core_attn", "moe_act"), **moe) == 2 * k * fe  # the routed SwiGLU's product
    assert core - per_token(("core_attn", "shared_experts"), **moe) == (4 + 2) * fe  # fc1 output and fc2 input
    routed = 7 * 16 + 22 * k + 2 * k * h + (4 + 2) * k * fe  # router, indices, dispatched tokens, experts
    assert core - per_token(("core_attn", "moe"), **moe) == routed + (4 + 2) * fe
    assert per_token(("core_attn", "layernorm"), **base) == per_token(("core_attn",), **base)  # fused: no module
    assert per_token(("core_attn",), **base) - per_token(("core_attn", "mlp"), **base) == 4 + 2 * h + 6 * f
    # the planner's default adds mla_up_proj, which only an MLA model has
    assert per_token(("core_attn",), **moe) == float(act.Shape(s, b, h, a, **moe).per_layer("selective")) / (s * b)
