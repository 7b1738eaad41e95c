"""Time of one training step for many candidate layouts at once, from the per-operation model and the simulator.

Two calls, with the pipeline simulator between them (core.planner.plan runs it):

1. `stage_costs`: per micro-batch, what one device's share of the model costs in forward (t_f), input-gradient
   backward plus what recompute re-runs (t_b) and weight-gradient backward (t_w), from core.cost.layer_ops on the
   fullest stage (ceil(L / (p v)) layers per chunk), with the pipeline sends (blocking, as Megatron-LM waits for
   them) added to every forward and backward. The first stage also runs the embedding, the last the output
   layer and the loss: their extra time is each stage's cost factor, so the simulated bubble reflects the
   imbalance (core.pipeline.simulate.Costs.stage_factors).
2. `estimate`: the busiest device's busy time x the simulated makespan / busy ratio is the pipeline; then the
   data-parallel / ZeRO collectives nothing hides, the optimizer step (memory-bound over the local shard) and
   offload traffic. Every component is reported so that they add up to step_time_s:

       gemm + attention + memory_bound + tp + pp    the busiest device's operations (exposed TP communication)
       + bubble                                     its idle time inside the simulated makespan
       + straggler                                  the slowest of G GPUs sets the pace (core.cost.scale_loss)
       + dp_latency + dp_bandwidth                  data-parallel / ZeRO collectives nothing hides (core.cost.dp_comm)
       + a2a + ring + optimizer + offload           the rest, after the pipeline drains
       + margin                                     production_margin x all of the above (0 unless the user sets it)

Every named number is a field of `Assumptions` (core.params.planner.ASSUMPTIONS) or of core.cost.rates.Rates
(assets/efficiency.json).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.cost import calibration, collective, comm, dp_comm, flops, scale_loss
from core.cost.gemm import stream_time
from core.cost.layer_ops import COMPONENTS, PHASES, embedding_times, layer_times, mtp_times, output_times
from core.cost.step_input import Assumptions, Layouts, Setting, StepInput
from core.model.config import GpuSpec, ModelConfig
from core.params.memory import RECOMPUTE_MODES
from core.units import GB

__all__ = ["Assumptions", "Layouts", "Setting", "StageCosts", "StepInput", "estimate", "stage_costs"]

# What each ZeRO stage's collectives (core.cost.comm.ZERO_COLLECTIVES, same order) wait for and what hides them:
# "step" = once per optimizer step, "micro" = for every micro-batch; "fwd" / "bwd" = the compute that overlaps
# it. Megatron's distributed optimizer (stage 1) accumulates full gradients and reduce-scatters once; stage 2
# keeps only a gradient shard, so each micro-batch's gradients are reduced (DeepSpeed); stage 3 gathers the
# parameters for every forward and backward (DeepSpeed stage 3, FSDP reshard_after_forward=True).
TIMING = {
    0: (("step", "bwd"),),
    1: (("step", "bwd"), ("step", "fwd")),
    2: (("micro", "bwd"), ("step", "fwd")),
    3: (("micro", "fwd"), ("micro", "bwd"), ("micro", "bwd")),
}
assert all(len(TIMING[s]) == len(comm.ZERO_COLLECTIVES[s]) for s in range(4))


def zero_volume_per_step(stage: int, m: int) -> float:
    """Values each rank sends per optimizer step, in multiples of the rank's parameters as N_d grows, with the
    collectives repeated per micro-batch as TIMING says: 2 for DP and ZeRO-1, m + 1 for ZeRO-2, 3m for ZeRO-3
    (the ZeRO paper's 2 / 2 / 2 / 3 counts one reduction per step)."""
    return float(sum(comm.RING_COEFFICIENT[c] * (m if when == "micro" else 1)
                     for (c, _), (when, _) in zip(comm.ZERO_COLLECTIVES[stage], TIMING[stage], strict=True)))


BREAKDOWN = ("gemm", "attention", "memory_bound", "tp", "pp", "bubble", "straggler", "dp_latency", "dp_bandwidth",
             "a2a", "ring", "optimizer", "offload", "margin")
# Each component's column in the planner's frame (TP, PP, DP, the MoE all-to-all and ring attention's K/V
# exchange are the exposed part of that communication; DP split into its collectives' latency and bandwidth terms).
COLUMN = {"gemm": "gemm_s", "attention": "attention_s", "memory_bound": "memory_bound_s", "tp": "tp_exposed_s",
          "pp": "pp_exposed_s", "bubble": "bubble_s", "straggler": "straggler_s", "dp_latency": "dp_latency_s",
          "dp_bandwidth": "dp_bandwidth_s", "a2a": "a2a_exposed_s", "ring": "ring_exposed_s",
          "optimizer": "optimizer_s", "offload": "offload_s", "margin": "margin_s"}
LABELS = {"gemm": "GEMMs", "attention": "attention core", "memory_bound": "memory-bound ops",
          "tp": "tensor-parallel comm", "pp": "pipeline sends", "bubble": "pipeline bubble",
          "straggler": "slowest GPU (speed spread)",
          "dp_latency": "data-parallel / ZeRO comm, latency", "dp_bandwidth": "data-parallel / ZeRO comm, bandwidth",
          "a2a": "MoE all-to-all", "ring": "ring-attention K/V exchange", "optimizer": "optimizer step",
          "offload": "offload", "margin": "production margin (yours)"}

NOT_MODELLED = (
    "Kernel launch gaps, data loading, logging and Python overhead between kernels are not modelled.",
    "Layers are spread as evenly as possible; the fullest stage sets the pace (ceil(L / (p v)) layers per chunk).",
    "Collectives run as NCCL's tuner would pick them (ring, tree or PAT, Simple protocol; core.cost.collective) at "
    "the slowest link's per-GPU bandwidth times the achievable fraction (a group spanning servers uses as many "
    "network links per server as it has ranks there); NVLink SHARP (NVLS), CollNet and congestion from other jobs "
    "are not modelled.",
    "The efficiency fractions are the GPU family's calibration record (assets/efficiency.json: A100, H100 16-bit, "
    "H100 FP8, each fitted on its named set of published runs); a GPU without runs of its own borrows a family's "
    "record, and its preset says so.",
)


@dataclass(frozen=True, eq=False)
class StageCosts:
    """Per micro-batch seconds of one device's share of the model, by phase, and what the end stages add."""

    tf: np.ndarray  # forward of all the device's chunks, sends included
    tb: np.ndarray  # input-gradient backward + recompute, sends included
    tw: np.ndarray  # weight-gradient backward
    body: dict[str, np.ndarray]  # the same time (tf + tb + tw) by component: gemm, attention, memory_bound, tp, pp
    head: dict[str, np.ndarray]  # the embedding's time on the first stage, by component
    tail: dict[str, np.ndarray]  # the output layer and loss on the last stage, by component
    tp_exposed: float  # share of TP communication on the critical path (1 - tp_overlap); "tp" entries are before it
    layer_compute: np.ndarray  # one layer's operations without communication, per micro-batch (for the TP ratio)
    # One MoE layer's compute per micro-batch as Megatron-Core's EP overlap splits it (core.cost.moe_overlap):
    # attention part (attn + post_attn nodes) and MLP (experts) node, each F / B / W
    moe_parts: dict[str, np.ndarray] = field(default_factory=dict)

    def subset(self, mask) -> StageCosts:
        """The same costs for the candidates where `mask` is true."""
        def pick(d):
            return {k: np.broadcast_to(v, mask.shape)[mask] for k, v in d.items()}
        return StageCosts(self.tf[mask], self.tb[mask], self.tw[mask], pick(self.body), pick(self.head),
                          pick(self.tail), self.tp_exposed, np.broadcast_to(self.layer_compute, mask.shape)[mask],
                          pick(self.moe_parts))

    @property
    def per_micro(self) -> np.ndarray:
        return self.tf + self.tb + self.tw

    def _exposed(self, parts: dict[str, np.ndarray]) -> np.ndarray:
        return sum(v * (self.tp_exposed if k == "tp" else 1.0) for k, v in parts.items())

    @property
    def head_total(self) -> np.ndarray:
        return self._exposed(self.head)

    @property
    def tail_total(self) -> np.ndarray:
        return self._exposed(self.tail)

    def factors(self, chunks) -> tuple[np.ndarray, np.ndarray]:
        """Cost factors of the first and the last global stage (a chunk's nominal work is per_micro / v)."""
        chunk = self.per_micro / np.asarray(chunks, dtype=float)
        return 1.0 + self.head_total / chunk, 1.0 + self.tail_total / chunk


def _by_component(times: dict) -> dict[str, np.ndarray]:
    """Seconds summed over the phases, by component (TP as issued, before the assumed tp_overlap)."""
    names = {"gemm": "gemm", "attention": "attention", "memory_bound": "memory", "tp": "tp"}
    return {k: sum(times[ph][c] for ph in PHASES) for k, c in names.items()}


def _distinct_layers(b, t, sp, recompute, cp, ep, etp) -> tuple[np.ndarray, np.ndarray] | None:
    """(the first candidate of each distinct (b, t, sp, recompute, cp, ep, etp), each candidate's distinct row) when
    every one is a whole-number array of one length (the planner's), else None. layer_times is elementwise in
    these, so computing it per distinct row and taking each candidate's row gives the same numbers."""
    cols = [np.asarray(x) for x in (b, t, sp, cp, ep, etp)]
    rec = np.asarray(recompute)
    n = rec.size
    if rec.ndim != 1 or any(x.shape != (n,) for x in cols) or n < 64:
        return None
    codes = np.full(n, -1, dtype=np.int64)
    for i, mode in enumerate(RECOMPUTE_MODES):
        codes[rec == mode] = i
    if (codes < 0).any():
        return None
    key, radix = codes, len(RECOMPUTE_MODES)
    for x in cols:
        whole = x.astype(np.int64)
        if not np.array_equal(whole, x) or whole.min() < 0:
            return None
        span = int(whole.max()) + 1
        radix *= span
        if radix >= 1 << 62:
            return None
        key = key * span + whole
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return first, inverse.ravel()


def _layer(s: Setting, r, lay: Layouts, fabric: collective.Fabric) -> tuple[dict, dict, dict]:
    """layer_times, embedding_times and output_times (by component) for every candidate, computed once per distinct
    layer setting (a few hundred among 100,000 candidates) and taken back to each candidate's own row."""
    rows = _distinct_layers(lay.micro_batch_size, lay.t, lay.sp, lay.recompute, lay.cp, lay.ep, lay.etp)
    first, inverse = rows if rows is not None else (slice(None), slice(None))
    one = lay.take(first) if rows is not None else lay
    layer = layer_times(s.model, r, one, fabric, s.a.grad_accum_fusion, s.a.moe_capacity, s.recompute_modules)
    b = one.micro_batch_size / np.asarray(one.cp, dtype=float)  # the end stages' tokens per rank, in sequences
    head = _by_component(embedding_times(s.model, r, b, one.t, one.sp, fabric))
    tail = _by_component(output_times(s.model, r, b, one.t, one.sp, fabric, s.a.grad_accum_fusion))
    if s.model.mtp_layers:  # each prediction depth's embedding, projection and output layer (its layer: stage_costs)
        extra = _by_component(mtp_times(s.model, r, b, one.t, one.sp, fabric, s.a.grad_accum_fusion))
        tail = {c: tail[c] + s.model.mtp_layers * extra[c] for c in tail}
    if rows is None:
        return layer, head, tail

    def back(d: dict) -> dict:
        return {c: v[inverse] if np.ndim(v) else v for c, v in d.items()}
    return {ph: back(part) for ph, part in layer.items()}, back(head), back(tail)


def _hide_tp(layer: dict, lay: Layouts, a: Assumptions) -> None:
    """Take off each phase's TP time what the GEMMs hide: Megatron-LM's default backward overlap (not with a split
    backward) and, where the candidate runs it, TP communication overlap (forward, backward and recompute)."""
    hidden = np.where(lay.split, 0.0, layer["hidden"]["tp"]) if a.tp_bwd_overlap else 0.0
    over = lay.tp_comm_overlap & lay.sp
    inside = a.tp_overlap_eff * np.where(lay.split, layer["overlap"]["B_split"], layer["overlap"]["B"])
    layer["B"]["tp"] = layer["B"]["tp"] - np.where(over, np.maximum(hidden, inside), hidden)
    forward = np.where(over, a.tp_overlap_eff * layer["overlap"]["F"], 0.0)
    layer["F"]["tp"] = layer["F"]["tp"] - forward
    layer["R"]["tp"] = layer["R"]["tp"] - np.where(lay.recompute == "full", forward, 0.0)


def stage_costs(s: Setting, lay: Layouts) -> StageCosts:
    """Per-micro-batch costs of the fullest device for arrays of candidates (one entry each).

    lay.split: the schedule splits the backward (zero-bubble), so the weight-gradient GEMMs cannot hide the input
    gradient's TP collectives as Megatron-LM's backward does. cp splits each sequence over cp ranks; ep / etp
    spread the routed experts (core.cost.layer_ops.layer_times); FP8 runs the linear layers at the FP8 peak.
    """
    model, a = s.model, s.a
    r = a.rates(s.gpu, s.fp8)
    fabric = collective.Fabric.of(s.gpu, a)
    layer, head, tail = _layer(s, r, lay, fabric)
    _hide_tp(layer, lay, a)
    share = lay.recompute_share(model, a.ends_in_split)  # full recompute on some of the device's layers only
    if np.any(share < 1.0):
        layer["R"] = {c: v * share for c, v in layer["R"].items()}
    exposed = 1.0 - a.tp_overlap
    per_layer = {ph: sum(layer[ph][c] * (exposed if c == "tp" else 1.0) for c in COMPONENTS) for ph in PHASES}
    head, tail, layers_dev = _end_stages(model, lay, a, _by_component(layer), head, tail)

    # Pipeline sends: one activation per chunk forward, one gradient per chunk backward, each 1/t of the s x b x h
    # tensor when t > 1 (Megatron's scatter/gather, or sequence parallelism), over the link between stages: the
    # network unless the whole t x d x cp x p layout sits in one server (ranks run t fastest, then cp, d, p).
    t, b, cp = lay.t, lay.micro_batch_size, np.asarray(lay.cp, dtype=float)
    inside = t * lay.dp_group * lay.p <= s.gpu.gpus_per_node
    sent = comm.p2p_bytes(model.seq, b, model.hidden, t, t > 1) / cp
    one = collective.cost("send", sent, 2, np.where(inside, 2, 1), fabric).seconds
    send = np.where(lay.p > 1, lay.chunks * one, 0.0)
    if a.pp_overlap:  # Megatron's interleaved schedule: each chunk's send runs behind the next chunk's compute
        send = _overlapped_sends(send, lay.chunks, lay.split, layers_dev * per_layer["F"],
                                 layers_dev * per_layer["B"])

    tf = layers_dev * per_layer["F"] + send
    tb = layers_dev * (per_layer["B"] + per_layer["R"]) + send
    tw = layers_dev * per_layer["W"]
    body = {k: layers_dev * v for k, v in _by_component(layer).items()}
    body["pp"] = 2.0 * send
    compute = sum(layer[ph][c] for ph in ("F", "B", "W") for c in ("gemm", "attention", "memory"))
    return StageCosts(tf, tb, tw, body, head, tail, exposed, compute, _moe_parts(layer, per_layer))


def _end_stages(model: ModelConfig, lay: Layouts, a: Assumptions, one: dict, head: dict, tail: dict
                ) -> tuple[dict, dict, np.ndarray]:
    """(what the first and last stages hold beyond a middle stage's layers, by component; layers on the fullest
    device). `one` is one layer. The last stage also runs each prediction depth's layer; where the ends count in
    the split (core.model.stage_split), the end stages hold fewer layers than the middle ones (head / tail
    may then be negative: lighter than a middle stage)."""
    mid, first, last = lay.stage_layers(model, a.ends_in_split)
    head = {c: head[c] + (first - mid) * one[c] for c in head}
    tail = {c: tail[c] + (last - mid + model.mtp_layers) * one[c] for c in tail}
    return head, tail, mid * lay.chunks


def _moe_parts(layer: dict, per_layer: dict) -> dict[str, np.ndarray]:
    """One MoE layer's compute split as the EP overlap's nodes run it: the MLP node (experts, shared experts)
    and the rest of the layer (attention, norms, router, exposed TP; the backward with what recompute re-runs)."""
    rest = {"F": per_layer["F"], "B": per_layer["B"] + per_layer["R"], "W": per_layer["W"]}
    out = {f"attn_{ph}": np.maximum(rest[ph] - layer["mlp"][ph], 0.0) for ph in rest}
    out.update({f"mlp_{ph}": np.asarray(layer["moe_mlp"][ph], dtype=float) for ph in rest})
    return out


def _overlapped_sends(send, chunks, split, forward, backward) -> np.ndarray:
    """Pipeline-send seconds left on the critical path where Megatron-LM's interleaved schedule (several chunks, an
    unsplit backward) overlaps each chunk's send with the next chunk's forward / backward: what exceeds it."""
    per_chunk = send / chunks
    hidden = np.maximum(per_chunk - np.minimum(forward, backward) / chunks, 0.0) * chunks
    return np.where((np.asarray(chunks) > 1) & ~np.asarray(split, dtype=bool), hidden, send)


def estimate(x: StepInput) -> dict[str, np.ndarray]:
    """Seconds per step by component (BREAKDOWN, summing to step_time_s), tokens/s, MFU and HFU, for the candidates
    of `x` (core.cost.step_input.StepInput)."""
    s, lay, costs = x.setting, x.layouts, x.costs
    model, gpu, a = s.model, s.gpu, s.a
    p, m = lay.p, lay.m
    together = np.asarray(x.last_on_first, dtype=bool) | (p == 1)  # both end stages on the first device
    first_dev = costs.per_micro + costs.head_total + np.where(together, costs.tail_total, 0.0)
    last_dev = np.where(together, 0.0, costs.per_micro + costs.tail_total)
    middle = (p > 2) | (together & (p > 1))  # a device with middle stages only (the busiest where the ends are light)
    middle_dev = np.where(middle, costs.per_micro, 0.0)
    busiest = np.argmax(np.stack(np.broadcast_arrays(first_dev, last_dev, middle_dev)), axis=0)
    busy = m * np.maximum(np.maximum(first_dev, last_dev), middle_dev)
    out = {}
    for k in ("gemm", "attention", "memory_bound", "tp"):
        with_head = costs.body[k] + costs.head[k] + np.where(together, costs.tail[k], 0.0)
        out[k] = m * np.choose(busiest, [with_head, costs.body[k] + costs.tail[k], costs.body[k]])
    tp_comm = out["tp"]
    out["tp"] = tp_comm * costs.tp_exposed
    out["pp"] = m * costs.body["pp"]
    out["bubble"] = busy * x.makespan_factor - busy
    out["straggler"] = busy * x.makespan_factor * scale_loss.slowest_share(s.gpus, gpu.gpus_per_node, a.straggler)

    dp = _data_parallel(x)
    out["dp_latency"], out["dp_bandwidth"] = dp.latency, dp.bandwidth
    out["offload"], moved = _offload_and_shard(x)
    out["optimizer"] = np.where(lay.offload == "none", stream_time(a.rates(gpu), moved), 0.0)
    totals = {}
    for name in ("a2a", "ring"):
        total, exposed = x.extra.get(name, (0.0, 0.0))
        totals[f"{name}_s"] = np.broadcast_to(np.asarray(total, dtype=float), busy.shape)
        out[name] = np.broadcast_to(np.asarray(exposed, dtype=float), busy.shape)

    out["margin"] = a.production_margin * sum(out[k] for k in BREAKDOWN if k != "margin")
    step = sum(out[k] for k in BREAKDOWN)
    result = {COLUMN[k]: v for k, v in out.items()}
    result.update({
        "compute_s": out["gemm"] + out["attention"] + out["memory_bound"],
        "tp_comm_s": tp_comm, "dp_comm_s": dp.total, "dp_exposed_s": dp.exposed, **totals, "busy_s": busy,
        "step_time_s": step, "tokens_per_s": flops.tokens_per_second(s.batch, model.seq, step),
        "tp_ratio": costs.body["tp"] / np.maximum(costs.layer_compute * lay.device_layers(model, a.ends_in_split),
                                                  1e-30),
        **utilization(model, gpu, gpus=s.gpus, batch=s.batch, recompute=lay.recompute, step=step,
                       precision=s.precision, recompute_share=lay.recompute_share(model, a.ends_in_split)),
    })
    return result


def _data_parallel(x: StepInput) -> dp_comm.DpTime:
    """The dense weights' ZeRO / data-parallel collectives over d x cp ranks (t apart: members per server
    gpus_per_node / t; one copy's share under hybrid sharding, then an all-reduce across the copies), plus the routed
    experts' over their own group (core.cost.dp_comm)."""
    s, lay, costs = x.setting, x.layouts, x.costs
    fabric = collective.Fabric.of(s.gpu, s.a)
    bwd = s.a.dp_overlap * (costs.tb + costs.tw)
    chunks = np.where(np.asarray(lay.split, dtype=bool), 1.0, np.asarray(lay.chunks, dtype=float))
    # Interleaved (Megatron-Core's schedules.py: grad_sync_func per model chunk at its last micro-batch): after the
    # first chunk's gradients are final, the other v - 1 chunks still run min(p, m) backward passes each.
    drain = bwd * (chunks - 1.0) * np.minimum(lay.p, lay.m) / chunks
    # ... and before the last chunk's first forward the earlier v - 1 chunks run their first min(p, m) forwards
    # (param_sync_func: chunk k + 1's gather launched with chunk k's first micro-batch; param_sync_ahead).
    fwd = s.a.dp_overlap * costs.tf
    windows = {"fwd": fwd, "bwd": bwd, "chunks": chunks, "drain": drain}
    if s.a.param_sync_ahead:
        windows["lead"] = fwd * (chunks - 1.0) * np.minimum(lay.p, lay.m) / chunks
    layers = lay.device_layers(s.model, s.a.ends_in_split)
    n = lay.shard_group  # d x cp, or one replica's share under hybrid sharding
    grad = s.a.grad_reduce_bytes or s.reduce_bytes
    dense = dp_comm.Group(n, fabric.members_per_node(n, lay.t), x.psi_rank, s.param_bytes, grad)
    out = dp_comm.step_time(lay.zero, lay.reshard, dense, layers, lay.m, windows, fabric, s.a.dp_bucket)
    copies = fabric.members_per_node(lay.replicate, lay.t * n)  # the same shard's holders, a replica apart
    out = out + dp_comm.across_replicas(dense, lay.replicate, copies, layers, bwd, fabric)
    e = x.expert
    if e is not None:
        group = dp_comm.Group(np.asarray(e.group), e.per_node, np.asarray(e.rank, dtype=float), e.param_bytes, grad)
        more = dp_comm.step_time(lay.zero, lay.reshard, group, layers, lay.m, windows, fabric, s.a.dp_bucket)
        more = more + dp_comm.across_replicas(group, lay.replicate, copies, layers, bwd, fabric)
        has = np.asarray(e.rank) > 0
        out = out + dp_comm.DpTime(np.where(has, more.total, 0.0), np.where(has, more.latency, 0.0),
                                   np.where(has, more.bandwidth, 0.0))
    return out


def _offload_and_shard(x: StepInput) -> tuple[np.ndarray, np.ndarray]:
    """(exposed offload seconds, bytes the optimizer step moves over the local shard) for dense weights and
    routed experts, each sharded over its own group under ZeRO >= 1."""
    s, lay = x.setting, x.layouts
    zero, n, m = lay.zero, lay.shard_group, lay.m
    shard = x.psi_rank / np.where(zero >= 1, n, 1)
    off = _offload(lay.offload, zero, n, m, x.psi_rank, s.param_bytes, s.grad_bytes, s.a)
    e = x.expert
    if e is not None:
        rank = np.asarray(e.rank, dtype=float)
        off = off + np.where(rank > 0, _offload(lay.offload, zero, e.group, m, rank, e.param_bytes, s.grad_bytes,
                                                 s.a), 0.0)
        shard = shard + rank / np.where(zero >= 1, e.group, 1)
    moved = shard * (2.0 * s.optimizer_bytes + 18.0 + (8.0 if s.precision == "fp16" else 0.0))
    return off, moved


def utilization(model: ModelConfig, gpu: GpuSpec, *, gpus: int, batch: int, recompute, step,
                precision: str = "bf16", recompute_share=1.0) -> dict[str, np.ndarray]:
    """MFU, HFU (core.cost.flops.MFU_LABEL, HFU_LABEL) and the hardware TFLOP/s per GPU.

    MFU counts model FLOPs with causal attention (the least work a causal model needs), HFU what the kernels run
    (recompute included; the s x s work in full for an eager attention, at the flash kernel's causal share for a
    flash one). Both are over the dense peak of the precision the GEMMs run in (the FP8 peak under FP8), so
    neither can exceed 1 while every operation runs at or below its own peak. `recompute_share`: the share of the
    layers the recompute mode re-runs (full recompute of some layers only), the rest run once.
    """
    recompute = np.asarray(recompute)
    share = float(calibration.fixed()["flash_causal_share"]) if model.flash_attention else 1.0
    hw = np.zeros(recompute.shape)
    for mode in flops.RECOMPUTE:
        hw[recompute == mode] = float(flops.hardware_flops(model, batch, mode, share))
    plain = float(flops.hardware_flops(model, batch, "none", share))
    hw = plain + np.broadcast_to(np.asarray(recompute_share, dtype=float), hw.shape) * (hw - plain)
    model_flops = float(flops.model_flops(model, batch))
    peak = gpu.peak_flops_fp8 if precision == "fp8" and gpu.peak_flops_fp8 is not None else gpu.peak_flops
    return {"mfu": flops.utilization(model_flops, step, gpus, peak),
            "hfu": flops.utilization(hw, step, gpus, peak),
            "tflops_per_gpu": hw / (step * gpus) / 1e12}


def _offload(offload, zero, d, m, psi_rank, param_bytes, grad_bytes, a: Assumptions) -> np.ndarray:
    """Exposed seconds of ZeRO-Offload / ZeRO-Infinity: shards over the host link and the CPU optimizer step."""
    shard = psi_rank / np.where(zero >= 1, d, 1)
    host = a.pcie_bw * GB
    step = shard * (param_bytes + grad_bytes) / host + shard / (a.cpu_adam * 1e9)
    streamed = 2.0 * m * shard * param_bytes / host  # ZeRO-Infinity: fetch the parameter shard for fwd and bwd
    return np.where(offload == "none", 0.0, step) + np.where(offload == "optimizer+params", streamed, 0.0)
