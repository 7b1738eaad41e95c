"""What Megatron-Core's batch-level EP overlap hides of the MoE all-to-all (--overlap-moe-expert-parallel-comm with
--delay-wgrad-compute, Megatron-Core >= 0.14; megatron/core/transformer/moe/README.md "Batch-Level EP-A2A
hidding", inspired by DeepSeek-V3's DualPipe).

In the 1F1B steady state the schedule runs one micro-batch's forward together with another's backward, layer by
layer (megatron/core/pipeline_parallel/schedules.py, combined 1F1B). Each layer is split into nodes
(megatron/core/models/common/model_chunk_schedule_plan.py, TransformerLayerSchedulePlan.run, core_v0.14.0):
attn (attention), post_attn (norm, router), dispatch and combine (the all-to-alls, on a communication stream) and
mlp (the experts); the two streams run them in this order

    comm stream:    combine_bwd        | dispatch_fwd       dispatch_bwd          | combine_fwd
    compute stream: attn_fwd, post_attn | mlp_bwd, mlp_dw,   mlp_fwd               | post_attn_bwd, attn_bwd, attn_dw

and each micro-batch's nodes wait for its previous one (one CUDA event per micro-batch, ScheduleNode in
pipeline_parallel/utils.py; the delayed weight gradients record none). So the dispatches hide only behind the
expert MLP's compute and the combines behind the attention's: `layer_exposed` plays the two streams for one layer,
which hides less than min(all-to-all, compute) per direction where the MLP is short next to the dispatches.
Only the paired share of the micro-batches gains: the warm-up forwards (interleaved, first rank:
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


def layer_exposed(comm, parts) -> np.ndarray:
    """Seconds the compute stream waits for the all-to-all in one MoE layer where a forward and a backward pair:
    comm = (dispatch_fwd, combine_fwd, combine_bwd, dispatch_bwd) seconds; parts = the layer's compute
    (core.cost.step_time.StageCosts.moe_parts: attn_F / B / W, mlp_F / B / W). Both streams start free."""
    d_f, c_f, c_b, d_b = (np.asarray(x, dtype=float) for x in comm)
    a_f, a_b, a_w = (np.asarray(parts[k], dtype=float) for k in ("attn_F", "attn_B", "attn_W"))
    m_f, m_b, m_w = (np.asarray(parts[k], dtype=float) for k in ("mlp_F", "mlp_B", "mlp_W"))
    start = np.maximum(a_f, c_b)  # mlp_bwd waits for combine_bwd, dispatch_fwd for post_attn_fwd
    dispatched = start + d_f
    mlp_b_end = start + m_b
    d_b_end = np.maximum(dispatched, mlp_b_end) + d_b  # after dispatch_fwd on its stream and mlp_bwd
    m_f_end = np.maximum(mlp_b_end + m_w, dispatched) + m_f  # its tokens dispatched
    c_f_end = np.maximum(d_b_end, m_f_end) + c_f
    comp_end = np.maximum(m_f_end, d_b_end) + a_b + a_w  # post_attn_bwd waits for dispatch_bwd
    return np.maximum(comp_end, c_f_end) - (a_f + a_b + a_w + m_f + m_b + m_w)


def layer_hidden(a2a_layer, forward_share, parts) -> np.ndarray:
    """Seconds of one MoE layer's all-to-all (one micro-batch) that the paired micro-batch's compute hides: the
    forward's share split into the dispatch (`forward_share` - one backward quarter, FP8-able) and the combine,
    each backward gradient a quarter of the BF16 rest (core.cost.expert_comm.passes)."""
    a2a = np.asarray(a2a_layer, dtype=float)
    fwd = a2a * forward_share
    quarter = (a2a - fwd) / 2.0  # each backward transfer = one BF16 direction = the forward combine
    comm = (fwd - quarter, quarter, quarter, quarter)
    return np.clip(a2a - layer_exposed(comm, parts), 0.0, a2a)


def exposed(total, paired, hidden_layer, layers, sm_share=0.0, sync_s=0.0) -> np.ndarray:
    """Exposed all-to-all seconds per step: the total less what the paired micro-batches hide (hidden_layer per
    MoE layer and micro-batch, `layers` = MoE layers x micro-batches), plus the compute the SMs taken cost and
    the schedule's own cost, sync_s per paired layer (Assumptions.moe_overlap_sync_us)."""
    paired_layers = np.asarray(paired) * layers
    hid = np.minimum(paired_layers * hidden_layer, total)
    return total - hid * (1.0 - sm_share) + paired_layers * sync_s
