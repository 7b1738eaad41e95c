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
       + dp + optimizer + offload                   after the pipeline drains

Every named number is a field of `Assumptions` (core.params.planner.ASSUMPTIONS) or of core.cost.rates.Rates
(assets/efficiency.json).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from core.cost import comm, flops
from core.cost.gemm import stream_time
from core.cost.layer_ops import COMPONENTS, PHASES, embedding_times, layer_times, output_times
from core.cost.rates import Rates
from core.model.config import GpuSpec, ModelConfig
from core.params.memory import RECOMPUTE_MODES
from core.params.planner import ASSUMPTIONS, WHY
from core.units import GB

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


BREAKDOWN = ("gemm", "attention", "memory_bound", "tp", "pp", "bubble", "dp", "a2a", "ring", "optimizer", "offload")
# Each component's column in the planner's frame (TP, PP, DP, the MoE all-to-all and ring attention's K/V
# exchange are the exposed part of that communication).
COLUMN = {"gemm": "gemm_s", "attention": "attention_s", "memory_bound": "memory_bound_s", "tp": "tp_exposed_s",
          "pp": "pp_exposed_s", "bubble": "bubble_s", "dp": "dp_exposed_s", "a2a": "a2a_exposed_s",
          "ring": "ring_exposed_s", "optimizer": "optimizer_s", "offload": "offload_s"}
LABELS = {"gemm": "GEMMs", "attention": "attention core", "memory_bound": "memory-bound ops",
          "tp": "tensor-parallel comm", "pp": "pipeline sends", "bubble": "pipeline bubble",
          "dp": "data-parallel / ZeRO comm", "a2a": "MoE all-to-all", "ring": "ring-attention K/V exchange",
          "optimizer": "optimizer step", "offload": "offload"}

NOT_MODELLED = (
    "Kernel launch gaps, data loading, logging and Python overhead between kernels are not modelled.",
    "Layers are spread as evenly as possible; the fullest stage sets the pace (ceil(L / (p v)) layers per chunk).",
    "Collectives are rings at the link's per-GPU bandwidth times the achievable fraction (a ring spanning servers "
    "uses as many network links per server as it has ranks there); tree algorithms and congestion are not "
    "modelled.",
    "The efficiency fractions are the GPU family's calibration record (assets/efficiency.json: A100, H100 16-bit, "
    "H100 FP8, each fitted on its named set of published runs); a GPU without runs of its own borrows a family's "
    "record, and its preset says so.",
)


@dataclass(frozen=True)
class Assumptions:
    """The step-time model's named numbers (see core.params.planner.ASSUMPTIONS for what each means)."""

    eff: float = ASSUMPTIONS["eff"].default
    mem_eff: float = ASSUMPTIONS["mem_eff"].default
    comm_eff: float = ASSUMPTIONS["comm_eff"].default
    tp_overlap: float = ASSUMPTIONS["tp_overlap"].default
    tp_bwd_overlap: bool = ASSUMPTIONS["tp_bwd_overlap"].default
    grad_accum_fusion: bool = ASSUMPTIONS["grad_accum_fusion"].default
    dp_overlap: float = ASSUMPTIONS["dp_overlap"].default
    pp_overlap: bool = ASSUMPTIONS["pp_overlap"].default
    p2p_latency_us: float = ASSUMPTIONS["p2p_latency_us"].default
    reserve_frac: float = ASSUMPTIONS["reserve_frac"].default
    pcie_bw: float = ASSUMPTIONS["pcie_bw"].default
    cpu_adam: float = ASSUMPTIONS["cpu_adam"].default
    ep_overlap: float = ASSUMPTIONS["ep_overlap"].default
    moe_capacity: float = ASSUMPTIONS["moe_capacity"].default

    def __post_init__(self) -> None:
        for f in fields(self):
            ASSUMPTIONS[f.name].check(getattr(self, f.name))

    @property
    def latency_s(self) -> float:
        return self.p2p_latency_us * 1e-6

    def rows(self, gpu: GpuSpec | None = None, fp8: bool = False) -> list[dict]:
        """Every assumption with its value, unit and justification; with `gpu`, the resolved efficiency
        parameters (calibrated or overridden) replace the 0 = calibrated inputs."""
        out = []
        for f in fields(self):
            if gpu is not None and f.name in ("eff", "mem_eff"):
                continue
            out.append({"key": f.name, "label": ASSUMPTIONS[f.name].label, "value": getattr(self, f.name),
                        "unit": ASSUMPTIONS[f.name].unit, "why": WHY.get(f.name, ASSUMPTIONS[f.name].help)})
        if gpu is not None:
            out = self.rates(gpu, fp8).rows(gpu) + out
        return out

    def rates(self, gpu: GpuSpec, fp8: bool = False) -> Rates:
        return Rates.of(gpu, self.eff, self.mem_eff, fp8)


def link(inside, gpu: GpuSpec, a: Assumptions, ranks_per_node=1) -> np.ndarray:
    """Achieved bytes/s per GPU: the server link where `inside`, else the network, one NIC per rank of the ring in
    each server (NCCL runs as many rings as a server has ranks in the group), at most the server link."""
    network = np.minimum(gpu.inter_bytes_per_s * np.maximum(ranks_per_node, 1), gpu.intra_bytes_per_s)
    return np.where(inside, gpu.intra_bytes_per_s, network) * a.comm_eff


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

    def subset(self, mask) -> StageCosts:
        """The same costs for the candidates where `mask` is true."""
        def pick(d):
            return {k: np.broadcast_to(v, mask.shape)[mask] for k, v in d.items()}
        return StageCosts(self.tf[mask], self.tb[mask], self.tw[mask], pick(self.body), pick(self.head),
                          pick(self.tail), self.tp_exposed, np.broadcast_to(self.layer_compute, mask.shape)[mask])

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


def stage_costs(model: ModelConfig, gpu: GpuSpec, a: Assumptions, *, t, p, d, b, chunks, recompute, sp,
                split=False, cp=1, ep=1, etp=None, fp8: bool = False) -> StageCosts:
    """Per-micro-batch costs of the fullest device for arrays of candidates (one entry each).

    split: the schedule splits the backward (zero-bubble), so the weight-gradient GEMMs cannot hide the input
    gradient's TP collectives as Megatron-LM's backward does. cp splits each sequence over cp ranks; ep / etp
    spread the routed experts (core.cost.layer_ops.layer_times); fp8 runs the linear layers at the FP8 peak.
    """
    t, p, d, b, chunks = (np.asarray(x) for x in (t, p, d, b, chunks))
    sp, recompute, split = np.asarray(sp, dtype=bool), np.asarray(recompute), np.asarray(split, dtype=bool)
    cp = np.asarray(cp, dtype=float)
    r = a.rates(gpu, fp8)
    tp_bw = link(t <= gpu.gpus_per_node, gpu, a)
    lat = a.latency_s
    etp = t if etp is None else etp
    rows = _distinct_layers(b, t, sp, recompute, cp, ep, etp)
    if rows is None:
        layer = layer_times(model, r, b, t, sp, recompute, tp_bw, lat, a.grad_accum_fusion, cp=cp, ep=ep, etp=etp,
                            capacity=a.moe_capacity)
    else:  # once per distinct layer setting (a few hundred among 100,000 candidates), then each candidate's own
        first, inverse = rows
        b_, t_, sp_, rec_, bw_, cp_, ep_, etp_ = (np.asarray(x)[first] for x in (b, t, sp, recompute, tp_bw, cp, ep,
                                                                                 etp))
        layer = layer_times(model, r, b_, t_, sp_, rec_, bw_, lat, a.grad_accum_fusion, cp=cp_, ep=ep_, etp=etp_,
                            capacity=a.moe_capacity)
        layer = {ph: {c: v[inverse] if np.ndim(v) else v for c, v in part.items()} for ph, part in layer.items()}
    if a.tp_bwd_overlap:
        layer["B"]["tp"] = layer["B"]["tp"] - np.where(split, 0.0, layer["hidden"]["tp"])
    exposed = 1.0 - a.tp_overlap
    per_layer = {ph: sum(layer[ph][c] * (exposed if c == "tp" else 1.0) for c in COMPONENTS) for ph in PHASES}
    layers_dev = np.ceil(model.layers / (p * chunks)) * chunks

    # Pipeline sends: one activation per chunk forward, one gradient per chunk backward, each 1/t of the s x b x h
    # tensor when t > 1 (Megatron's scatter/gather, or sequence parallelism), over the link between stages: the
    # network unless the whole t x d x p layout sits in one server (ranks run t fastest, then d, then p).
    pp_bw = link(t * d * p <= gpu.gpus_per_node, gpu, a)
    sent = comm.p2p_bytes(model.seq, b, model.hidden, t, t > 1) / cp
    send = np.where(p > 1, chunks * (sent / pp_bw + lat), 0.0)
    if a.pp_overlap:  # Megatron's interleaved schedule: each chunk's send runs behind the next chunk's compute
        send = _overlapped_sends(send, chunks, split, layers_dev * per_layer["F"], layers_dev * per_layer["B"])

    tf = layers_dev * per_layer["F"] + send
    tb = layers_dev * (per_layer["B"] + per_layer["R"]) + send
    tw = layers_dev * per_layer["W"]
    body = {k: layers_dev * v for k, v in _by_component(layer).items()}
    body["pp"] = 2.0 * send
    head = _by_component(embedding_times(model, r, b / cp, t, sp, tp_bw, lat))
    tail = _by_component(output_times(model, r, b / cp, t, sp, tp_bw, lat, a.grad_accum_fusion))
    compute = sum(layer[ph][c] for ph in ("F", "B", "W") for c in ("gemm", "attention", "memory"))
    return StageCosts(tf, tb, tw, body, head, tail, exposed, compute)


def _overlapped_sends(send, chunks, split, forward, backward) -> np.ndarray:
    """Pipeline-send seconds left on the critical path where Megatron-LM's interleaved schedule (several chunks, an
    unsplit backward) overlaps each chunk's send with the next chunk's forward / backward: what exceeds it."""
    per_chunk = send / chunks
    hidden = np.maximum(per_chunk - np.minimum(forward, backward) / chunks, 0.0) * chunks
    return np.where((np.asarray(chunks) > 1) & ~np.asarray(split, dtype=bool), hidden, send)


def estimate(model: ModelConfig, gpu: GpuSpec, a: Assumptions, costs: StageCosts, *, gpus: int, batch: int, t, p, d,
             m, chunks, zero, recompute, offload, psi_rank, makespan_factor, last_on_first, precision: str = "bf16",
             param_bytes: float = 2.0, grad_bytes: float = 2.0, optimizer_bytes: float = 12.0,
             expert: dict | None = None, extra: dict | None = None) -> dict[str, np.ndarray]:
    """Seconds per step by component (BREAKDOWN, summing to step_time_s), tokens/s, MFU and HFU.

    makespan_factor: the simulator's makespan / busiest device's busy time; last_on_first: the schedule puts the
    last stage on the first device (V shapes). psi_rank: parameters on one GPU before ZeRO sharding; d: the dense
    weights' data-parallel group (d x cp under context parallelism). expert = {"rank", "group", "param_bytes",
    "inside"}: routed-expert parameters per GPU, their ZeRO group, weight bytes, whether that group stays in a
    server (core.planner.cp_ep). extra = {"a2a" | "ring": (total s, exposed s)}: the MoE all-to-all and ring
    attention's K/V exchange per step, their exposed part added after the pipeline.
    """
    t, p, d, m, chunks, zero = (np.asarray(x) for x in (t, p, d, m, chunks, zero))
    offload, last_on_first = np.asarray(offload), np.asarray(last_on_first, dtype=bool)
    first_dev = costs.per_micro + costs.head_total + np.where(last_on_first | (p == 1), costs.tail_total, 0.0)
    last_dev = np.where(last_on_first | (p == 1), 0.0, costs.per_micro + costs.tail_total)
    first_busiest = first_dev >= last_dev
    busy = m * np.maximum(first_dev, last_dev)
    out = {}
    for k in ("gemm", "attention", "memory_bound", "tp"):
        with_head = costs.body[k] + costs.head[k] + np.where(last_on_first | (p == 1), costs.tail[k], 0.0)
        out[k] = m * np.where(first_busiest, with_head, costs.body[k] + costs.tail[k])
    tp_comm = out["tp"]
    out["tp"] = tp_comm * costs.tp_exposed
    out["pp"] = m * costs.body["pp"]
    pipeline = busy * makespan_factor
    out["bubble"] = pipeline - busy

    dp_bw = link(t * d <= gpu.gpus_per_node, gpu, a, gpu.gpus_per_node // np.maximum(t, 1))
    windows = {"fwd": a.dp_overlap * costs.tf, "bwd": a.dp_overlap * (costs.tb + costs.tw)}
    dp_total, out["dp"] = _data_parallel(zero, d, m, psi_rank * param_bytes, windows, dp_bw, a)
    shard = psi_rank / np.where(zero >= 1, d, 1)
    out["offload"] = _offload(offload, zero, d, m, psi_rank, param_bytes, grad_bytes, a)
    if expert is not None:  # routed experts: their own ZeRO group, beside the dense weights' collectives
        rank, group = np.asarray(expert["rank"], dtype=float), np.asarray(expert["group"])
        e_total, e_exposed = _data_parallel(zero, group, m, rank * expert["param_bytes"], windows,
                                            link(expert["inside"], gpu, a), a)
        dp_total = dp_total + np.where(rank > 0, e_total, 0.0)
        out["dp"] = out["dp"] + np.where(rank > 0, e_exposed, 0.0)
        out["offload"] = out["offload"] + np.where(
            rank > 0, _offload(offload, zero, group, m, rank, expert["param_bytes"], grad_bytes, a), 0.0)
        shard = shard + rank / np.where(zero >= 1, group, 1)
    moved = shard * (2.0 * optimizer_bytes + 18.0 + (8.0 if precision == "fp16" else 0.0))
    out["optimizer"] = np.where(offload == "none", stream_time(a.rates(gpu), moved), 0.0)
    totals = {}
    for name in ("a2a", "ring"):
        total, exposed = (extra or {}).get(name, (0.0, 0.0))
        totals[f"{name}_s"] = np.broadcast_to(np.asarray(total, dtype=float), t.shape)
        out[name] = np.broadcast_to(np.asarray(exposed, dtype=float), t.shape)

    step = sum(out[k] for k in BREAKDOWN)
    result = {COLUMN[k]: v for k, v in out.items()}
    result.update({
        "compute_s": out["gemm"] + out["attention"] + out["memory_bound"],
        "tp_comm_s": tp_comm, "dp_comm_s": dp_total, **totals, "busy_s": busy, "step_time_s": step,
        "tokens_per_s": flops.tokens_per_second(batch, model.seq, step),
        "tp_ratio": costs.body["tp"] / np.maximum(costs.layer_compute * np.ceil(model.layers / (p * chunks)) * chunks,
                                                  1e-30),
        **utilization(model, gpu, gpus=gpus, batch=batch, recompute=recompute, step=step, precision=precision),
    })
    return result


def utilization(model: ModelConfig, gpu: GpuSpec, *, gpus: int, batch: int, recompute, step,
                precision: str = "bf16") -> dict[str, np.ndarray]:
    """MFU, HFU (core.cost.flops.MFU_LABEL, HFU_LABEL) and the hardware TFLOP/s per GPU.

    MFU counts model FLOPs with causal attention (the least work a causal model needs), HFU what the kernels run
    (recompute included; the s x s work in full for an eager attention, at the flash kernel's causal share for a
    flash one). Both are over the dense peak of the precision the GEMMs run in (the FP8 peak under FP8), so
    neither can exceed 1 while every operation runs at or below its own peak.
    """
    recompute = np.asarray(recompute)
    share = Rates.of(gpu).flash_causal_share if model.flash_attention else 1.0
    hw = np.zeros(recompute.shape)
    for mode in flops.RECOMPUTE:
        hw[recompute == mode] = float(flops.hardware_flops(model, batch, mode, share))
    model_flops = float(flops.model_flops(model, batch))
    peak = gpu.peak_flops_fp8 if precision == "fp8" and gpu.peak_flops_fp8 is not None else gpu.peak_flops
    return {"mfu": flops.utilization(model_flops, step, gpus, peak),
            "hfu": flops.utilization(hw, step, gpus, peak),
            "tflops_per_gpu": hw / (step * gpus) / 1e12}


def _data_parallel(zero, d, m, buffer_bytes, windows, bw, a: Assumptions) -> tuple[np.ndarray, np.ndarray]:
    """(total, exposed) seconds of the ZeRO stage's collectives over the d data-parallel ranks."""
    total = np.zeros(zero.shape)
    exposed = np.zeros(zero.shape)
    for stage in range(4):
        sel = zero == stage
        if not sel.any():
            continue
        per_micro = {"fwd": 0.0, "bwd": 0.0}
        for (collective, _), (when, hides) in zip(comm.ZERO_COLLECTIVES[stage], TIMING[stage], strict=True):
            sec = comm.collective_bytes(collective, buffer_bytes[sel], d[sel]) / bw[sel] + np.where(
                d[sel] > 1, a.latency_s, 0.0)
            if when == "step":
                total[sel] += sec
                exposed[sel] += np.maximum(sec - windows[hides][sel], 0.0)
            else:
                per_micro[hides] = per_micro[hides] + sec
        for hides, sec in per_micro.items():
            total[sel] += m[sel] * sec
            exposed[sel] += m[sel] * np.maximum(sec - windows[hides][sel], 0.0)
    return total, exposed


def _offload(offload, zero, d, m, psi_rank, param_bytes, grad_bytes, a: Assumptions) -> np.ndarray:
    """Exposed seconds of ZeRO-Offload / ZeRO-Infinity: shards over the host link and the CPU optimizer step."""
    shard = psi_rank / np.where(zero >= 1, d, 1)
    host = a.pcie_bw * GB
    step = shard * (param_bytes + grad_bytes) / host + shard / (a.cpu_adam * 1e9)
    streamed = 2.0 * m * shard * param_bytes / host  # ZeRO-Infinity: fetch the parameter shard for fwd and bwd
    return np.where(offload == "none", 0.0, step) + np.where(offload == "optimizer+params", streamed, 0.0)
