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

LLAMA = dict(hidden=256, heads=8, kv_heads=2, ffn=688)  # grouped-query attention, 4 query heads per K/V head


def _layer(torch, transformers):
    cfg = transformers.LlamaConfig(hidden_size=LLAMA["hidden"], num_attention_heads=LLAMA["heads"],
                                   num_key_value_heads=LLAMA["kv_heads"], intermediate_size=LLAMA["ffn"],
                                   vocab_size=512, num_hidden_layers=1, attention_dropout=0.0,
                                   tie_word_embeddings=False, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).train()
    return model.model


def _saved(torch, inner, b: int, s: int, checkpoint: bool) -> int:
    """Bytes autograd keeps after one layer's forward, each storage once, parameters and rotary tables left out."""
    layer = inner.layers[0]
    skip = {p.untyped_storage().data_ptr() for p in inner.parameters()}
    leaf = torch.randn(b, s, LLAMA["hidden"], dtype=torch.bfloat16, requires_grad=True)
    pos = torch.arange(s).unsqueeze(0)
    cos, sin = inner.rotary_emb(leaf, pos)
    skip |= {cos.untyped_storage().data_ptr(), sin.untyped_storage().data_ptr()}
    kept: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in skip:
            kept[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        x = leaf.clone()  # the layer's input is a non-leaf, as the previous layer's output is
        kw = dict(attention_mask=None, position_embeddings=(cos, sin), position_ids=pos)
        if checkpoint:
            out = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False, **kw)
        else:
            out = layer(x, **kw)
    (out[0] if isinstance(out, tuple) else out).float().sum().backward()  # the graph was a real one
    return sum(kept.values())


def _modelled(b: int, s: int, recompute: str) -> float:
    shape = activations.Shape(s, b, LLAMA["hidden"], LLAMA["heads"], recompute=recompute, flash=True,
                              kv_heads=LLAMA["kv_heads"], ffn=LLAMA["ffn"], mlp="swiglu", norm="rmsnorm",
                              dropout=False, rope=True, accounting="deepspeed")
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


def test_under_full_recompute_a_layer_keeps_its_input():
    torch, transformers = need("torch"), need("transformers")
    inner = _layer(torch, transformers)
    got = _saved(torch, inner, 2, 64, checkpoint=True)
    assert got == 2 * 2 * 64 * LLAMA["hidden"] == _modelled(2, 64, "full")
