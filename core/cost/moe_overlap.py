"""What Megatron-Core's batch-level EP overlap hides of the MoE all-to-all (--overlap-moe-expert-parallel-comm with
--delay-wgrad-compute, Megatron-Core >= 0.14; megatron/core/transformer/moe/README.md "Batch-Level EP-A2A
hidding", inspired by DeepSeek-V3's DualPipe).

In the 1F1B steady state the schedule runs one micro-batch's forward together with another's backward, layer by
layer (megatron/core/pipeline_parallel/schedules.py, combined 1F1B): the forward's dispatch and combine run on a
communication stream while the other micro-batch's backward of the same layer computes, and the backward's two
gradients behind the forward's compute. So per MoE layer and paired micro-batch at most
    min(forward all-to-all, backward compute) + min(backward all-to-all, forward compute)
hides. Only the paired share of the micro-batches gains: the warm-up forwards (interleaved, first rank:
2 (p - 1) + (v - 1) p, plus the one extra forward the overlap schedules; get_pp_warmup_microbatches at
core_v0.14.0) and as many cool-down backwards run alone; without pipelining one forward leads. Megatron asserts
ep > 1, no full recompute and, with p > 1, the interleaved schedule (transformer_config.py), so elsewhere nothing
hides. While hidden, DeepEP's kernels hold DEEPEP_SMS of the GPU's SMs, and the compute beside them runs that
much slower: the hidden time x SMs taken / SMs is charged back (NCCL's all-to-all SMs are not modelled).
"""

from __future__ import annotations

import numpy as np


def paired_share(p, chunks, m, ep, recompute, split) -> np.ndarray:
    """Share of a device's forward chunks that run paired with another micro-batch's backward."""
    p, v, m = (np.asarray(x, dtype=float) for x in (p, chunks, m))
    total = m * v
    warmup = np.where(p > 1, 2.0 * (p - 1.0) + (v - 1.0) * p + 1.0, 1.0)
    share = (total - np.minimum(warmup, total)) / np.maximum(total, 1.0)
    able = ((p == 1) | (v > 1)) & (np.asarray(ep) > 1) & (np.asarray(recompute) != "full") \
        & ~np.asarray(split, dtype=bool)
    return np.where(able, share, 0.0)


def hidden(a2a_layer, forward_share, compute_forward, compute_backward) -> np.ndarray:
    """Seconds of one MoE layer's all-to-all (one micro-batch) that the other micro-batch's compute of the same
    layer can hide: the forward's behind the backward's compute, the backward's behind the forward's."""
    a_f = np.asarray(a2a_layer, dtype=float) * forward_share
    a_b = np.asarray(a2a_layer, dtype=float) - a_f
    return np.minimum(a_f, compute_backward) + np.minimum(a_b, compute_forward)


def exposed(total, paired, hidden_layer, layers, sm_share=0.0) -> np.ndarray:
    """Exposed all-to-all seconds per step: the total less what the paired micro-batches hide (hidden_layer per
    MoE layer and micro-batch, `layers` = MoE layers x micro-batches), plus the compute the SMs taken cost."""
    hid = np.minimum(np.asarray(paired) * hidden_layer * layers, total)
    return total - hid * (1.0 - sm_share)
