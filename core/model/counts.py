"""Parameter counts of a decoder-only transformer, from its architecture (Narayanan et al. 2021 for GPT blocks;
Megatron-LM's theoretical_memory_usage.py for MLA and MoE layers), total and active.

The shape-only formulas broadcast over numpy arrays; those taking a core.model.config.ModelConfig (duck-typed, so
the dataclass can call them while validating itself) return plain floats.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def narayanan_params(layers, hidden, vocab, seq):
    """P = 12 L h^2 (1 + 13/(12 h) + (V + s)/(12 L h)): GPT block with biases, learned positions, tied output."""
    L, h, V, s = (np.asarray(x, dtype=float) for x in (layers, hidden, vocab, seq))
    return 12 * L * h**2 * (1 + 13 / (12 * h) + (V + s) / (12 * L * h))


def _head_widths(h, a, kv, head_dim):
    """(query width a d, key/value width kv d) with d = head_dim, or h / a where head_dim is 0."""
    d = np.where(np.asarray(head_dim, dtype=float) > 0, head_dim, h / a)
    return a * d, kv * d


def layer_matmul_params(hidden, heads, kv_heads, ffn, swiglu=False, head_dim=0):
    """Weights that take part in a layer's matrix multiplies: Q and O (h x a d), K and V (h x kv d), the MLP
    (head size d = head_dim, or h / a where 0)."""
    h, a, kv, f = (np.asarray(x, dtype=float) for x in (hidden, heads, kv_heads, ffn))
    q_dim, kv_dim = _head_widths(h, a, kv, head_dim)
    attention = 2 * h * q_dim + 2 * h * kv_dim
    mlp = np.where(swiglu, 3.0, 2.0) * h * f
    return attention + mlp


@dataclass(frozen=True)
class Architecture:
    """What the exact parameter count depends on (scalars, or arrays that broadcast)."""

    layers: object
    hidden: object
    heads: object
    kv_heads: object
    ffn: object
    vocab: object
    seq: object
    swiglu: bool = False
    tied: bool = True
    bias: bool = True
    norm: str = "layernorm"
    learned_pos: bool = True
    embed_norm: bool = False
    head_dim: object = 0  # 0 = hidden / heads

    @classmethod
    def of(cls, model) -> Architecture:
        """A core.model.config.ModelConfig's fields (duck-typed)."""
        return cls(model.layers, model.hidden, model.heads, model.kv_heads, model.ffn, model.vocab, model.seq,
                   model.swiglu, model.tied, model.bias, model.norm, model.position == "learned", model.embed_norm,
                   model.head_dim)


def arch_params(arch: Architecture):
    """Exact count from the architecture fields (handles GQA, SwiGLU, untied output, RMSNorm, no biases).

    For a GPT block (gelu, ffn 4h, biases, LayerNorm, learned positions, tied) it equals Narayanan's formula
    plus the final LayerNorm's 2h.
    """
    L, h, a, kv, f, V, s = (np.asarray(x, dtype=float) for x in (arch.layers, arch.hidden, arch.heads, arch.kv_heads,
                                                                  arch.ffn, arch.vocab, arch.seq))
    norm_params = 2 * h if arch.norm == "layernorm" else h          # scale (+ shift for LayerNorm)
    q_dim, kv_dim = _head_widths(h, a, kv, arch.head_dim)
    biases = (q_dim + 2 * kv_dim + h) + (np.where(arch.swiglu, 2.0, 1.0) * f + h) if arch.bias else 0.0
    per_layer = layer_matmul_params(h, a, kv, f, arch.swiglu, arch.head_dim) + biases + 2 * norm_params
    embeddings = (V * h * (1 if arch.tied else 2) + (s * h if arch.learned_pos else 0.0)
                  + (norm_params if arch.embed_norm else 0.0))
    return L * per_layer + embeddings + norm_params            # + final norm


def mlp_params(hidden, ffn, swiglu=False, bias=False):
    """One MLP (or one expert): 2 h f weights for GELU, 3 h f for SwiGLU, plus biases when the block has them."""
    h, f = float(hidden), float(ffn)
    weights = (3.0 if swiglu else 2.0) * h * f
    return weights + (((2.0 if swiglu else 1.0) * f + h) if bias else 0.0)


def attention_params(model, with_bias=True):
    """One layer's attention weights: Q, K, V, O (grouped-query K and V, h x heads d and h x kv_heads d for head size
    d), or MLA's low-rank projections and their two latent norms (the count Megatron-LM's
    theoretical_memory_usage.py uses)."""
    h, a = float(model.hidden), float(model.heads)
    mla = getattr(model, "mla", None)
    if mla is None:
        q_dim, kv_dim = float(a * model.head_dim), float(model.kv_heads * model.head_dim)
        bias = (q_dim + 2 * kv_dim + h) if (with_bias and model.bias) else 0.0
        return 2 * h * q_dim + 2 * h * kv_dim + bias
    norm = 2.0 if model.norm == "layernorm" else 1.0
    qk = mla.qk_head_dim + mla.qk_rope_dim
    q = mla.q_lora_rank * (h + a * qk + norm) if mla.q_lora_rank else h * a * qk
    kv = mla.kv_lora_rank * (h + a * (mla.qk_head_dim + mla.v_head_dim) + norm) + h * mla.qk_rope_dim
    return q + kv + a * mla.v_head_dim * h


def attention_core_width(model):
    """a x (query-key + value head dims) / 2: a d for plain attention (h unless the head size d is decoupled), so
    the score and value matmuls cost 4 s x this per token, forward (MLA's wider query-key heads make it larger)."""
    mla = getattr(model, "mla", None)
    if mla is None:
        return float(model.heads * model.head_dim)
    return model.heads * (mla.qk_head_dim + mla.qk_rope_dim + mla.v_head_dim) / 2.0


def window_ratio(seq, window) -> float:
    """A windowed causal layer's score work over a full causal one's: each of s queries sees min(i, w) keys, so
    s w - w^2 / 2 against s^2 / 2, i.e. 2 x - x^2 with x = w / s (1 when the window covers the sequence)."""
    x = min(float(window) / float(seq), 1.0) if window else 1.0
    return 2.0 * x - x * x


def score_share(model, seq=None) -> float:
    """The attention score work (Q K^T and scores x V) of the average layer over a full causal attention's, at
    `seq` tokens (the model's own by default): 1 without a sliding window. Every count of the s x s work (FLOPs,
    the fused kernel's time) takes it from here."""
    window = getattr(model, "window", 0)
    if not window:
        return 1.0
    share = float(getattr(model, "window_share", 1.0))
    return 1.0 - share + share * window_ratio(seq or model.seq, window)


def breakdown(model) -> dict[str, float]:
    """Architecture parameter count by part. `experts` are the routed experts only (what expert parallelism
    spreads); shared experts and the router stay with the dense weights. `active` is what one token uses: every
    dense part plus top_k routed experts per MoE layer (embedding and output included, the convention that
    reproduces Mixtral's published 12.9B)."""
    h, L, f = float(model.hidden), model.layers, float(model.ffn)
    norm = 2 * h if model.norm == "layernorm" else h
    moe = getattr(model, "moe", None)
    dense_layers, moe_layers = moe.layer_counts(L) if moe else (L, 0)
    part = {
        "embedding": model.vocab * h * (1 if model.tied else 2)
        + (model.seq * h if model.position == "learned" else 0.0) + (norm if model.embed_norm else 0.0),
        "attention": L * attention_params(model),
        "norms": L * 2 * norm + norm + L * qk_norm_params(model),
        "dense_mlp": dense_layers * mlp_params(h, f, model.swiglu, model.bias),
        "shared_experts": 0.0, "router": 0.0, "experts": 0.0,
    }
    active_experts = 0.0
    if moe:
        expert = mlp_params(h, moe.expert_ffn or f, model.swiglu, model.bias)
        part["shared_experts"] = moe_layers * moe.shared * expert
        part["router"] = moe_layers * h * moe.experts
        part["experts"] = moe_layers * moe.experts * expert
        active_experts = moe_layers * moe.top_k * expert
    total = float(sum(part.values()))
    return {**part, "total": total, "active": total - part["experts"] + active_experts}


def qk_norm_params(model) -> float:
    """One layer's QK-norm weights: a norm over the head size for q and one for k (scale, and shift for LayerNorm)."""
    if not getattr(model, "qk_norm", False):
        return 0.0
    return 2.0 * model.head_dim * (2.0 if model.norm == "layernorm" else 1.0)


def model_params(model):
    """Architecture parameter count of a ModelConfig (all experts included)."""
    return breakdown(model)["total"]


def active_params(model):
    """Parameters one token passes through: the MoE 'active' count (equal to the total for a dense model)."""
    return breakdown(model)["active"]


def mtp_params(model) -> dict[str, float]:
    """Parameters of the multi-token prediction modules, which the published counts leave out (DeepSeek-V3's 671B
    excludes its 14B MTP module, whose Hugging Face copy adds its own embedding and output head): per depth one
    layer of the last layer's kind (MoE where the model has experts), the 2h x h projection of [hidden; embedded
    next token] and its two input norms plus a final norm (arXiv:2412.19437 section 2.2; Megatron-Core
    MultiTokenPredictionLayer enorm, hnorm, eh_proj, final_layernorm). The embedding and output layer are shared.
    `experts` = the routed experts among them."""
    k = float(getattr(model, "mtp_layers", 0))
    if not k:
        return {"dense": 0.0, "experts": 0.0, "total": 0.0}
    h, f = float(model.hidden), float(model.ffn)
    norm = 2 * h if model.norm == "layernorm" else h
    moe = getattr(model, "moe", None)
    dense = attention_params(model) + 2 * norm + 2 * h * h + 3 * norm
    experts = 0.0
    if moe:
        expert = mlp_params(h, moe.expert_ffn or f, model.swiglu, model.bias)
        dense += moe.shared * expert + h * moe.experts
        experts = moe.experts * expert
    else:
        dense += mlp_params(h, f, model.swiglu, model.bias)
    return {"dense": k * dense, "experts": k * experts, "total": k * (dense + experts)}


def matmul_params_per_layer(model):
    """Weights one token multiplies by in an average layer (active experts only, router included): the 2 x N
    FLOPs per token of a layer's matmuls. Equals layer_matmul_params for a dense model."""
    h, L, f = float(model.hidden), model.layers, float(model.ffn)
    moe = getattr(model, "moe", None)
    dense_layers, moe_layers = moe.layer_counts(L) if moe else (L, 0)
    total = L * attention_params(model, with_bias=False) + dense_layers * mlp_params(h, f, model.swiglu)
    if moe:
        total += moe_layers * ((moe.top_k + moe.shared) * mlp_params(h, moe.expert_ffn or f, model.swiglu)
                               + h * moe.experts)
    return total / L


def largest_layer_params(model):
    """Matmul weights of the largest layer (an FSDP unit): a MoE layer holds all its experts and the router."""
    h, f = float(model.hidden), float(model.ffn)
    moe = getattr(model, "moe", None)
    dense = attention_params(model, with_bias=False) + mlp_params(h, f, model.swiglu)
    if not moe:
        return dense
    expert = mlp_params(h, moe.expert_ffn or f, model.swiglu)
    return max(dense, attention_params(model, with_bias=False) + (moe.experts + moe.shared) * expert + h * moe.experts)


def largest_module_params(model) -> int:
    """DeepSpeed's "largest layer": the most parameters one module owns itself (not its children).

    DeepSpeed's estimator (`model_to_params`, runtime/zero/stage3.py) takes the maximum over
    `model.modules()` of each module's own parameters. In a PyTorch module tree of these models that is one
    matrix: the embedding (or untied output) V x h, or one MLP projection h x f (an expert's for MoE) when it
    is wider, as in Megatron-LM's 1T (f = 102,400 > V = 51,200). Unfused projections, as most PyTorch
    models (Hugging Face) define them; a framework that fuses SwiGLU's gate and up matrices holds 2 h f.
    """
    moe = getattr(model, "moe", None)
    ffn = max(model.ffn, moe.expert_ffn or model.ffn) if moe else model.ffn
    return int(max(model.vocab * model.hidden, model.hidden * ffn))
