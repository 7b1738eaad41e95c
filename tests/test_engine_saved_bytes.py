"""The bytes a real Hugging Face decoder layer saves for its backward are the ones core.frameworks lists for it.

A Llama layer of Hugging Face Transformers (the blocks DeepSpeed trains; core.frameworks.pytorch.hf_block) runs one
forward in pure bf16 under torch.autograd.graph.saved_tensors_hooks; every tensor autograd saves is counted once per
storage, parameters left out. The count must equal core.memory.activations' per-layer bytes for the same widths to
the byte: with SDPA (the flash kernel, K and V at their own width), and under full recompute (a non-reentrant
checkpoint keeps the layer input only). The rotary cos/sin tables are shared by every layer of a model and left out.
"""

from __future__ import annotations

import pytest

from core.memory import activations
from tests.engine_support import need
from tests.engines.saved_bytes import kept_bytes

LLAMA = dict(hidden=256, heads=8, kv_heads=2, ffn=688)  # grouped-query attention, 4 query heads per K/V head


def _layer(torch, transformers, family: str = "Llama"):
    """One decoder layer of `family` (Llama, or Qwen3: the same block with per-head q and k RMSNorms)."""
    cfg = getattr(transformers, f"{family}Config")(
        hidden_size=LLAMA["hidden"], num_attention_heads=LLAMA["heads"], num_key_value_heads=LLAMA["kv_heads"],
        intermediate_size=LLAMA["ffn"], vocab_size=512, num_hidden_layers=1, attention_dropout=0.0,
        tie_word_embeddings=False, attn_implementation="sdpa", head_dim=LLAMA["hidden"] // LLAMA["heads"])
    torch.manual_seed(0)
    model = getattr(transformers, f"{family}ForCausalLM")(cfg).to(torch.bfloat16).train()
    return model.model


def _saved(torch, inner, b: int, s: int, checkpoint: bool, hidden: int = LLAMA["hidden"]) -> int:
    """Bytes autograd keeps after one layer's forward, each storage once, parameters and rotary tables left out."""
    layer = inner.layers[0]
    skip = {p.untyped_storage().data_ptr() for p in inner.parameters()}
    leaf = torch.randn(b, s, hidden, dtype=torch.bfloat16, requires_grad=True)
    pos = torch.arange(s).unsqueeze(0)
    cos, sin = inner.rotary_emb(leaf, pos)
    skip |= {cos.untyped_storage().data_ptr(), sin.untyped_storage().data_ptr()}
    kw = dict(attention_mask=None, position_embeddings=(cos, sin), position_ids=pos)

    def forward():
        x = leaf.clone()  # the layer's input is a non-leaf, as the previous layer's output is
        if checkpoint:
            return torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False, **kw)
        return layer(x, **kw)

    got, out = kept_bytes(torch, forward, skip)
    (out[0] if isinstance(out, tuple) else out).float().sum().backward()  # the graph was a real one
    return got


def _modelled(b: int, s: int, recompute: str, qk_norm: bool = False) -> float:
    shape = activations.Shape(s, b, LLAMA["hidden"], LLAMA["heads"], recompute=recompute, flash=True,
                              kv_heads=LLAMA["kv_heads"], ffn=LLAMA["ffn"], mlp="swiglu", norm="rmsnorm",
                              dropout=False, rope=True, accounting="deepspeed", qk_norm=qk_norm)
    return float(shape.per_layer())


@pytest.mark.parametrize("b,s", [(1, 64), (2, 128)])
def test_a_llama_layer_saves_what_the_hugging_face_block_lists(b, s):
    torch, transformers = need("torch"), need("transformers")
    inner = _layer(torch, transformers)
    got = _saved(torch, inner, b, s, checkpoint=False)
    # 16 T h (two RMSNorms: fp32 input copy, bf16 normalised, GEMM input) + 4 T q (q, attention output) + 4 T kv
    # (k, v unrepeated) + 8 T f (SwiGLU's four) + 8 T (the norms' fp32 rsqrt) + 4 T heads (fp32 log-sum-exp)
    t, h, f = b * s, LLAMA["hidden"], LLAMA["ffn"]
    by_hand = 16 * t * h + 4 * t * h + 4 * t * (h // 4) + 8 * t * f + 8 * t + 4 * t * LLAMA["heads"]
    assert got == by_hand == _modelled(b, s, "none")


@pytest.mark.parametrize("widened", [False, True])
def test_pytorchs_attention_keeps_k_and_v_at_the_width_the_kernel_takes(widened, monkeypatch):
    """The PyTorch accounting's repeat_kv: with SDPA's enable_gqa the kernel keeps K and V at their own width (the
    layer as it runs); made to widen them first, as torchtitan's repeat_kv did until 2026-01-27 (transformers'
    repeat_kv before SDPA), it keeps the widened copies: 4 T (q - kv) bytes more, exactly as counted."""
    torch, transformers = need("torch"), need("transformers")
    from transformers.integrations import sdpa_attention
    if widened:
        monkeypatch.setattr(sdpa_attention, "use_gqa_in_sdpa", lambda *args, **kwargs: False)
    b, s = 2, 64
    got = _saved(torch, _layer(torch, transformers), b, s, checkpoint=False)
    shape = activations.Shape(s, b, LLAMA["hidden"], LLAMA["heads"], flash=True, kv_heads=LLAMA["kv_heads"],
                              ffn=LLAMA["ffn"], mlp="swiglu", norm="rmsnorm", dropout=False, rope=True,
                              accounting="torch", repeat_kv=widened)
    assert got == float(shape.per_layer())
    t = b * s
    assert got - _modelled(b, s, "none") == (4 * t * (LLAMA["hidden"] - LLAMA["hidden"] // 4) if widened else 0)


def test_a_qwen3_layer_keeps_its_qk_norms_inputs_and_statistics():
    # Qwen3 is Llama's block plus q_norm and k_norm (RMSNorm over the head size, before RoPE): each keeps the fp32
    # copy of its input, the normalised bf16 tensor and the fp32 rsqrt per head: 6 T (q + kv) + 4 T (heads + kv heads)
    torch, transformers = need("torch"), need("transformers")
    b, s = 2, 128
    qwen = _saved(torch, _layer(torch, transformers, "Qwen3"), b, s, checkpoint=False)
    llama = _saved(torch, _layer(torch, transformers), b, s, checkpoint=False)
    t, q, kv = b * s, LLAMA["hidden"], LLAMA["hidden"] // 4
    assert qwen - llama == 6 * t * (q + kv) + 4 * t * (LLAMA["heads"] + LLAMA["kv_heads"]) == 1960 * t
    assert qwen == _modelled(b, s, "none", qk_norm=True)


def test_under_full_recompute_a_layer_keeps_its_input():
    torch, transformers = need("torch"), need("transformers")
    inner = _layer(torch, transformers)
    got = _saved(torch, inner, 2, 64, checkpoint=True)
    assert got == 2 * 2 * 64 * LLAMA["hidden"] == _modelled(2, 64, "full")


MLA = dict(hidden=256, heads=4, kv_lora=64, qk=32, rope=16, v=48, ffn=688)  # v = qk + rope: CPU SDPA's flash path


def _mla_layer(torch, transformers, q_lora: int):
    cfg = transformers.DeepseekV3Config(
        hidden_size=MLA["hidden"], num_attention_heads=MLA["heads"], num_key_value_heads=MLA["heads"],
        intermediate_size=MLA["ffn"], vocab_size=512, num_hidden_layers=1, first_k_dense_replace=1,
        kv_lora_rank=MLA["kv_lora"], q_lora_rank=q_lora or None, qk_nope_head_dim=MLA["qk"],
        qk_rope_head_dim=MLA["rope"], v_head_dim=MLA["v"], attention_dropout=0.0, tie_word_embeddings=False,
        attn_implementation="sdpa", rope_scaling=None)
    torch.manual_seed(0)
    return transformers.DeepseekV3ForCausalLM(cfg).to(torch.bfloat16).train().model


@pytest.mark.parametrize("q_lora", [0, 96])
def test_a_deepseek_v3_mla_layer_saves_what_the_block_lists(q_lora):
    """Multi-head latent attention (without and with a query latent) with a dense SwiGLU: the latents' RMSNorms,
    query and key at heads x (qk + rope), the key/value up-projection's whole output (the value is a view of it),
    the attention output. The CPU kernel returns its output laid out [b, heads, s, d], so o_proj's input is one
    copy more than on a GPU, whose flash kernels write [b, s, heads, d] (the Llama test above has no such copy)."""
    torch, transformers = need("torch"), need("transformers")
    b, s = 2, 64
    got = _saved(torch, _mla_layer(torch, transformers, q_lora), b, s, checkpoint=False, hidden=MLA["hidden"])
    shape = activations.Shape(s, b, MLA["hidden"], MLA["heads"], flash=True, ffn=MLA["ffn"], mlp="swiglu",
                              norm="rmsnorm", dropout=False, rope=True, accounting="deepspeed",
                              mla=(MLA["kv_lora"], q_lora, MLA["qk"], MLA["rope"], MLA["v"]))
    cpu_copy = 2 * b * s * MLA["heads"] * MLA["v"]
    assert got == float(shape.per_layer()) + cpu_copy


def test_a_bf16_cross_entropy_keeps_one_16_bit_tensor_per_logit():
    # The `bf16` loss kernel (NeMo Automodel's MaskedCrossEntropy with fp32_upcast false): F.cross_entropy on the
    # 16-bit logits saves log_softmax's bf16 output and nothing else of logit size; the kernel's `held` adds the
    # logits the caller keeps (2 + 2 bytes per logit)
    torch = need("torch")
    from core.frameworks import KERNELS
    logits = torch.randn(64, 1000, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, 1000, (64,))
    kept = {}

    def pack(t):
        kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        torch.nn.functional.cross_entropy(logits, labels, reduction="sum")
    per_logit = sum(n for n in kept.values() if n >= logits.numel()) / logits.numel()
    assert per_logit == 2.0 and logits.untyped_storage().data_ptr() not in kept
    assert KERNELS["bf16"].held == per_logit + 2.0
