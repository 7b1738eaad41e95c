"""FP8 training's byte counts: which tensors shrink to one byte, and which stay as they were.

Stated once, used by the planner and the ZeRO view:
- Weights used in GEMMs (attention projections, dense and expert MLPs): 1 byte, FP8 primary weights as with
  Megatron-LM's --fp8-param-gather / Transformer Engine's fp8_model_init. Without them TE keeps the BF16 weight
  and casts a transient FP8 copy per GEMM, so the 2 bytes below would stand.
- Embedding, output layer, norms and router: 2 bytes (BF16). DeepSeek-V3 keeps exactly these out of FP8
  (arXiv:2412.19437, section 3.3.1: "the embedding module, the output head, MoE gating modules, normalization
  operators, and attention operators").
- Gradients: 2 bytes (BF16), unchanged.
- Master weights (FP32, 4 bytes) and Adam moments (2 x 4 bytes): K = 12, unchanged ("we store the master
  weights, weight gradients, and optimizer states in higher precision", same section).
- Activations: the inputs of the linear layers saved in 1 byte (core.memory.activations: 34 -> 27 s b h).
So a GEMM weight costs 1 + 2 + 12 = 15 bytes of model state instead of 16.
"""

from __future__ import annotations

from core.model import counts

GEMM_WEIGHT_BYTES = 1.0
OTHER_WEIGHT_BYTES = 2.0


def gemm_share(model, experts: bool = False) -> float:
    """Share of a model's parameters (of its routed experts if `experts`, else of the rest) that are GEMM weights."""
    parts = counts.breakdown(model)
    if experts:
        return 1.0 if parts["experts"] else 0.0
    rest = parts["total"] - parts["experts"]
    gemm = parts["attention"] + parts["dense_mlp"] + parts["shared_experts"]
    return gemm / rest if rest else 0.0


def param_bytes(model, fp8: bool, experts: bool = False) -> float:
    """Average weight bytes per parameter of the dense part (or of the routed experts)."""
    return share_bytes(gemm_share(model, experts)) if fp8 else OTHER_WEIGHT_BYTES


def share_bytes(share: float) -> float:
    """Average FP8-training weight bytes per parameter when `share` of them are GEMM weights."""
    return share * GEMM_WEIGHT_BYTES + (1.0 - share) * OTHER_WEIGHT_BYTES
