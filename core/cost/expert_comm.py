"""Mixture-of-experts all-to-all: the dispatch and combine traffic of one MoE layer, and the links it crosses.

Per MoE layer and micro-batch, one GPU holds b s / (t cp) tokens (tensor-parallel ranks split the tokens, as
Megatron-LM's MoE layers do with sequence parallelism; context parallelism splits the sequence). Each token goes
to top_k experts (times the capacity factor when experts are padded to capacity); with routing spread evenly over
the ep ranks, (ep - 1) / ep of those copies leave the GPU. The dispatch sends the hidden state (h values), the
combine brings the expert outputs back (h values each), so one direction moves
    b s / (t cp) x k x capacity x h x bytes x (ep - 1) / ep.
A training step runs dispatch + combine in the forward, their gradients in the backward, and the forward again
under full recompute. Megatron-Core moves all of them in BF16; DeepSeek-V3 dispatches in FP8 (1 byte) and
combines in BF16 (arXiv:2412.19437, 3.3): the moe_fp8_dispatch switch.

Where it goes: Megatron places the expert-parallel group on etp x ep consecutive ranks, so a server of n GPUs
holds n / etp members of it; the other members are reached over the network. Both links run at once, so the
time is the slower of (NVLink bytes / NVLink rate) and (network bytes / network rate). Which bytes cross the
network depends on the dispatcher (the moe_dispatcher switch):

    alltoall  Megatron-Core's MoEAlltoAllTokenDispatcher: an NCCL all-to-all of the permuted tokens, one copy per
              routed expert, so (ep - local) / (ep - 1) of the copies leave the server, at the collective rate.
    allgather Megatron-Core's MoEAllGatherTokenDispatcher, its default (transformer_config.py
              moe_token_dispatcher_type = "allgather"; token_dispatcher.py): every rank gathers the hidden states,
              probabilities and routing map of all t x ep ranks of its tensor-and-expert group, keeps the tokens
              of its own experts, and the combine reduce-scatters the unpermuted outputs back; the backward runs
              the mirror images. No top_k factor: every token travels to every member, once.
    deepep    the flex dispatcher with DeepEP's normal kernels (deepseek-ai/DeepEP README, "normal kernels with
              NVLink and RDMA forwarding"): a token is sent once to each remote server it is routed to and
              fanned out over NVLink there, so the network carries (servers reached - own) copies of it, NVLink
              every copy once; group-limited routing (core.model.blocks.MoeConfig.groups / group_topk) caps the
              servers reached (DeepSeek-V3: 4). DeepEP measured 51 / 50 GB/s RDMA for dispatch / combine at
              EP 64 on a ~50 GB/s CX7 NIC and 153 / 158 GB/s NVLink at EP 8 of ~160 GB/s (same README, H800,
              DeepSeek-V3's pre-training shapes): the network at its nominal rate, NVLink at 97 % of it.
"""

from __future__ import annotations

import numpy as np

from core import validate
from core.cost import collective
from core.params.memory import MAX_ND, MAX_TP

DISPATCHERS = ("alltoall", "deepep", "allgather")
DEEPEP_NET = min(1.0, (51.0 + 50.0) / 2 / 50.0)  # RDMA GB/s measured at EP 64 over the NIC's ~50 GB/s
DEEPEP_NVLINK = (153.0 + 158.0) / 2 / 160.0  # NVLink GB/s measured at EP 8 over H800's ~160 GB/s
DEEPEP_SMS = 20  # SMs DeepEP's kernels occupy: Megatron-Core transformer_config.py moe_deepep_num_sms (v0.14)


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


def passes(recompute, share=1.0) -> tuple[np.ndarray, np.ndarray]:
    """(dispatch-direction, combine-direction) transfers per step and layer: the forward's dispatch and combine,
    the backward's two gradients, the forward again under full recompute (on `share` of the layers where only some
    are recomputed). The first is the FP8-able dispatch."""
    again = (np.asarray(recompute) == "full") * np.asarray(share, dtype=float)
    return 1.0 + again, 3.0 + again  # forward combine + both backward gradients move BF16


def dispatch_factor(fp8_dispatch) -> np.ndarray:
    """Bytes of a dispatched value relative to BF16: 1 byte of 2 where the dispatch is FP8."""
    return np.where(np.asarray(fp8_dispatch, dtype=bool), 0.5, 1.0)


def layer_bytes(seq, micro_batch_size, hidden, top_k, t=1, cp=1, ep=1, capacity=1.0, recompute="none",
                fp8_dispatch=False) -> np.ndarray:
    """All-to-all bytes one GPU sends for one MoE layer and one micro-batch over a training step."""
    half = direction_bytes(seq, micro_batch_size, hidden, top_k, t, cp, ep, capacity, 2.0)
    n_dispatch, n_rest = passes(recompute)
    return half * (n_dispatch * dispatch_factor(fp8_dispatch) + n_rest)


def forward_share(recompute="none", fp8_dispatch=False, share=1.0) -> np.ndarray:
    """Share of layer_bytes that the forward passes move (the rest: the backward's two BF16 gradients)."""
    n_dispatch, n_rest = passes(recompute, share)
    forward = n_dispatch * dispatch_factor(fp8_dispatch) + n_rest - 2.0
    return forward / (forward + 2.0)


def servers(ep, etp, gpus_per_node) -> np.ndarray:
    """Servers one expert-parallel group spans."""
    return np.ceil(np.asarray(ep, dtype=float) / local_members(ep, etp, gpus_per_node))


def servers_reached(moe, ep, etp, gpus_per_node) -> np.ndarray:
    """Expected servers one token's top_k copies land on (its own included). Experts sit on the ep ranks in order,
    so a routing group of experts / groups consecutive experts covers ceil(its experts / a server's) servers.
    Group-limited routing allows group_topk groups and picks each one for its best experts, so every allowed
    server is taken as reached (up to k); without it, k copies spread uniformly over N servers reach
    N (1 - (1 - 1/N)^k) of them."""
    n = servers(ep, etp, gpus_per_node)
    k = float(moe.top_k)
    if moe.groups > 1:
        per_server = moe.experts / np.asarray(ep, dtype=float) * local_members(ep, etp, gpus_per_node)
        allowed = np.minimum(n, moe.group_topk * np.ceil(moe.experts / moe.groups / per_server))
        return np.minimum(allowed, k)
    return n * (1.0 - (1.0 - 1.0 / n) ** k)


def network_share(ep, etp, gpus_per_node, top_k=None, reached=None) -> np.ndarray:
    """Share of the all-to-all bytes that leave the server. reached None (alltoall): every copy travels on its own,
    uniform over the ep - 1 peers. reached (deepep, servers_reached): a token crosses the network once per remote
    server, reached x (N - 1) / N of its k copies (the own server is one of the N with probability 1 / N)."""
    ep_arr = np.asarray(ep, dtype=float)
    local = local_members(ep, etp, gpus_per_node)
    share = np.where(ep_arr > 1, (ep_arr - local) / np.maximum(ep_arr - 1, 1), 0.0)
    if reached is not None and top_k is not None:
        nodes = servers(ep, etp, gpus_per_node)
        remote = np.asarray(reached, dtype=float) * (nodes - 1) / np.maximum(nodes, 1)
        share = np.minimum(share, remote / float(top_k))
    return share


def allgather_time(tokens, hidden, experts, group, gpus_per_node, fabric: collective.Fabric, recompute="none",
                   share=1.0) -> np.ndarray:
    """Seconds of the allgather dispatcher's collectives for one MoE layer and one micro-batch over a step: `tokens`
    per GPU (tokens_per_gpu) on the `group` = t x ep ranks of the tensor-and-expert group (consecutive ranks, so
    min(server, t ep) of them share a server). The forward gathers the hidden states (bf16), the router's
    probabilities (fp32) and its routing map (1 byte) and reduce-scatters the combine; the backward reduce-scatters
    the hidden states' and probabilities' gradients and gathers the combine's; full recompute repeats the forward
    on `share` of the layers."""
    n = np.asarray(group, dtype=float)
    tokens = np.asarray(tokens, dtype=float) * n  # the gathered tensors' rows
    hidden_b, probs_b = tokens * float(hidden) * 2.0, tokens * float(experts) * 4.0
    local = np.minimum(np.asarray(gpus_per_node, dtype=float), n)

    def one(kind, nbytes):
        return collective.cost(kind, nbytes, n, local, fabric).seconds

    forward = one("all-gather", hidden_b + probs_b + tokens * float(experts)) + one("reduce-scatter", hidden_b)
    backward = one("reduce-scatter", hidden_b + probs_b) + one("all-gather", hidden_b)
    again = (np.asarray(recompute) == "full") * np.asarray(share, dtype=float)
    return (1.0 + again) * forward + backward


def fabric(gpu, a) -> collective.Fabric:
    """The links the all-to-all runs on: NCCL's at the achievable fraction (alltoall), DeepEP's measured rates."""
    base = collective.Fabric.of(gpu, a)
    if a.moe_dispatcher != "deepep":
        return base
    return collective.Fabric(gpu.intra_bytes_per_s * DEEPEP_NVLINK, gpu.inter_bytes_per_s * DEEPEP_NET,
                             int(gpu.gpus_per_node), base.send_latency_s, base.net_hop_s)


def layer_time(nbytes, ep, etp, fabric: collective.Fabric, messages=1.0, top_k=None, reached=None) -> np.ndarray:
    """Seconds for `nbytes` of all-to-all in `messages` exchanges (core.cost.collective: NVLink and network
    concurrently, the slower sets the pace, plus one message latency per exchange). reached (deepep): every copy
    crosses NVLink once, directly or forwarded from the receiving GPU."""
    net = network_share(ep, etp, fabric.gpus_per_node, top_k, reached)
    local = local_members(ep, etp, fabric.gpus_per_node)
    c = collective.cost("all-to-all", nbytes, ep, local, fabric, network_share=net,
                        nvlink_share=None if reached is None else 1.0)
    return c.bandwidth + np.asarray(messages, dtype=float) * c.latency
