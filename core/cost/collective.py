"""What one collective costs, as NCCL would run it: the one cost function every caller uses (tensor-parallel
collectives in core.cost.layer_ops, data-parallel / ZeRO buckets and per-layer gathers in core.cost.dp_comm,
pipeline sends, the MoE all-to-all, ring attention's K/V exchange, the ZeRO page's communication table).

Alpha-beta, with the latency term of the algorithm NCCL's tuner would pick (NVIDIA/nccl src/graph/tuning.cc at
5067397, `ncclTunerConstantsDefaults` and `ncclTopoTuneModel`; the Simple protocol, which NCCL uses for the
megabyte-to-gigabyte buffers of training). A group of n ranks with k members per server spans N = n / k servers:

    ring   all-reduce 2(n-1) steps, reduce-scatter / all-gather n-1: 2(N-1) or N-1 of them cross the network,
           the rest stay on NVLink; latency = base + intra steps x NVLink hop + inter steps x network hop
           (x 1.4 for a multi-server all-reduce: NCCL's ring "plateau" on compute capability >= 8.0);
           bytes = 2(n-1)/n or (n-1)/n of the buffer
    tree   all-reduce only: a chain inside each server and a binary tree between servers, down and up:
           latency = base + 2 ((k-1) NVLink hop + floor(log2 N) network hop); bytes = 2 x buffer / 0.92
    PAT    reduce-scatter / all-gather with one rank per server (NCCL >= 2.23): latency = base + floor(log2 N)
           network hop / 3.5 + n x 2.8 us; bytes = buffer / 0.75

NCCL picks the fastest of those that apply; so does `cost`. Bandwidth is the slowest tier crossed: NVLink inside a
server; across servers min(NVLink, k NICs) per rank (NCCL runs one ring per NIC, each rank's share leaves through
its own). Point-to-point sends (pipeline stages, ring attention) and the all-to-all pay one message latency.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KINDS = ("all-reduce", "reduce-scatter", "all-gather", "send", "all-to-all")
ALGORITHMS = ("ring", "tree", "pat", "p2p")
RING_COEFFICIENT = {"all-reduce": 2.0, "reduce-scatter": 1.0, "all-gather": 1.0}  # buffers per rank as n -> inf

# NCCL's tuner constants, Simple protocol, in microseconds (tuning.cc): base latency per algorithm; per-hop latency
# on NVLink (ring 3.4, tree 4.0) and on the network (14 for both); the network post overhead (1 us x 3 for Simple)
# that every step of a multi-server ring pays at least; the ring all-reduce plateau factor; the tree's bus-bandwidth
# factor (0.92) and the PAT algorithm's (0.75) with its per-rank term (2.8 us) and log-latency divisor (3.5).
BASE_US = {"ring": 8.4, "tree": 8.4, "pat": 8.0}
NVLINK_HOP_US = {"ring": 3.4, "tree": 4.0}
NET_HOP_US = 14.0
NET_OVERHEAD_US = 3.0
RING_PLATEAU = 1.4
TREE_BW = 0.92
PAT_BW, PAT_RANK_US, PAT_LOG = 0.75, 2.8, 3.5


@dataclass(frozen=True)
class Fabric:
    """The links a collective can cross: achieved bytes/s per GPU and direction inside a server and per NIC (one
    per GPU) between servers, the server size, a point-to-point message's latency and the network hop's."""

    intra_bw: float
    inter_bw: float
    gpus_per_node: int
    send_latency_s: float = 10e-6
    net_hop_s: float = NET_HOP_US * 1e-6
    nccl_latency: float = 1.0  # NCCL's base and NVLink latencies x this (0: bandwidth terms only, as textbooks count)
    loss_per_doubling: float = 0.0  # network bandwidth lost per doubling of the servers a collective spans, beyond 2

    @classmethod
    def of(cls, gpu, a) -> Fabric:
        """A GPU preset's links at the assumptions' achievable fraction (core.cost.step_input.Assumptions)."""
        return cls(gpu.intra_bytes_per_s * a.comm_eff, gpu.inter_bytes_per_s * a.comm_eff, int(gpu.gpus_per_node),
                   a.latency_s, a.net_latency_us * 1e-6, loss_per_doubling=a.ring_loss)

    def members_per_node(self, n, stride=1) -> np.ndarray:
        """Members of a group of n ranks, `stride` ranks apart (Megatron's order: tensor fastest), in one server."""
        n = np.asarray(n, dtype=float)
        return np.clip(np.floor(self.gpus_per_node / np.maximum(np.asarray(stride, dtype=float), 1.0)), 1.0, n)

    def bandwidth(self, per_node, nodes) -> np.ndarray:
        """Bytes/s per rank of a group with `per_node` members in each of `nodes` servers: the slowest tier, the
        network's share falling by `loss_per_doubling` for every doubling of the servers beyond two."""
        nodes = np.asarray(nodes, dtype=float)
        doublings = np.maximum(np.log2(np.maximum(nodes, 1.0)) - 1.0, 0.0)
        net = self.inter_bw * (1.0 - self.loss_per_doubling) ** doublings
        network = np.minimum(net * np.asarray(per_node, dtype=float), self.intra_bw)
        return np.where(nodes > 1, network, self.intra_bw)


@dataclass(frozen=True, eq=False)
class Cost:
    """Seconds of collectives, split into the latency and the bandwidth term, and which algorithm ran."""

    latency: np.ndarray
    bandwidth: np.ndarray
    algorithm: np.ndarray  # index into ALGORITHMS

    @property
    def seconds(self) -> np.ndarray:
        return self.latency + self.bandwidth

    def times(self, count) -> Cost:
        """`count` of the same collective, one after the other."""
        return Cost(self.latency * count, self.bandwidth * count, self.algorithm)


def cost(kind: str, nbytes, n, per_node, fabric: Fabric, network_share=None, nvlink_share=None) -> Cost:
    """One `kind` collective over a buffer of `nbytes` (all-to-all and send: the bytes one rank sends) on groups of
    n ranks with `per_node` of them in each server (arrays broadcast). Zero for n = 1. network_share (all-to-all
    only): the share of the bytes that leave the server, default uniform routing (n - k) / (n - 1); nvlink_share:
    the share that crosses NVLink, default the rest (a forwarding dispatcher such as DeepEP sends more)."""
    if kind not in KINDS:
        raise ValueError(f"collective {kind!r} is not one of {', '.join(KINDS)}")
    nbytes, n = np.asarray(nbytes, dtype=float), np.asarray(n, dtype=float)
    k = np.clip(np.asarray(per_node, dtype=float), 1.0, np.maximum(n, 1.0))
    nodes = np.ceil(n / k)
    bw = fabric.bandwidth(k, nodes)
    alone = n <= 1
    if kind == "send":
        lat, band, algo = np.full(np.broadcast(n, k).shape, fabric.send_latency_s), nbytes / bw, 3
        return _done(lat, band, np.full(lat.shape, algo), alone)
    if kind == "all-to-all":
        share = (n - k) / np.maximum(n - 1.0, 1.0) if network_share is None else np.asarray(network_share, float)
        local = 1.0 - share if nvlink_share is None else np.asarray(nvlink_share, dtype=float)
        band = np.maximum(nbytes * local / fabric.intra_bw, nbytes * share / fabric.inter_bw)
        lat = np.full(band.shape, fabric.send_latency_s)
        return _done(lat, band, np.full(band.shape, 3), alone)
    ring = _ring(kind, nbytes, n, k, nodes, bw, fabric)
    other = _tree(nbytes, k, nodes, bw, fabric) if kind == "all-reduce" else _pat(nbytes, n, k, nodes, bw, fabric)
    pick = other[0] + other[1] < ring[0] + ring[1]  # NCCL takes the faster; the ring on a tie
    lat, band = np.where(pick, other[0], ring[0]), np.where(pick, other[1], ring[1])
    return _done(lat, band, np.where(pick, other[2], ring[2]), alone)


def seconds(kind: str, nbytes, n, per_node, fabric: Fabric) -> np.ndarray:
    """cost(...).seconds."""
    return cost(kind, nbytes, n, per_node, fabric).seconds


def _done(lat, band, algo, alone) -> Cost:
    return Cost(np.where(alone, 0.0, lat), np.where(alone, 0.0, band), np.asarray(algo))


def _ring(kind, nbytes, n, k, nodes, bw, fabric: Fabric) -> tuple:
    c = RING_COEFFICIENT[kind]
    steps, inter = c * (n - 1.0), c * (nodes - 1.0)
    multi = nodes > 1
    us = 1e-6 * fabric.nccl_latency
    hop = np.where(multi, max(NVLINK_HOP_US["ring"], NET_OVERHEAD_US), NVLINK_HOP_US["ring"]) * us
    lat = BASE_US["ring"] * us + (steps - inter) * hop + inter * fabric.net_hop_s
    if kind == "all-reduce":
        lat = lat * np.where(multi, RING_PLATEAU, 1.0)
    return lat, c * (n - 1.0) / np.maximum(n, 1.0) * nbytes / bw, 0


def _tree(nbytes, k, nodes, bw, fabric: Fabric) -> tuple:
    depth = np.floor(np.log2(np.maximum(nodes, 1.0)))
    us = 1e-6 * fabric.nccl_latency
    lat = BASE_US["tree"] * us + 2.0 * ((k - 1.0) * NVLINK_HOP_US["tree"] * us + depth * fabric.net_hop_s)
    return lat, 2.0 * nbytes / (TREE_BW * bw), 1


def _pat(nbytes, n, k, nodes, bw, fabric: Fabric) -> tuple:
    depth = np.floor(np.log2(np.maximum(nodes, 1.0)))
    us = 1e-6 * fabric.nccl_latency
    lat = BASE_US["pat"] * us + depth * fabric.net_hop_s / PAT_LOG + n * PAT_RANK_US * us
    usable = (k == 1) & (nodes > 1)  # NCCL enables PAT only with one rank per server
    return np.where(usable, lat, np.inf), nbytes / (PAT_BW * bw), 2
