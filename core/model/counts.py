"""Parameter counts of a decoder-only transformer, from its architecture (Narayanan et al. 2021 for GPT blocks).

Every function broadcasts over numpy arrays. `model_params` takes a core.model.config.ModelConfig (duck-typed,
so the dataclass can call it while validating itself).
"""

from __future__ import annotations

import numpy as np


def narayanan_params(layers, hidden, vocab, seq):
    """P = 12 L h^2 (1 + 13/(12 h) + (V + s)/(12 L h)): GPT block with biases, learned positions, tied output."""
    L, h, V, s = (np.asarray(x, dtype=float) for x in (layers, hidden, vocab, seq))
    return 12 * L * h**2 * (1 + 13 / (12 * h) + (V + s) / (12 * L * h))


def layer_matmul_params(hidden, heads, kv_heads, ffn, swiglu=False):
    """Weights that take part in a layer's matrix multiplies: Q and O (h x h), K and V (h x kv_dim), the MLP."""
    h, a, kv, f = (np.asarray(x, dtype=float) for x in (hidden, heads, kv_heads, ffn))
    kv_dim = h / a * kv
    attention = 2 * h * h + 2 * h * kv_dim
    mlp = np.where(swiglu, 3.0, 2.0) * h * f
    return attention + mlp


def arch_params(layers, hidden, heads, kv_heads, ffn, vocab, seq, *, swiglu=False, tied=True, bias=True,
                norm="layernorm", learned_pos=True, embed_norm=False):
    """Exact count from the architecture fields (handles GQA, SwiGLU, untied output, RMSNorm, no biases).

    For a GPT block (gelu, ffn 4h, biases, LayerNorm, learned positions, tied) it equals Narayanan's formula
    plus the final LayerNorm's 2h.
    """
    L, h, a, kv, f, V, s = (np.asarray(x, dtype=float) for x in (layers, hidden, heads, kv_heads, ffn, vocab, seq))
    norm_params = 2 * h if norm == "layernorm" else h          # scale (+ shift for LayerNorm)
    kv_dim = h / a * kv
    biases = (h + 2 * kv_dim + h) + (np.where(swiglu, 2.0, 1.0) * f + h) if bias else 0.0
    per_layer = layer_matmul_params(h, a, kv, f, swiglu) + biases + 2 * norm_params
    embeddings = V * h * (1 if tied else 2) + (s * h if learned_pos else 0.0) + (norm_params if embed_norm else 0.0)
    return L * per_layer + embeddings + norm_params            # + final norm


def model_params(model):
    """Architecture parameter count of a ModelConfig."""
    return float(arch_params(model.layers, model.hidden, model.heads, model.kv_heads, model.ffn, model.vocab,
                             model.seq, swiglu=model.swiglu, tied=model.tied, bias=model.bias, norm=model.norm,
                             learned_pos=model.position == "learned", embed_norm=model.embed_norm))
