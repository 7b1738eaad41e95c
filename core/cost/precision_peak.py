"""The FLOP rate a step runs at under BF16 or FP8 training, from the datasheet peaks (assets/gpus.json).

FP8 runs the linear layers' GEMMs (forward, input gradient and weight gradient) at the FP8 tensor peak; the
attention core (Q K^T, softmax x V) and the output layer stay BF16, as in Transformer Engine recipes and
DeepSeek-V3 (arXiv:2412.19437, section 3.3.1). So the step's compute time is the FP8 share of its FLOPs at the
FP8 peak plus the rest at the BF16 peak, i.e. one effective peak, the FLOP-weighted harmonic mean:
    1 / peak_eff = share / peak_fp8 + (1 - share) / peak_bf16.
MFU stays relative to the dense BF16 peak (the convention Llama 3 and DeepSeek report), so FP8 can raise it.
"""

from __future__ import annotations

from core.model.counts import attention_core_width, matmul_params_per_layer, score_share


def fp8_flop_share(model) -> float:
    """Share of a training step's FLOPs in FP8-able GEMMs: the layers' linear layers (active weights) among
    linear + attention core + output layer, per token (the 3x of the backward cancels)."""
    gemm = model.layers * 2.0 * matmul_params_per_layer(model)
    attention = model.layers * 4.0 * model.seq * attention_core_width(model) * score_share(model)
    logits = 2.0 * model.vocab * model.hidden
    return gemm / (gemm + attention + logits)


def effective_peak(model, gpu, fp8: bool) -> float:
    """FLOP/s the step's FLOPs run at, before the achievable fraction: the BF16 peak, or FP8/BF16 blended."""
    if not fp8 or gpu.peak_flops_fp8 is None:
        return gpu.peak_flops
    share = fp8_flop_share(model)
    return 1.0 / (share / gpu.peak_flops_fp8 + (1.0 - share) / gpu.peak_flops)
