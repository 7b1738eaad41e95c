"""Mixture-of-experts all-to-all: the dispatch and combine traffic of one MoE layer, and the links it crosses.

Per MoE layer and micro-batch, one GPU holds b s / (t cp) tokens (tensor-parallel ranks split the tokens, as
Megatron-LM's MoE layers do with sequence parallelism; context parallelism splits the sequence). Each token goes
to top_k experts (times the capacity factor when experts are padded to capacity); with routing spread evenly over
the ep ranks, (ep - 1) / ep of those copies leave the GPU. The dispatch sends the hidden state (h values), the
combine brings the expert outputs back (h values each), so one direction moves
    b s / (t cp) x k x capacity x h x bytes x (ep - 1) / ep.
A training step runs dispatch + combine in the forward, their gradients in the backward, and the forward again
under full recompute. DeepSeek-V3 dispatches in FP8 (1 byte) and combines in BF16 (arXiv:2412.19437, 3.3).

Where it goes: Megatron places the expert-parallel group on etp x ep consecutive ranks, so a server of n GPUs
holds n / etp members of it; the other members are reached over the network. Both links run at once, so the
time is the slower of (NVLink bytes / NVLink rate) and (network bytes / network rate). Node-limited routing
(DeepSeek-V3: each token to at most 4 nodes, sent once per node over InfiniBand and fanned out over NVLink)
caps the network copies per token at the node limit.
"""

from __future__ import annotations

import numpy as np

from core import validate
from core.cost import collective
from core.params.memory import MAX_ND, MAX_TP


def tokens_per_gpu(seq, micro_batch_size, t=1, cp=1) -> np.ndarray:
    """Tokens one GPU routes in one MoE layer for one micro-batch."""
    s, b = np.asarray(seq, dtype=float), np.asarray(micro_batch_size, dtype=float)
    return s * b / (np.asarray(t, dtype=float) * np.asarray(cp, dtype=float))


def local_members(ep, etp, gpus_per_node) -> np.ndarray:
    """Members of one expert-parallel group inside one server (the group sits on etp x ep consecutive ranks)."""
    ep = validate.number("ep", ep, 1, MAX_ND, integer=True)
    etp = validate.number("etp", etp, 1, MAX_TP, integer=True)
    return np.clip(np.floor(np.asarray(gpus_per_node, dtype=float) / etp), 1, ep)


def direction_bytes(seq, micro_batch_size, hidden, top_k, t=1, cp=1, ep=1, capacity=1.0,
                    bytes_per_value=2.0) -> np.ndarray:
    """Bytes one GPU sends to other GPUs in one dispatch (or one combine) of one MoE layer and micro-batch."""
    ep = validate.number("ep", ep, 1, MAX_ND, integer=True)
    capacity = validate.number("capacity", capacity, 1.0, 64.0)
    copies = tokens_per_gpu(seq, micro_batch_size, t, cp) * np.asarray(top_k, dtype=float) * capacity
    return copies * np.asarray(hidden, dtype=float) * bytes_per_value * (ep - 1) / ep


def passes(recompute) -> tuple[np.ndarray, np.ndarray]:
    """(dispatch-direction, combine-direction) transfers per step and layer: the forward's dispatch and combine,
    the backward's two gradients, the forward again under full recompute. The first is the FP8-able dispatch."""
    again = (np.asarray(recompute) == "full").astype(float)
    return 1.0 + again, 3.0 + again  # forward combine + both backward gradients move BF16


def layer_bytes(seq, micro_batch_size, hidden, top_k, t=1, cp=1, ep=1, capacity=1.0, recompute="none",
                fp8_dispatch=False) -> np.ndarray:
    """All-to-all bytes one GPU sends for one MoE layer and one micro-batch over a training step."""
    half = direction_bytes(seq, micro_batch_size, hidden, top_k, t, cp, ep, capacity, 2.0)
    n_dispatch, n_rest = passes(recompute)
    dispatch_factor = np.where(np.asarray(fp8_dispatch, dtype=bool), 0.5, 1.0)
    return half * (n_dispatch * dispatch_factor + n_rest)


def network_share(ep, etp, gpus_per_node, top_k=None, node_limit=None) -> np.ndarray:
    """Share of the all-to-all bytes that leave the server. Without a node limit, routing is uniform over the ep - 1
    peers; with one, a token crosses the network at most once per remote node (min(k, limit) of its k copies)."""
    ep_arr = np.asarray(ep, dtype=float)
    local = local_members(ep, etp, gpus_per_node)
    share = np.where(ep_arr > 1, (ep_arr - local) / np.maximum(ep_arr - 1, 1), 0.0)
    if node_limit is not None and top_k is not None:
        nodes = np.ceil(ep_arr / local)
        remote_nodes = np.minimum(float(node_limit), nodes) * (nodes - 1) / np.maximum(nodes, 1)
        share = np.minimum(share, remote_nodes / float(top_k))
    return share


def layer_time(nbytes, ep, etp, fabric: collective.Fabric, messages=1.0, top_k=None, node_limit=None) -> np.ndarray:
    """Seconds for `nbytes` of all-to-all in `messages` exchanges (core.cost.collective: NVLink and network
    concurrently, the slower sets the pace, plus one message latency per exchange)."""
    net = network_share(ep, etp, fabric.gpus_per_node, top_k, node_limit)
    local = local_members(ep, etp, fabric.gpus_per_node)
    c = collective.cost("all-to-all", nbytes, ep, local, fabric, network_share=net)
    return c.bandwidth + np.asarray(messages, dtype=float) * c.latency
