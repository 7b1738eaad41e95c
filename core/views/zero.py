"""Everything the ZeRO page and `python -m core zero` show for one parameter set, as plain data.

`build(ZeroParams(...))` (core.views.zero_report) is the per-stage report both print, so a number checked through
the CLI is the number on the page; `zero_view` adds what the page draws around it (stacked bars, with the
activations and working buffers when asked, the curve against N_d, Table 1, communication). Both ask the one
memory function (core.memory.per_gpu) the planner asks, with the same records, so a planner row and the ZeRO page
its link opens show the same bytes per GPU made of the same parts. Optional parts (a stage/offload pair, DeepSpeed's
node split, the activation simulation) become notes, so the rest of the view still draws. Bytes throughout;
GB/GiB only when formatted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from core.cost import comm
from core.errors import InputError
from core.memory import deepspeed_estimate, device_activations, equivalence, experts, fit, fsdp, per_gpu
from core.memory import states as memory
from core.memory.offload import PARAM_OFFLOADS
from core.model import counts, presets, stage_split
from core.params import zero_page
from core.params.memory import ZERO, ZeroParams
from core.params.pipeline import PIPELINE
from core.pipeline.result import PipelineParams, simulate
from core.pipeline.schedules import chunks_per_device
from core.pipeline.timeline import end_counts, weighted_ends
from core.units import GB
from core.views.zero_report import (
    ActInputs,
    Shape,
    ZeroReport,
    build,
    custom_shape,
    memory_config,
    preset_shape,
    smallest_nd,
    stage_modes,
)

__all__ = ["DS_ZERO2", "PAPER_NAMES", "STAGE_KEYS", "STAGE_LABELS", "ActInfo", "ActInputs", "Equivalence", "Shape",
           "StageBar", "ZeroReport", "ZeroView", "build", "equivalence_demo", "from_inputs", "fsdp_table",
           "preset_expert_params", "preset_gpu", "preset_moe_note", "preset_note", "preset_params", "preset_shape",
           "stage_title", "zero_view"]

STAGE_KEYS, STAGE_LABELS, PAPER_NAMES = memory.STAGE_KEYS, memory.STAGE_LABELS, memory.PAPER_NAMES
stage_title = memory.stage_title
Equivalence = equivalence.Equivalence
DS_ZERO2 = deepspeed_estimate.ZERO2_FORMULA  # which DeepSpeed ZeRO-2 formula is which (the page names both)
TABLE1_ND = (1, 4, 16, 64, 256, 1024)  # the columns of the ZeRO paper's Table 1
CURVE_ND_MAX = 1 << 16


# --- presets --------------------------------------------------------------------------------------------------

def preset_note(key: str) -> str:
    """One line naming a preset model's shape and its source (plain data from assets/models.json)."""
    m = presets.model(key)
    return (f"{m.name}: L = {m.layers}, h = {m.hidden}, a = {m.heads}, s = {m.seq}, V = {m.vocab}. "
            f"Source: {m.source}")


def preset_params(key: str) -> int:
    return ZERO["params"].parse(presets.model(key).params)


def preset_expert_params(key: str) -> int:
    """A preset's routed-expert parameters (0 for a dense model), scaled like its total (core.model.config)."""
    return ZERO["expert_params"].parse(round(presets.model(key).expert_params))


def preset_moe_note(key: str) -> str:
    """Total against active parameters of a mixture-of-experts preset ('' for a dense one)."""
    m = presets.model(key)
    if not m.is_moe:
        return ""
    return (f"Mixture of experts: {m.params / 1e9:,.1f}B parameters in total, {m.params_active / 1e9:,.1f}B active "
            f"per token ({m.moe.top_k} of {m.moe.experts} routed experts{' + shared' if m.moe.shared else ''} in "
            f"{m.moe_layers} of {m.layers} layers); {m.expert_params / 1e9:,.1f}B are routed experts, spread over "
            "ep GPUs.")


def preset_gpu(key: str) -> dict:
    g = presets.gpu(key)
    return {"gpu_mem": ZERO["gpu_mem"].parse(g.mem_gb), "gpus_per_node": ZERO["gpus_per_node"].parse(g.gpus_per_node),
            "bw": ZERO["bw"].parse(g.inter_gbs),
            "device_mem": ZERO["device_mem"].parse(round(g.capacity_bytes / GB, 4))}


def from_inputs(v: Mapping[str, Any]) -> tuple[ZeroParams, Shape, ActInputs | None]:
    """The ZeRO page's inputs (by URL key, as core.params.zero_page names them) as core's parameters.

    A named model sets Psi, the shape and (unless typed) the largest module and the embedding, a named GPU its
    memory, GPUs per node and bandwidth; "custom" takes the typed values. Raises InputError for a combination
    ZeroParams refuses.
    """
    zero = {k: v[k] for k in ZERO if k in v}
    named = {("micro_batch_size" if k == "mb" else k): v[k] for k in zero_page.ACT if k in v}  # URL key mb
    act = ActInputs(**named) if v["act"] else None
    if v["model"] != "custom":
        zero["params"] = preset_params(v["model"])
        zero["expert_params"] = preset_expert_params(v["model"])
        model = presets.model(v["model"])
        if not zero.get("largest_layer"):  # 0: not given; a named model knows its largest module
            zero["largest_layer"] = counts.largest_module_params(model)
        if zero.get("split") == "embedding-on-ends" and not zero.get("embedding"):  # ... and its embedding
            zero["embedding"] = model.vocab * model.hidden
        shape = preset_shape(v["model"], v.get("seq", 0))
    else:
        shape = custom_shape(v)
    if v["gpu"] != "custom":
        zero.update(preset_gpu(v["gpu"]))
    return ZeroParams(**zero), shape, act


def fsdp_table(psi: int, nd: int, layers: int, block_params: float, min_params: int, prefetch: bool,
               bpp: memory.BytesPerParam) -> pd.DataFrame:
    """The FSDP tab: one row per wrap policy (root-only, per block, min-params), core.memory.fsdp.wrap_comparison."""
    return fsdp.wrap_comparison(psi, nd, layers, block_params, min_params, prefetch, **bpp.kwargs())


def equivalence_demo(ranks: int, steps: int, size: int, seed: int, clip: float) -> equivalence.Equivalence:
    """The Equivalence tab: sharded and replicated Adam side by side (core.memory.equivalence.demonstrate)."""
    return equivalence.demonstrate(ranks, steps, size, seed, clip)


# --- the page's view ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StageBar:
    """One bar of the stacked chart: bytes on one GPU by part (core.memory.per_gpu's), and whether it fits."""

    key: str
    label: str
    offload: str
    params: float
    grads: float
    optimizer: float
    working: float  # a gathered layer streamed through the GPU (ZeRO-Infinity)
    activations: float
    cpu_per_node: float
    total: float
    fits: bool
    smallest_nd: float  # with the activations, nan when offloading, inf when never
    headroom: float = 0.0  # usable bytes left after everything above (negative: short by that much)
    nvme_per_node: float = 0.0  # the nvme offload's bytes on each node's drives
    title: str = ""  # 'ZeRO-1 (P_os)': the stage with the ZeRO paper's name
    expert_params: float = 0.0  # routed experts' share of params / grads / optimizer (included in `total`)
    expert_grads: float = 0.0
    expert_optimizer: float = 0.0
    gathered: float = 0.0  # ZeRO-3's gathered layers and experts (with the activations and working buffers)
    framework: float = 0.0  # a framework's buffers, step excess, allocator reserve and process overhead (with them)


@dataclass(frozen=True)
class ActInfo:
    """The activations of the view: the schedule's micro-batches in flight on each end stage (the pipeline
    simulator's), the layers a device holds, and each end stage's bytes by term."""

    schedule: str
    p: int
    m: int
    v: int
    inflight: float  # on the first stage's device (the most, for every schedule but the V shapes' last)
    inflight_last: float
    last_on_first: bool
    layers_per_device: float
    per_layer: float  # one layer, one micro-batch
    first_stage: dict[str, float]  # by term, with "moe_and_ring" (MoE expert activations, ring attention)
    last_stage: dict[str, float] | None
    peak: float
    worst: str  # "first", "last" or "middle" (a middle device: where the ends count in the split)
    modes: dict[str, float]  # per-layer bytes of every Korthikanti mode, for comparison
    inflight_middle: float = 0.0  # the most on any other device
    middle_stage: dict[str, float] | None = None  # that device's bytes by term, where it is counted

    @property
    def report(self) -> dict:  # the Activations tab's numbers, by name
        return {"per_layer": self.per_layer, "layers_per_stage": self.layers_per_device, "peak": self.peak,
                "modes": self.modes, "first_stage": self.first_stage, "last_stage": self.last_stage,
                "middle_stage": self.middle_stage}


@dataclass(frozen=True)
class ZeroView:
    report: ZeroReport
    bars: tuple[StageBar, ...]
    limits: dict[int, float]
    curve: pd.DataFrame
    table1: pd.DataFrame
    comm: pd.DataFrame
    act: ActInfo | None
    notes: tuple[str, ...]
    gpu_bytes: float  # the whole GPU memory, before any reserve
    units_note: str = ""  # Psi counts values (core.cost.comm.volume_units_note)


def in_flight(a: ActInputs, p: int, ends: tuple[float, float] | None = None) -> per_gpu.InFlight:
    """Micro-batches each end stage holds under the schedule, from the pipeline simulator (the schedule's order
    alone sets them: the same counts the planner's simulation keeps for its rows, core.planner.simulation, the end
    devices weighted by their chunks' layers where the ends take layer slots: `ends`, stage_split.end_ratios);
    InputError when the simulator refuses the schedule or p is beyond it."""
    if p > PIPELINE["p"].hi:
        raise InputError(f"activations: the pipeline simulator covers p <= {PIPELINE['p'].hi:g}; p = {p} is "
                         "left without activations")
    try:
        result = simulate(PipelineParams(schedule=a.schedule, p=p, m=a.m, v=a.v))
    except InputError as exc:
        raise InputError(f"activations: {exc}") from None
    s, held = result.schedule, result.timeline.peak_inflight
    last = int(np.argwhere(s.stage_map == s.num_stages - 1)[0, 0])  # the device of the last stage
    first, last_held, middle, first_stage, last_stage = end_counts(held, result.timeline.kind,
                                                                   result.timeline.stage, last)
    if ends is not None and s.stages_per_device > 1 and not (last == 0 and p > 1):
        weighted = weighted_ends(result.timeline, s.num_stages, s.stages_per_device, last, ends)
        if np.isfinite(weighted[0]):
            first, last_held = weighted
    return per_gpu.InFlight(first, last_held, last == 0 and p > 1, middle, first_stage, last_stage)


def _end_ratios(q, shape: Shape, a: ActInputs) -> tuple[float, float] | None:
    """The end stages' layers over a middle one's where the embedding and the loss take layer slots (as the planner
    weighs its rows' end devices), else None."""
    chunks = chunks_per_device(a.schedule, a.v)
    if not (q.ends_in_split and q.split == "embedding-on-ends") or q.p < 2 or chunks < 2:
        return None
    return stage_split.end_ratios(shape.layers, shape.mtp_layers, q.p, chunks)


def _act_info(cfg: per_gpu.MemoryConfig, a: ActInputs, p: int) -> ActInfo:
    from core.memory import activations

    ends = device_activations.end_stages(cfg)
    shape = device_activations.activation_shape(cfg)
    first = {k: float(x) for k, x in ends.first.items()} | {"moe_and_ring": float(ends.first_extra)}
    first["total"] = float(ends.first_total)
    last = None
    if not bool(ends.both_on_first):
        last = {k: float(x) for k, x in ends.last.items()} | {"moe_and_ring": float(ends.last_extra)}
        last["total"] = float(ends.last_total)
    modes = activations.modes_table(shape.seq, shape.micro_batch_size, shape.hidden, shape.heads, shape.t, shape.cp,
                                    shape.fp8, shape.attn_width)
    middle = None
    if ends.middle is not None and float(ends.middle_total) > 0:  # a middle device counted: its terms too
        middle = {k: float(x) for k, x in ends.middle.items()} | {"moe_and_ring": float(ends.middle_extra)}
        middle["total"] = float(ends.middle_total)
    inf = cfg.inflight
    return ActInfo(a.schedule, p, a.m, a.v, float(inf.first), float(inf.last), bool(inf.last_on_first),
                   float(ends.layers_per_device), float(shape.per_layer()), first, last, float(ends.peak),
                   str(ends.worst), dict(zip(modes["mode"], modes["per layer [bytes]"], strict=True)),
                   float(inf.middle), middle)


def _notes(q: ZeroParams, shape: Shape, act: ActInputs | None, rep: ZeroReport) -> list[str]:
    notes = []
    if not q.largest_layer and (q.deepspeed or q.offload in PARAM_OFFLOADS):
        notes.append(f"Largest layer is 0, so DeepSpeed's stage-3 estimate and the layer ZeRO-Infinity gathers count "
                     f"nothing for it. Enter the largest module's parameters (Offload, reserve and cluster): for a "
                     f"transformer usually the embedding, V x h = {shape.vocab * shape.hidden:,}.")
    if act is not None and act.schedule == "dualpipe":
        notes.append("DualPipe runs the pipeline in both directions, so every device holds two stages' parameters, "
                     "gradients and optimizer state: twice the model states drawn here (they assume one stage per "
                     "device, as DualPipeV and every other schedule do).")
    if rep.expert_rank:
        notes.append(f"Mixture of experts: {q.expert_params:,} routed-expert parameters over ep = {q.ep}, "
                     f"etp = {q.etp or q.t} ({rep.expert_rank:,.0f} per GPU, ZeRO over {rep.expert_group:,.0f} "
                     "ranks) are drawn hatched; the curve adds them, Table 1 and the communication table count the "
                     "dense part.")
    return notes


def _reports(q: ZeroParams, shape: Shape, notes: list[str]) -> ZeroReport:
    """The per-stage report of every stage (a single stage's refusal and DeepSpeed's node split become notes)."""
    rep = build(replace(q, stage="all", deepspeed=False), shape)
    if q.stage != "all":
        try:  # a single stage refuses an offload it cannot do (the "all" view falls back per stage)
            build(replace(q, deepspeed=False), shape)
        except InputError as exc:
            notes.append(str(exc))
    if q.deepspeed:
        try:  # DeepSpeed's estimate needs N_d to be whole nodes
            rep = build(replace(q, stage="all"), shape)
        except InputError as exc:
            notes.append(str(exc))
    return rep


def zero_view(q: ZeroParams, shape: Shape, act: ActInputs | None) -> ZeroView:
    """Every number of the ZeRO page's main view, all stages side by side (the page caches it per input).

    Without `act`: model states only, the ZeRO paper's accounting (ZeRO-Infinity's streamed module included).
    With it: also the activations and ZeRO-3's gathered layers, the whole of core.memory.per_gpu, as the planner
    counts a row."""
    notes: list[str] = []
    rep = _reports(q, shape, notes)
    got, info = rep.states, None
    if act is not None:
        try:
            cfg = memory_config(q, shape, act, in_flight(act, q.p, _end_ratios(q, shape, act)))
            got = per_gpu.per_gpu(cfg)
            info = _act_info(cfg, act, q.p)
        except InputError as exc:
            notes.append(str(exc))
    notes += _notes(q, shape, act, rep)
    kw = rep.bytes_per_param.kwargs()
    bars = tuple(_bar(q, rep, got, s, info is not None) for s in range(4))
    nds = sorted({*TABLE1_ND, q.nd})
    return ZeroView(
        report=rep, bars=bars, limits=memory.max_reduction(**kw),
        curve=_curve(rep, q, kw if q.accounting == "textbook" else rep.dense_kw),
        table1=memory.table1(rep.psi_rank, nds, **kw),
        comm=comm.zero_comm_table(rep.psi_rank, q.nd, q.bw, rep.bytes_per_param.param_bytes),
        act=info, notes=tuple(notes), gpu_bytes=float(fit.usable_bytes(q.compared_gb)),
        units_note=comm.volume_units_note(rep.bytes_per_param.param_bytes),
    )


def _bar(q: ZeroParams, rep: ZeroReport, got: per_gpu.GpuMemory, s: int, everything: bool) -> StageBar:
    """One stage's bar: per_gpu's parts on the GPU; with `everything`, its activations and gathered layers too, and
    in a framework's accounting what the framework adds (buffers, the optimizer step's excess, the allocator's
    reserve, the CUDA context and NCCL): the device's total."""
    mode = stage_modes(q)[s]
    framework = float(got.total[s] - got.allocated[s] + got.buffers[s] + got.step[s]) if everything else 0.0
    extra = float(got.activations[s] + got.gathered[s]) + framework if everything else 0.0
    total = float(got.states_on_gpu[s] + got.working[s]) + extra
    need = float("nan") if mode != "none" else smallest_nd(q, rep.psi_rank, rep.expert_rank, s, rep.usable,
                                                           rep.dense_kw, extra)
    return StageBar(STAGE_KEYS[s], STAGE_LABELS[s], mode, float(got.params[s]), float(got.grads[s]),
                    float(got.optimizer[s]), float(got.working[s]),
                    float(got.activations[s]) if everything else 0.0, float(got.cpu[s]) * q.gpus_per_node, total,
                    bool(total <= rep.usable), need, rep.usable - total, float(got.nvme[s]) * q.gpus_per_node,
                    stage_title(s), float(got.expert_params[s]), float(got.expert_grads[s]),
                    float(got.expert_optimizer[s]), float(got.gathered[s]) if everything else 0.0, framework)


def _curve(rep: ZeroReport, q: ZeroParams, kw: dict) -> pd.DataFrame:
    """Bytes per GPU against N_d for every stage; routed experts add their states sharded over their group."""
    curve = memory.curve_vs_nd(rep.psi_rank, max(CURVE_ND_MAX, q.nd), 80, **kw)
    if rep.expert_rank:
        scale = rep.expert_group / q.nd  # the experts' ZeRO group per data-parallel rank (1 / ep for etp = t)
        group = np.maximum(curve["nd"].to_numpy() * scale, 1.0)
        for s, key in enumerate(STAGE_KEYS):
            curve[f"{key} [bytes]"] += experts.sharded_states(rep.expert_rank, group, s, **kw).total
            curve[f"{key} floor [bytes]"] += float(memory.split_coefficients(s, **kw)[0]) * rep.expert_rank
    return curve
