"""Training FLOPs, step compute time, MFU, and the tensor-parallel comm/compute ratio.

Every function broadcasts over numpy arrays (the planner scores thousands of layouts in one call); a model
argument is a core.model.config.ModelConfig. Sources: Narayanan et al. 2021 (arXiv:2104.04473, its FLOPs appendix)
for the parameter and FLOPs formulas, Shoeybi et al. 2019 for Megatron tensor parallelism, Korthikanti et
al. 2022 (arXiv:2205.05198) for sequence parallelism and selective recompute.

Conventions
- FLOPs count a multiply-add as 2. Training = forward + backward = 3 x forward (backward costs 2 x forward).
- Attention scores (Q K^T and scores x V) are counted by a named convention (CONVENTIONS), because published
  figures differ: "full" counts the whole s x s matrix (Narayanan et al. 2021; PaLM, Chowdhery et al. 2022,
  appendix B, 6N + 12 L H Q T; Megatron-LM's num_floating_point_operations up to core_v0.11), "causal" only the
  unmasked half (Megatron-LM since commit 8873b55, 2025-03-06, core_v0.12.0 on). The project's MFU counts
  causal: the least work a causal model needs, so MFU <= 1 whatever the kernel; HFU counts what the kernels run
  (full s x s for an eager attention, the causal half for a flash kernel, recompute included).
- Mixture of experts: a token's matmuls are its *active* weights (top-k routed experts plus shared experts and
  the router, core.model.counts.matmul_params_per_layer), not the total; MLA's score and value matmuls use its
  head dims (core.model.counts.attention_core_width). Tokens a capacity factor pads are not counted.
- Model FLOPs exclude recomputation (MFU, PaLM's convention); hardware FLOPs include it (HFU; what
  Narayanan et al. report as "achieved teraFLOP/s per GPU").
- Recompute "full" re-runs each transformer layer's forward (not the logit layer); "selective" re-runs only
  the attention core (Q K^T and softmax x V; Korthikanti et al.), whose matmuls are the 4 s h FLOPs per token
  and layer counted below. Softmax/dropout element-wise work is not counted as FLOPs, so selective recompute
  costs more time than its small FLOP surcharge (about 1 % for GPT-3) suggests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from core.cost import comm
from core.errors import InputError
from core.model.counts import attention_core_width, matmul_params_per_layer, score_share

if TYPE_CHECKING:
    from core.model.config import ModelConfig

RECOMPUTE = ("none", "selective", "full")
MFU_LABEL = ("MFU = model FLOPs (causal attention, no recompute) / (step time x GPUs x dense peak of the precision "
             "the GEMMs run in)")
HFU_LABEL = ("HFU = hardware FLOPs as the kernels run them (eager attention full s x s, flash causal; recompute "
             "included) / (step time x GPUs x the same peak)")


def utilization_words(precision: str) -> str:
    """What the MFU and HFU figures count, in words, for a plan trained in `precision` (plan --explain, the page)."""
    peak = "FP8" if precision == "fp8" else "16-bit"
    return (f"MFU counts model FLOPs with causal attention (half the s x s scores, Megatron-LM's convention since "
            f"core_v0.12) and no recompute, HFU the FLOPs the kernels run (recompute included, eager attention in "
            f"full), both over the dense {peak} peak the GEMMs run at; papers that count all s x s scores (Narayanan "
            f"et al., PaLM, Llama 3) read higher on long sequences")


@dataclass(frozen=True)
class FlopConvention:
    """How a published throughput counts FLOPs: the share of the s x s attention work it counts and whether it
    counts recomputation (hardware FLOPs) or not (model FLOPs), with the source that defines it."""

    key: str
    label: str
    attention: float  # share of the full s x s score and value products counted: 1 full, 0.5 causal
    recompute: str  # "none": model FLOPs; "full": as if every layer's forward ran twice (Narayanan's Table 1)
    source: str
    form: str = "layers"  # "layers": the layers' matmuls + logits (training_flops); "6N": 6 x all parameters per token


CONVENTIONS = {c.key: c for c in (
    FlopConvention("full", "model FLOPs, full s x s attention", 1.0, "none",
                   "Narayanan et al. 2021 (arXiv:2104.04473) appendix; PaLM (Chowdhery et al. 2022, arXiv:2204.02311) "
                   "appendix B, 6N + 12 L H Q T per token; Megatron-LM num_floating_point_operations in core_r0.8.0 "
                   "to core_v0.11.0 (the s / h term, no causal halving)"),
    FlopConvention("causal", "model FLOPs, causal attention (half the s x s work)", 0.5, "none",
                   "Megatron-LM num_floating_point_operations since commit 8873b55 (2025-03-06, in core_v0.12.0): "
                   "'causal mask (only half of the mask is non-zero)'"),
    FlopConvention("full-recompute", "hardware FLOPs with full recompute, full s x s attention", 1.0, "full",
                   "Narayanan et al. 2021, section 5.1: 96 B s L h^2 (1 + s/(6h) + V/(16 L h)) per iteration, the "
                   "count behind Table 1's achieved teraFLOP/s per GPU"),
    FlopConvention("palm", "6 N + 12 L H Q T per token (N all parameters, embeddings included), full attention",
                   1.0, "none", "PaLM (Chowdhery et al. 2022, arXiv:2204.02311) appendix B, as Llama 3 "
                   "(arXiv:2407.21783, 3.3.2: 'MFU; Chowdhery et al. (2023)') and llm-foundry's benchmark tables count",
                   form="6N"),
)}
MFU_CONVENTION = "causal"


# -------------------------------------------------------------------------------------------------- FLOPs

def _recompute_masks(recompute):
    r = np.asarray(recompute)
    full, selective = r == "full", r == "selective"
    if not np.all(full | selective | (r == "none")):
        raise InputError(f"recompute: choose one of {', '.join(RECOMPUTE)}")
    return full, selective


def narayanan_flops(batch, seq, layers, hidden, vocab, recompute="none"):
    """Narayanan et al. per-iteration FLOPs for batch B sequences of a GPT model.

    none: 72 B s L h^2 (1 + s/(6h) + V/(12 L h)); full: 96 B s L h^2 (1 + s/(6h) + V/(16 L h)).
    (Selective recompute has no formula in that paper; use training_flops.)
    """
    B, s, L, h, V = (np.asarray(x, dtype=float) for x in (batch, seq, layers, hidden, vocab))
    full, selective = _recompute_masks(recompute)
    if np.any(selective):
        raise InputError("narayanan_flops covers recompute 'none' and 'full' only; use training_flops")
    plain = 72 * B * s * L * h**2 * (1 + s / (6 * h) + V / (12 * L * h))
    recomputed = 96 * B * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h))
    return np.where(full, recomputed, plain)


def six_n_flops(params, tokens, layers, hidden, seq):
    """The '6 N per token plus attention' form: 6 N T + 12 L h s T (T tokens per step, N parameters)."""
    N, T, L, h, s = (np.asarray(x, dtype=float) for x in (params, tokens, layers, hidden, seq))
    return 6 * N * T + 12 * L * h * s * T


def layer_flops(model: ModelConfig, micro_batch_size, recompute="none", attention: float = 1.0):
    """One transformer layer, one micro-batch, forward + backward (+ recompute): FLOPs over the whole TP group.
    attention: the share of the s x s score and value work counted (1 full, 0.5 causal)."""
    full, selective = _recompute_masks(recompute)
    tokens = np.asarray(micro_batch_size, dtype=float) * model.seq
    matmul = 2 * matmul_params_per_layer(model)                  # active weights of an average layer
    scores = (4.0 * model.seq * attention_core_width(model) * score_share(model)  # QK^T, softmax x V
              * np.asarray(attention, dtype=float))
    forward = matmul + scores
    extra = np.where(full, forward, np.where(selective, scores, 0.0))
    return tokens * (3 * forward + extra)


def training_flops(model: ModelConfig, sequences, recompute="none", attention: float = 1.0):
    """FLOPs of one optimizer step over `sequences` samples: all layers plus the logit layer.

    recompute "none" gives model FLOPs; the other settings give hardware FLOPs. With attention = 1 (full) this
    equals narayanan_flops exactly for a GPT block (the logit layer, 2 V h per token forward, is never recomputed).
    """
    tokens = np.asarray(sequences, dtype=float) * model.seq
    logits = 3 * 2.0 * model.vocab * model.hidden * tokens
    return model.layers * layer_flops(model, sequences, recompute, attention) + logits


def convention_flops(model: ModelConfig, sequences, convention: str):
    """FLOPs of a step as the named convention (CONVENTIONS) counts them."""
    c = CONVENTIONS[convention]
    if c.form == "6N":
        tokens = np.asarray(sequences, dtype=float) * model.seq
        scores = 12.0 * model.layers * model.seq * attention_core_width(model) * score_share(model) * c.attention
        return tokens * (6.0 * model.params_active + scores)
    return training_flops(model, sequences, c.recompute, c.attention)


def model_flops(model: ModelConfig, sequences):
    """Model FLOPs of a step as the project's MFU counts them (MFU_CONVENTION: causal attention, no recompute)."""
    return convention_flops(model, sequences, MFU_CONVENTION)


def hardware_flops(model: ModelConfig, sequences, recompute, attention_share: float):
    """FLOPs the kernels run in a step: recompute included, the s x s work at `attention_share` of full (1 for an
    eager attention, the flash kernel's causal share for a flash one): the numerator of HFU."""
    return training_flops(model, sequences, recompute, attention_share)


def utilization(flops, step_time, n_gpus, peak_flops):
    """flops / (step_time x GPUs x peak). Model FLOPs give MFU; hardware FLOPs (with recompute) give HFU."""
    flops, t, g, peak = (np.asarray(x, dtype=float) for x in (flops, step_time, n_gpus, peak_flops))
    return flops / (t * g * peak)


def compute_time(flops, n_gpus, peak_flops, efficiency):
    """Seconds of compute when `flops` (hardware FLOPs) are spread evenly over the GPUs at one fraction of peak.

    A back-of-the-envelope bound for the lecture-style question; the planner times every operation instead
    (core.cost.layer_ops).
    """
    flops, g, peak, eff = (np.asarray(x, dtype=float) for x in (flops, n_gpus, peak_flops, efficiency))
    if np.any(eff <= 0) or np.any(eff > 1):
        raise InputError("efficiency must be in (0, 1]")
    return flops / (g * peak * eff)


def tokens_per_second(sequences, seq, step_time):
    return np.asarray(sequences, dtype=float) * np.asarray(seq, dtype=float) / np.asarray(step_time, dtype=float)


# -------------------------------------------------------------------------------- tensor-parallel ratio

def tp_comm_compute_ratio(model: ModelConfig, micro_batch_size, t, bandwidth, flops_rate, recompute="none"):
    """One layer, one micro-batch: (TP bytes a rank sends / link bandwidth) / (its share of the layer's FLOPs / rate).

    The traffic is core.cost.comm.tp_layer_bytes (Megatron: 2 all-reduces of b s h in forward and 2 in backward, ring
    factor 2(t-1)/t, 2 more with full recompute; sequence parallelism moves the same volume as reduce-scatter +
    all-gather). Without recompute, for a GPT block this is 2 (t-1) rate / (9 h (1 + s/6h) bandwidth): it grows
    with t, falls with h, and does not depend on the micro-batch.
    """
    sent = comm.tp_layer_bytes(model.seq, micro_batch_size, model.hidden, t, recompute)
    work = layer_flops(model, micro_batch_size, recompute) / np.asarray(t, dtype=float)
    return comm_compute_ratio(sent, bandwidth, work, flops_rate)


def comm_compute_ratio(comm_bytes_per_rank, bandwidth, flops_per_rank, flops_rate):
    """(bytes / bandwidth) / (FLOPs / FLOP rate): above 1 the link, not the maths, sets the pace if not overlapped."""
    c, bw, f, r = (np.asarray(x, dtype=float) for x in (comm_bytes_per_rank, bandwidth, flops_per_rank, flops_rate))
    return (c / bw) / (f / r)


def tp_crosses_node(t, gpus_per_node):
    """True where a TP group (placed on consecutive ranks) spans servers, i.e. uses the slow network."""
    return np.asarray(t) > np.asarray(gpus_per_node)
