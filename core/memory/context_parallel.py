"""Ring attention's key/value buffers: the memory context parallelism adds on top of activations / c.

With context parallelism c, each rank keeps the keys and values of its own s / c tokens (Megatron-LM's guide:
"each GPU only stores the KV of a sequence chunk in forward and gathers KV again in backward"). While one layer's
attention runs, the ring passes K/V chunks rank to rank: Transformer Engine's P2P implementation double-buffers
them (send one chunk while receiving the next) in the forward, and in the backward passes the chunks' gradients
dK/dV around the same ring. So the transient peak, for the one layer being computed, is four K/V-sized chunks:
    4 x 2 (K and V) x (s / c) x b x (kv_heads / t) x head_dim x 2 bytes.
Grouped-query attention makes the chunks small (kv_heads of heads), which is why CP suits Llama-style models.

With the all-gather exchange instead (Megatron-LM --cp-comm-type all_gather, Llama 3's context parallelism), the
layer being computed holds the whole sequence's K and V: Transformer Engine's AttnFuncWithCPAndKVAllGather
gathers them (k_ag, v_ag: c chunks) in the forward and again in the backward, where it also fills full-sequence
dK and dV (c chunks more) before reduce-scattering them (transformer_engine/pytorch/attention/
dot_product_attention/context_parallel.py). Peak: 2 c chunks; the per-step partial gradients beside them are not
counted.
"""

from __future__ import annotations

import numpy as np

from core import validate
from core.params.memory import ACTIVATIONS
from core.params.model import MODEL

CHUNKS_IN_FLIGHT = 4  # two K/V chunks double-buffered, plus their two gradient chunks in the backward
ALL_GATHER_CHUNKS = 2  # x cp: the gathered K/V and the full-sequence dK/dV of the all-gather exchange


def kv_chunk_bytes(seq, micro_batch_size, hidden, heads, kv_heads, t=1, cp=1, bytes_per_value=2.0,
                   head_dim=0) -> np.ndarray:
    """Bytes of one rank's K and V for its s / c tokens, on one tensor-parallel rank (a K/V head stays whole:
    with t > kv_heads each rank holds one head, replicated). head_dim 0: hidden / heads."""
    s = validate.number("seq", seq, 1, ACTIVATIONS["seq"].hi)
    b = validate.number("mb", micro_batch_size, 1, ACTIVATIONS["mb"].hi)
    h = validate.number("hidden", hidden, 1, ACTIVATIONS["hidden"].hi)
    a = validate.number("heads", heads, 1, ACTIVATIONS["heads"].hi)
    kv = validate.number("kv_heads", kv_heads, 1, ACTIVATIONS["heads"].hi)
    t = validate.number("t", t, 1, ACTIVATIONS["t"].hi)
    cp = validate.number("cp", cp, 1, ACTIVATIONS["cp"].hi)
    heads_per_rank = np.maximum(kv / t, 1.0)
    d = validate.number("head_dim", head_dim, 0, MODEL["head_dim"].hi)
    return 2.0 * (s / cp) * b * heads_per_rank * np.where(d > 0, d, h / a) * bytes_per_value


def ring_buffer_bytes(seq, micro_batch_size, hidden, heads, kv_heads, t=1, cp=1, bytes_per_value=2.0,
                      head_dim=0, cp_comm="p2p") -> np.ndarray:
    """Transient K/V buffers of the layer being computed under context parallelism (`cp_comm`: "p2p", the ring,
    or "all-gather"); zero without it."""
    chunk = kv_chunk_bytes(seq, micro_batch_size, hidden, heads, kv_heads, t, cp, bytes_per_value, head_dim)
    chunks = np.where(np.asarray(cp_comm, dtype=object) == "all-gather", ALL_GATHER_CHUNKS * np.asarray(cp),
                      CHUNKS_IN_FLIGHT)
    return np.where(np.asarray(cp) > 1, chunks * chunk, 0.0)
