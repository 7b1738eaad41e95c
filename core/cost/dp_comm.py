"""Data-parallel and ZeRO collectives as the frameworks issue them, per layer or per bucket, each costed by
core.cost.collective, and the part the compute around it cannot hide.

ZeRO-3 / FSDP (per micro-batch, every layer of the device): an all-gather of the layer's parameter shard before
its forward, again before its backward unless the parameters stay gathered (reshard after forward off), and a
reduce-scatter of its gradients after its backward. With one layer of prefetch each runs during a neighbouring
layer's compute, so what a layer's collectives take beyond one layer's forward (or backward) is exposed.

ZeRO-0/1/2 (DDP, Megatron's distributed optimizer, DeepSpeed stage 2): the gradients are reduced in buckets while
the backward runs (all-reduce for ZeRO-0, reduce-scatter for ZeRO-1/2), once per step in the last micro-batch's
backward (gradient accumulation holds them before), for every micro-batch under ZeRO-2 (its gradient shard cannot
accumulate unreduced); the updated parameters are all-gathered after the optimizer step (ZeRO-1/2) in the same
buckets, during the next step's first forward. The last bucket waits for the whole backward, so at least one
bucket is exposed; beyond it, what exceeds the window is. Under an interleaved schedule the reduction is issued per
model chunk, after that chunk's last micro-batch (Megatron-Core r0.8 pipeline_parallel/schedules.py, grad_sync_func
per chunk; PyTorch's torch/distributed/pipelining/schedules.py, REDUCE_GRAD after each stage's last backward; the
per-chunk overlap MegaScale section 3.2 describes): the later chunks' backward passes hide the earlier chunks'
reductions and only the last chunk's share must wait for the end. The parameter gather mirrors it: the same
schedule syncs the first two chunks' parameters at the start and launches chunk k + 1's when chunk k's first
micro-batch runs (param_sync_func in forward_step_helper), so the earlier chunks' first forwards hide the later
chunks' gathers and the first chunk's share is what must wait (`windows["lead"]`; without it, as FSDP gathers each
chunk at its first use, each chunk's gather hides only behind its own forward: the non-interleaved rule).

Each collective costs its own latency (core.cost.collective: NCCL's ring, tree or PAT), so a gather over 2,048
ranks is not free however few bytes it moves. `windows` scale the compute by the dp_overlap assumption (kernel
contention and launch order leave part of it unused).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.cost import collective
from core.params.memory import GRAD_BYTES

MEGATRON_BUCKET = (40e6, 1e6)  # max(40M, 1M x dp size) parameters (megatron/core/distributed/
#                                distributed_data_parallel.py; research/micro megatron_ddp_bucket_size_default)


@dataclass(frozen=True, eq=False)
class DpTime:
    """Seconds per step of one group's data-parallel collectives: all of them, and the exposed part split into its
    latency and bandwidth terms (in proportion to each collective's own split)."""

    total: np.ndarray
    latency: np.ndarray
    bandwidth: np.ndarray

    @property
    def exposed(self) -> np.ndarray:
        return self.latency + self.bandwidth

    def __add__(self, other: DpTime) -> DpTime:
        return DpTime(self.total + other.total, self.latency + other.latency, self.bandwidth + other.bandwidth)


@dataclass(frozen=True, eq=False)
class Group:
    """One set of weights and the group that shards or reduces them: n ranks with `per_node` in each server, the
    parameters on one GPU before sharding, and bytes per parameter and gradient as the collectives move them."""

    n: np.ndarray
    per_node: np.ndarray
    params: np.ndarray
    param_bytes: float
    grad_bytes: float


def reduce_bytes(grad_dtype: str, precision: str) -> float:
    """Bytes per gradient value the data-parallel reduction moves: the gradient buffer's own precision (Megatron-LM
    reduces its main_grad buffer as it is, param_and_grad_buffer.py; FSDP2 in its reduce_dtype), and where the
    buffer is the framework's default (auto), fp32 under BF16 and FP8 ('accumulate and all-reduce gradients in fp32
    for bfloat16', megatron/training/arguments.py) and 16 bits under FP16."""
    return GRAD_BYTES.get(grad_dtype, 2.0 if precision == "fp16" else 4.0)


def bucket_params(bucket_mparams: float, n) -> np.ndarray:
    """Parameters per gradient bucket: the input (millions), or Megatron-LM's default max(40M, 1M x n)."""
    if bucket_mparams > 0:
        return np.full(np.shape(n), bucket_mparams * 1e6)
    return np.maximum(MEGATRON_BUCKET[0], MEGATRON_BUCKET[1] * np.asarray(n, dtype=float))


def step_time(zero, reshard, g: Group, layers, m, windows: dict, fabric: collective.Fabric,
              bucket_mparams: float = 0.0) -> DpTime:
    """Per candidate: the ZeRO stage's collectives over one step. layers: transformer layers on the device (the
    units ZeRO-3 gathers); m: micro-batches; windows: {"fwd", "bwd"} seconds of one micro-batch's forward and
    backward on the device that can hide them."""
    zero, reshard = np.asarray(zero), np.asarray(reshard, dtype=bool)
    layers, m = np.maximum(np.asarray(layers, dtype=float), 1.0), np.asarray(m, dtype=float)
    shape = np.broadcast(zero, g.n, g.params, layers, m).shape
    out = DpTime(np.zeros(shape), np.zeros(shape), np.zeros(shape))
    if np.any(zero == 3):
        out = _where(zero == 3, _sharded(reshard, g, layers, m, windows, fabric), out)
    if np.any(zero < 3):
        out = _where(zero < 3, _bucketed(zero, g, m, windows, fabric, bucket_mparams), out)
    return out


def across_replicas(g: Group, replicate, replica_per_node, layers, window, fabric: collective.Fabric) -> DpTime:
    """Hybrid sharding (HSDP: FSDP2 on a (replicate, shard) mesh, Megatron-LM's --num-distributed-optimizer-instances,
    DeepSpeed's MiCS before 0.19.8): after its reduce-scatter inside the shard group, each rank all-reduces its
    gradient shard with the rank holding the same shard in every other replica, once per step in the last
    micro-batch's backward, layer by layer; what the backward `window` cannot hide beyond the last layer's share is
    exposed. Zero without copies."""
    r = np.asarray(replicate, dtype=float)
    layers = np.maximum(np.asarray(layers, dtype=float), 1.0)
    unit = g.params / g.n / layers  # one layer's gradient shard
    one = collective.cost("all-reduce", unit * g.grad_bytes, np.maximum(r, 1.0), replica_per_node, fabric)
    lat, band = _last_bucket_exposed(one, layers, window)
    on = r > 1
    return DpTime(np.where(on, layers * one.seconds, 0.0), np.where(on, lat, 0.0), np.where(on, band, 0.0))


def _sharded(reshard, g: Group, layers, m, windows, fabric) -> DpTime:
    """ZeRO-3: per layer and micro-batch, gather (fwd), gather again (bwd, when resharded), reduce-scatter."""
    unit = g.params / layers
    gather = collective.cost("all-gather", unit * g.param_bytes, g.n, g.per_node, fabric)
    scatter = collective.cost("reduce-scatter", unit * g.grad_bytes, g.n, g.per_node, fabric)
    again = reshard.astype(float)
    fwd = _exposed(gather, windows["fwd"] / layers)
    bwd_lat = again * gather.latency + scatter.latency
    bwd = _exposed(collective.Cost(bwd_lat, again * gather.bandwidth + scatter.bandwidth, gather.algorithm),
                   windows["bwd"] / layers)
    count = m * layers
    total = count * ((1.0 + again) * gather.seconds + scatter.seconds)
    return DpTime(total, count * (fwd[0] + bwd[0]), count * (fwd[1] + bwd[1]))


def _bucketed(zero, g: Group, m, windows, fabric, bucket_mparams) -> DpTime:
    """ZeRO-0/1/2: bucketed gradient reduction in the backward, the parameter gather after the step."""
    buckets = np.maximum(np.ceil(g.params / bucket_params(bucket_mparams, g.n)), 1.0)
    reduce_kind = np.where(zero == 0, "all-reduce", "reduce-scatter")
    share = g.params / buckets
    ar = collective.cost("all-reduce", share * g.grad_bytes, g.n, g.per_node, fabric)
    rs = collective.cost("reduce-scatter", share * g.grad_bytes, g.n, g.per_node, fabric)
    red = collective.Cost(np.where(reduce_kind == "all-reduce", ar.latency, rs.latency),
                          np.where(reduce_kind == "all-reduce", ar.bandwidth, rs.bandwidth), ar.algorithm)
    rounds = np.where(zero == 2, m, 1.0)  # ZeRO-2 reduces every micro-batch's gradients
    r_lat, r_band = _last_bucket_exposed(red, buckets, windows["bwd"])
    chunks = np.asarray(windows.get("chunks", 1.0), dtype=float)
    if np.any(chunks > 1):  # interleaved: each model chunk's reduction behind the later chunks' backward
        c_lat, c_band = _per_chunk_exposed(red.times(buckets), chunks, windows["drain"])
        per_chunk = (chunks > 1) & (zero < 2)
        r_lat, r_band = np.where(per_chunk, c_lat, r_lat), np.where(per_chunk, c_band, r_band)
    total = rounds * buckets * red.seconds
    lat, band = rounds * r_lat, rounds * r_band
    gather = collective.cost("all-gather", share * g.param_bytes, g.n, g.per_node, fabric)
    g_lat, g_band = _last_bucket_exposed(gather, buckets, windows["fwd"])
    if "lead" in windows and np.any(chunks > 1):  # interleaved, gathers a chunk ahead: behind earlier chunks' forwards
        c_lat, c_band = _per_chunk_exposed(gather.times(buckets), chunks, windows["lead"])
        g_lat, g_band = np.where(chunks > 1, c_lat, g_lat), np.where(chunks > 1, c_band, g_band)
    after = (zero >= 1).astype(float)
    return DpTime(total + after * buckets * gather.seconds, lat + after * g_lat, band + after * g_band)


def _last_bucket_exposed(one: collective.Cost, buckets, window) -> tuple[np.ndarray, np.ndarray]:
    """Exposed (latency, bandwidth) of `buckets` collectives behind a window: at least the last one, else what
    exceeds the window; split like the collective itself."""
    total = buckets * one.seconds
    exposed = np.maximum(one.seconds, total - window)
    frac = np.divide(one.latency, one.seconds, out=np.zeros_like(exposed), where=one.seconds > 0)
    return exposed * frac, exposed * (1.0 - frac)


def _per_chunk_exposed(total: collective.Cost, chunks, drain) -> tuple[np.ndarray, np.ndarray]:
    """Exposed (latency, bandwidth) of a gradient reduction issued per model chunk (Megatron-Core's interleaved
    schedule): chunk k's share is launched after its last micro-batch's backward, the later chunks' backward
    (`drain`) runs behind them, and the last chunk's share waits for the whole backward: max(C / v, C - drain)."""
    seconds = total.seconds
    exposed = np.maximum(seconds / np.maximum(chunks, 1.0), seconds - drain)
    frac = np.divide(total.latency, seconds, out=np.zeros_like(exposed), where=seconds > 0)
    return exposed * frac, exposed * (1.0 - frac)


def _exposed(c: collective.Cost, window) -> tuple[np.ndarray, np.ndarray]:
    """(latency, bandwidth) of what `c` takes beyond `window`, split like the collective itself."""
    total = c.seconds
    exposed = np.maximum(total - window, 0.0)
    frac = np.divide(c.latency, total, out=np.zeros_like(exposed), where=total > 0)
    return exposed * frac, exposed * (1.0 - frac)


def _where(mask, a: DpTime, b: DpTime) -> DpTime:
    return DpTime(np.where(mask, a.total, b.total), np.where(mask, a.latency, b.latency),
                  np.where(mask, a.bandwidth, b.bandwidth))
