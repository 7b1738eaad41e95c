"""Estimated time of one training step for many candidate layouts at once, from named assumptions.

A step is the pipeline's makespan plus the communication nothing hides:

    compute    hardware FLOPs (core.cost.flops.training_flops, recompute counted) / (G x peak x eff),
               x stage imbalance (the slowest stage holds ceil(L / (p v)) layers per chunk)
    pipeline   (compute + exposed TP) x makespan / busy, the ratio measured by the pipeline simulator for
               (schedule, p, m, v) at the unit costs below: the bubble stretches every op, TP traffic included
    TP         core.cost.comm.tp_layer_bytes per layer and micro-batch over the server link (or the network when the
               TP group spans servers), (1 - tp_overlap) of it exposed
    PP         the fill and drain chains, 2 (p v - 1) sends of core.cost.comm.p2p_bytes plus a latency each
    DP / ZeRO  core.cost.comm.ZERO_COLLECTIVES with ring volumes (core.cost.comm.collective_bytes); each
               collective hides behind dp_overlap of the compute it can overlap (the backward for gradients,
               the forward for parameter gathers) and is repeated per micro-batch where the stage needs it (TIMING)
    offload    host-link traffic of the sharded gradients and parameters, and the CPU optimizer step (exposed)

The bubble *share* of equal stages does not depend on the scale of t_f and t_b, so one unit-cost simulation per
(schedule, p, m, v) serves every model and every recompute mode; recompute lengthens all ops in proportion
(its FLOPs are in `compute`). Every other assumption is a field of `Assumptions` (ranges, defaults and the
one-line justifications live in core.params.planner.ASSUMPTIONS).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from core.cost import comm, flops
from core.model.config import GpuSpec, ModelConfig
from core.params.planner import ASSUMPTIONS, WHY
from core.pipeline.schedules import REGISTRY
from core.units import GB

# Unit op costs the planner simulates with (the Pipeline page's t_f, t_b, t_w). Backward = 2 x forward in FLOPs
# (Narayanan et al.); a split backward gives half to the input gradient and half to the weight gradient,
# the Zero Bubble paper's T_F = T_B = T_W.
UNIT_COSTS = {False: (1.0, 2.0, 0.0), True: (1.0, 1.0, 1.0)}

# When each of a ZeRO stage's collectives (core.cost.comm.ZERO_COLLECTIVES, same order) runs and what hides it:
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


NOT_MODELLED = (
    "Small micro-batches run matrix units less efficiently; the achievable fraction of peak is the same for "
    "every micro-batch size.",
    "Embedding and logit FLOPs are spread evenly over the stages (Megatron can give the first and last stage "
    "fewer layers to balance them).",
    "Optimizer-step time on the GPU, data loading and the small global-norm all-reduce are left out.",
    "Collectives are rings at per-GPU bandwidth; tree or hierarchical algorithms and network congestion are not "
    "modelled.",
)


@dataclass(frozen=True)
class Assumptions:
    """The step-time model's named numbers (see core.params.planner.ASSUMPTIONS for what each means)."""

    eff: float = ASSUMPTIONS["eff"].default
    comm_eff: float = ASSUMPTIONS["comm_eff"].default
    tp_overlap: float = ASSUMPTIONS["tp_overlap"].default
    dp_overlap: float = ASSUMPTIONS["dp_overlap"].default
    p2p_latency_us: float = ASSUMPTIONS["p2p_latency_us"].default
    reserve_frac: float = ASSUMPTIONS["reserve_frac"].default
    pcie_bw: float = ASSUMPTIONS["pcie_bw"].default
    cpu_adam: float = ASSUMPTIONS["cpu_adam"].default
    ep_overlap: float = ASSUMPTIONS["ep_overlap"].default
    moe_capacity: float = ASSUMPTIONS["moe_capacity"].default

    def __post_init__(self) -> None:
        for f in fields(self):
            ASSUMPTIONS[f.name].check(getattr(self, f.name))

    def rows(self) -> list[dict]:
        """Every assumption with its value, unit and justification, for the recommendation and the page."""
        return [{"key": f.name, "label": ASSUMPTIONS[f.name].label, "value": getattr(self, f.name),
                 "unit": ASSUMPTIONS[f.name].unit, "why": WHY.get(f.name, ASSUMPTIONS[f.name].help)}
                for f in fields(self)]


def unit_costs(schedule: str) -> tuple[float, float, float]:
    """(t_f, t_b, t_w) the planner simulates `schedule` with."""
    return UNIT_COSTS[REGISTRY[schedule].split_backward]


def stage_imbalance(layers: int, p, chunks) -> np.ndarray:
    """Slowest stage / average stage: ceil(L / (p v)) layers per chunk on the fullest device."""
    n = np.asarray(p) * np.asarray(chunks)
    return np.ceil(layers / n) * n / layers


def _link(inside, gpu: GpuSpec, a: Assumptions) -> np.ndarray:
    """Achieved bytes/s per GPU: the server link where `inside` is true, the network otherwise."""
    return np.where(inside, gpu.intra_bytes_per_s, gpu.inter_bytes_per_s) * a.comm_eff


def estimate(model: ModelConfig, gpu: GpuSpec, a: Assumptions, *, gpus: int, batch: int, t, p, d, b, m, chunks,
             zero, recompute, sp, offload, psi_rank, makespan_factor, param_bytes: float = 2.0,
             grad_bytes: float = 2.0, cp=1, peak_flops: float | None = None, expert: dict | None = None,
             extra: dict | None = None) -> dict[str, np.ndarray]:
    """Seconds per step by component, tokens/s, MFU and HFU for arrays of candidates (one entry each).

    recompute and offload are arrays of names; makespan_factor is the simulator's makespan / busiest device's
    busy time (1 + the bubble relative to ideal). psi_rank: parameters on one GPU before ZeRO sharding.
    Beyond t x p x d (core.planner.cp_ep supplies these): d is the data-parallel group of the dense weights
    (d x cp under context parallelism); cp divides each GPU's tokens, hence its TP and pipeline traffic;
    peak_flops is the rate the FLOPs run at (FP8's blended peak; MFU stays against the BF16 peak); expert =
    {"rank", "group", "param_bytes", "inside"}: routed-expert parameters per GPU, their ZeRO group, weight bytes,
    whether that group stays in a server; extra = {name: (total s, exposed s)} of further communication (the MoE
    all-to-all, ring attention), each exposed part added to the step.
    """
    t, p, d, b, m, chunks, zero = (np.asarray(x) for x in (t, p, d, b, m, chunks, zero))
    recompute, offload, sp = np.asarray(recompute), np.asarray(offload), np.asarray(sp, dtype=bool)
    cp = np.asarray(cp, dtype=float)
    peak = gpu.peak_flops if peak_flops is None else peak_flops
    rate = peak * a.eff
    n = t.shape[0]

    hw = np.zeros(n)
    tp_bytes_layer = np.zeros(n)
    tp_ratio = np.zeros(n)
    tp_bw = _link(~flops.tp_crosses_node(t, gpu.gpus_per_node), gpu, a)
    for mode in flops.RECOMPUTE:
        sel = recompute == mode
        if sel.any():
            hw[sel] = float(flops.training_flops(model, batch, mode))
            tp_bytes_layer[sel] = comm.tp_layer_bytes(model.seq, b[sel], model.hidden, t[sel], mode)
            tp_ratio[sel] = flops.tp_comm_compute_ratio(model, b[sel], t[sel], tp_bw[sel], rate, mode)
    tp_bytes_layer = tp_bytes_layer / cp
    model_flops = float(flops.model_flops(model, batch))

    compute = flops.compute_time(hw, gpus, peak, a.eff) * stage_imbalance(model.layers, p, chunks)
    layers_dev = np.ceil(model.layers / (p * chunks)) * chunks
    tp_total = tp_bytes_layer * layers_dev * m / tp_bw
    tp_exposed = (1.0 - a.tp_overlap) * tp_total
    pipeline = (compute + tp_exposed) * makespan_factor
    bubble = pipeline - compute - tp_exposed

    pp_bw = _link(t * d * p <= gpu.gpus_per_node, gpu, a)
    send = a.p2p_latency_us * 1e-6 + comm.p2p_bytes(model.seq, b, model.hidden, t, sp) / cp / pp_bw
    pp = np.where(p > 1, 2.0 * (p * chunks - 1) * send, 0.0)

    dp_bw = _link(t * d <= gpu.gpus_per_node, gpu, a)
    dp_total, dp_exposed = _data_parallel(zero, d, m, psi_rank * param_bytes, compute, dp_bw, a)
    off = _offload(offload, zero, d, m, psi_rank, param_bytes, grad_bytes, a)
    if expert is not None:  # routed experts: their own ZeRO group, beside the dense weights' collectives
        rank, group = np.asarray(expert["rank"], dtype=float), np.asarray(expert["group"])
        e_total, e_exposed = _data_parallel(zero, group, m, rank * expert["param_bytes"], compute,
                                            _link(expert["inside"], gpu, a), a)
        dp_total, dp_exposed = dp_total + np.where(rank > 0, e_total, 0.0), dp_exposed + np.where(rank > 0,
                                                                                                   e_exposed, 0.0)
        off = off + np.where(rank > 0, _offload(offload, zero, group, m, rank, expert["param_bytes"], grad_bytes, a),
                             0.0)

    step = pipeline + pp + dp_exposed + off
    more = {}
    for name, (total, exposed) in (extra or {}).items():
        more[f"{name}_s"], more[f"{name}_exposed_s"] = total, exposed
        step = step + exposed
    return {
        "compute_s": compute, "bubble_s": bubble, "tp_comm_s": tp_total, "tp_exposed_s": tp_exposed,
        "tp_ratio": tp_ratio, "pp_exposed_s": pp, "dp_comm_s": dp_total, "dp_exposed_s": dp_exposed,
        "offload_s": off, **more, "step_time_s": step,
        "tokens_per_s": flops.tokens_per_second(batch, model.seq, step),
        "mfu": flops.utilization(model_flops, step, gpus, gpu.peak_flops),
        "hfu": flops.utilization(hw, step, gpus, gpu.peak_flops),
        "tflops_per_gpu": hw / (step * gpus) / 1e12,
    }


def _data_parallel(zero, d, m, buffer_bytes, compute, bw, a: Assumptions) -> tuple[np.ndarray, np.ndarray]:
    """(total, exposed) seconds of the ZeRO stage's collectives over the d data-parallel ranks."""
    fwd_share, bwd_share = 1.0 / 3.0, 2.0 / 3.0  # UNIT_COSTS: backward = 2 x forward
    per_micro = compute / m
    window = {"fwd": a.dp_overlap * per_micro * fwd_share, "bwd": a.dp_overlap * per_micro * bwd_share}
    total = np.zeros(zero.shape)
    exposed = np.zeros(zero.shape)
    for stage in range(4):
        sel = zero == stage
        if not sel.any():
            continue
        per_micro_comm = {"fwd": 0.0, "bwd": 0.0}
        for (collective, _), (when, hides) in zip(comm.ZERO_COLLECTIVES[stage], TIMING[stage], strict=True):
            sec = comm.collective_bytes(collective, buffer_bytes[sel], d[sel]) / bw[sel]
            if when == "step":
                total[sel] += sec
                exposed[sel] += np.maximum(sec - window[hides][sel], 0.0)
            else:
                per_micro_comm[hides] = per_micro_comm[hides] + sec
        for hides, sec in per_micro_comm.items():
            total[sel] += m[sel] * sec
            exposed[sel] += m[sel] * np.maximum(sec - window[hides][sel], 0.0)
    return total, exposed


def _offload(offload, zero, d, m, psi_rank, param_bytes, grad_bytes, a: Assumptions) -> np.ndarray:
    """Exposed seconds of ZeRO-Offload / ZeRO-Infinity: shards over the host link and the CPU optimizer step."""
    shard = psi_rank / np.where(zero >= 1, d, 1)
    host = a.pcie_bw * GB
    step = shard * (param_bytes + grad_bytes) / host + shard / (a.cpu_adam * 1e9)
    streamed = 2.0 * m * shard * param_bytes / host  # ZeRO-Infinity: fetch the parameter shard for fwd and bwd
    return np.where(offload == "none", 0.0, step) + np.where(offload == "optimizer+params", streamed, 0.0)
