"""Context parallelism's key/value exchange (ring attention) and how much of it the attention maths hides.

With degree c, each rank holds the K/V chunk of its s / c tokens (core.memory.context_parallel.kv_chunk_bytes)
and passes chunks around a ring of c ranks: c - 1 steps per layer, each sending one chunk while the attention of
the chunk already received is computed (Megatron-LM / Transformer Engine P2P context parallelism). The backward
sends the K/V chunk and its gradient (two chunks a step); recomputing the attention (selective or full
recompute) runs the forward ring again. Per step, the attention maths is the block of s/c queries against s/c
keys: 4 b (s/c)^2 x width / t FLOPs forward, twice that backward (the project's FLOPs convention: full blocks,
no causal halving, as core.cost.flops). A step's transfer is hidden up to that compute time; the rest is
exposed:
    exposed per layer = (c - 1) x sum over passes of max(0, chunks x chunk / bandwidth - work / rate).
The ring's neighbours sit t ranks apart (Megatron's order: tensor, then context parallel), so the ring stays on
NVLink while t x c fits in a server, and otherwise runs at the network's pace (its slowest hop).

The all-gather variant (Megatron-LM --cp-comm-type all_gather; Llama 3, arXiv:2407.21783 3.3.2) gathers the whole
sequence's K/V (c chunks) before the attention, gathers it again in the backward and reduce-scatters the K/V
gradients after it (Transformer Engine's AttnFuncWithCPAndKVAllGather): three collectives of c chunks per layer,
a fourth gather under recompute, none of them overlapped ("KV all-gather between CP ranks is exposed"), so all of
their time is exposed. It is what a document mask needs; with GQA the gathered K/V are small beside Q.
"""

from __future__ import annotations

import numpy as np

from core.cost import collective
from core.cost.step_input import Layouts
from core.memory.context_parallel import kv_chunk_bytes
from core.model.counts import attention_core_width, score_share

# (chunks sent per step, compute multiple of the forward block) for each pass over the ring
FORWARD, BACKWARD = (1.0, 1.0), (2.0, 2.0)


def ring_passes(recompute, share=1.0) -> np.ndarray:
    """Forward passes over the ring per step: 1, or 2 when the attention core is recomputed (1 + share under full
    recompute of some layers only)."""
    r = np.asarray(recompute)
    return np.where(r == "none", 1.0, np.where(r == "full", 1.0 + np.asarray(share, dtype=float), 2.0))


def step_flops(seq, micro_batch_size, width, t=1, cp=1) -> np.ndarray:
    """Forward attention FLOPs of one ring step on one GPU: 4 b (s/c)^2 x width / t."""
    s, b, w = (np.asarray(x, dtype=float) for x in (seq, micro_batch_size, width))
    return 4.0 * b * (s / np.asarray(cp, dtype=float)) ** 2 * w / np.asarray(t, dtype=float)


def layer_bytes(seq, micro_batch_size, hidden, heads, kv_heads, t=1, cp=1, recompute="none",
                head_dim=0) -> np.ndarray:
    """K/V bytes one GPU sends for one layer and one micro-batch over a training step (0 without CP; head_dim 0:
    hidden / heads)."""
    chunk = kv_chunk_bytes(seq, micro_batch_size, hidden, heads, kv_heads, t, cp, head_dim=head_dim)
    per_step = ring_passes(recompute) * FORWARD[0] + BACKWARD[0]
    return (np.asarray(cp, dtype=float) - 1.0) * chunk * per_step


def crosses_node(t, cp, gpus_per_node) -> np.ndarray:
    return np.asarray(t) * np.asarray(cp) > np.asarray(gpus_per_node)


def layer_time(model, lay: Layouts, fabric: collective.Fabric, flops_rate, cp_comm: str = "p2p",
               share=1.0) -> tuple[np.ndarray, np.ndarray]:
    """(total, exposed) seconds of one layer's K/V exchange for one micro-batch of each layout (b, t, cp, recompute
    of `lay`). p2p: every ring step one point-to-point send per chunk (core.cost.collective, its latency included)
    over NVLink while t x cp fits in a server, else the network, hidden up to the step's attention maths (flops_rate:
    the attention's achieved FLOP/s). all-gather: the gathers and the reduce-scatter, all exposed."""
    seq, t, cp = model.seq, lay.t, np.asarray(lay.cp, dtype=float)
    chunk = kv_chunk_bytes(seq, lay.micro_batch_size, model.hidden, model.heads, model.kv_heads, t, cp,
                           head_dim=model.head_dim)
    if cp_comm == "all-gather":
        return _gathered(chunk, cp, t, lay.recompute, fabric, share)
    steps = cp - 1.0
    inside = ~crosses_node(t, cp, fabric.gpus_per_node)
    send = collective.cost("send", chunk, 2, np.where(inside, 2, 1), fabric).seconds
    flops = step_flops(seq, lay.micro_batch_size, attention_core_width(model), t, cp) * score_share(model)
    work = flops / np.asarray(flops_rate, dtype=float)
    fwd = ring_passes(lay.recompute, share)
    total = steps * (fwd * FORWARD[0] * send + BACKWARD[0] * send)
    exposed = steps * (fwd * np.maximum(0.0, FORWARD[0] * send - FORWARD[1] * work)
                       + np.maximum(0.0, BACKWARD[0] * send - BACKWARD[1] * work))
    return total, exposed


def _gathered(chunk, cp, t, recompute, fabric: collective.Fabric, share=1.0) -> tuple[np.ndarray, np.ndarray]:
    """All-gather context parallelism: per layer and micro-batch, one gather of the c chunks per forward pass, one in
    the backward and one reduce-scatter of their gradients, each over the cp ranks (t apart), none hidden."""
    per_node = fabric.members_per_node(cp, t)
    gather = collective.cost("all-gather", cp * chunk, cp, per_node, fabric).seconds
    scatter = collective.cost("reduce-scatter", cp * chunk, cp, per_node, fabric).seconds
    total = (ring_passes(recompute, share) + 1.0) * gather + scatter
    return total, total
