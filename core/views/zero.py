"""Everything the ZeRO page and `python -m core zero` show for one parameter set, as plain data.

`build(ZeroParams(...))` is the per-stage report both print, so a number checked through the CLI is the number on
the page; `zero_view` adds what the page draws around it (stacked bars with activations, the curve against N_d,
Table 1, communication). Optional parts (a stage/offload pair, DeepSpeed's node split, the activation
simulation) become notes, so the rest of the view still draws. Bytes throughout; GB/GiB only when formatted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from core.cost import comm
from core.errors import InputError
from core.memory import activations, deepspeed_estimate, experts, fit
from core.memory import states as memory
from core.memory.offload import PARAM_OFFLOADS, nvme_traffic, placement, supported
from core.model import counts, presets
from core.params import zero_page
from core.params.memory import ZERO, ZeroParams
from core.params.pipeline import PIPELINE
from core.pipeline.result import peak_inflight
from core.units import GB, TB

DS_ZERO2 = deepspeed_estimate.ZERO2_FORMULA  # which DeepSpeed ZeRO-2 formula is which (the page names both)
TABLE1_ND = (1, 4, 16, 64, 256, 1024)  # the columns of the ZeRO paper's Table 1
CURVE_ND_MAX = 1 << 16


@dataclass(frozen=True)
class ZeroReport:
    inputs: ZeroParams
    psi_rank: float  # parameters per GPU before ZeRO (after the t x p split, most loaded stage; dense part)
    bytes_per_param: memory.BytesPerParam
    usable: float  # bytes per GPU for model states (and activations, which this report leaves out)
    stages: dict[str, dict]  # STAGE_KEYS -> row
    expert_rank: float = 0.0  # routed-expert parameters per GPU (/ t p ep); their ZeRO group is N_d / ep

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"key": k} | row for k, row in self.stages.items()])

    def as_json(self) -> dict:
        return {k: {f: _plain(v) for f, v in row.items()} for k, row in self.stages.items()}


def _plain(value):
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def selected_stages(stage: str) -> tuple[int, ...]:
    return tuple(range(4)) if stage == "all" else (int(stage),)


def _check_experts(q: ZeroParams) -> None:
    if q.expert_params >= q.params:
        raise InputError(f"expert_params: {q.expert_params:,} must be less than Psi = {q.params:,} (attention, "
                         "embeddings and norms are not experts)")
    if q.ep > 1 and not q.expert_params:
        raise InputError(f"ep = {q.ep}: expert parallelism needs routed-expert parameters (expert_params > 0)")
    if q.nd % q.ep:
        raise InputError(f"ep = {q.ep} must divide N_d = {q.nd} (Megatron folds expert parallelism into the "
                         "data-parallel ranks)")
    if q.split == "embedding-on-ends" and q.embedding > q.params - q.expert_params:
        raise InputError("embedding: cannot exceed the dense parameters Psi - expert_params")


def _expert_part(q: ZeroParams, expert_rank: float, stage: int, mode: str, kw: dict) -> dict[str, float]:
    """One stage's routed-expert states on one GPU (sharded over N_d / ep), placed like the dense ones."""
    if not expert_rank:
        return {c: 0.0 for c in (*memory.COMPONENTS, "total", "gpu", "cpu_per_node", "nvme_per_node")}
    group = q.nd // q.ep
    states = memory.model_states(expert_rank, group, stage, **kw)
    placed = placement(expert_rank, group, stage, mode, **kw)
    out = {c: float(placed.gpu[c]) for c in memory.COMPONENTS}
    return out | {"total": float(states.total), "gpu": float(placed.gpu_total),
                  "cpu_per_node": float(placed.cpu_per_node(q.gpus_per_node)),
                  "nvme_per_node": float(placed.nvme_per_node(q.gpus_per_node))}


def build(q: ZeroParams) -> ZeroReport:
    """Per-stage breakdown: components, GPU/CPU placement with offload, communication, fit, smallest N_d.
    With routed experts (expert_params > 0) the dense part is split and sharded as before and the experts are
    divided by t p ep and sharded over N_d / ep (core.memory.experts); `expert_*` columns hold their bytes."""
    fit.check_gpu_count(q.t, q.p, q.nd, q.gpus)
    if q.split == "embedding-on-ends" and not q.embedding:
        raise InputError("embedding: the embedding-on-ends split needs the embedding size (vocabulary x hidden)")
    _check_experts(q)
    bpp = memory.preset(q.optimizer, q.precision, q.k)
    kw = bpp.kwargs()
    psi = float(memory.params_per_rank(q.params - q.expert_params, q.t, q.p, q.split, q.embedding))
    if psi < 1:  # say it in the inputs the user typed, not in the derived per-rank count
        raise InputError(f"t x p = {q.t:,} x {q.p:,} = {q.t * q.p:,} ranks split Psi = {q.params - q.expert_params:,} "
                         f"dense parameters into less than one per rank; lower t or p, or raise params")
    expert_rank = q.expert_params / (q.t * q.p * q.ep)
    usable = float(fit.usable_bytes(q.gpu_mem, q.reserve, q.reserve_frac))
    dp_total = float(memory.model_states(psi, q.nd, 0, **kw).total)
    dp_total += _expert_part(q, expert_rank, 0, "none", kw)["total"]
    chosen = selected_stages(q.stage)
    if q.offload != "none" and len(chosen) == 1:
        placement(psi, q.nd, chosen[0], q.offload, **kw)  # raises the clear error for an unsupported pair
    stages = {}
    for s in chosen:
        states = memory.model_states(psi, q.nd, s, **kw)
        mode = supported(q.offload, s)
        placed = placement(psi, q.nd, s, mode, largest_layer=per_rank_layer(q), **kw)
        ex = _expert_part(q, expert_rank, s, mode, kw)
        sent = float(comm.zero_comm_bytes(psi, q.nd, s, bpp.param_bytes))
        if expert_rank:
            sent += float(comm.zero_comm_bytes(expert_rank, q.nd // q.ep, s, bpp.param_bytes))
        gpu = float(placed.gpu_total) + ex["gpu"]
        need = (float(experts.min_nd(psi, expert_rank, q.ep, s, usable, **kw)) if expert_rank
                else float(fit.min_nd(psi, s, usable, **kw))) if mode == "none" else float("nan")
        nvme = float(placed.nvme_per_node(q.gpus_per_node)) + ex["nvme_per_node"]
        total = float(states.total) + ex["total"]
        row = {
            "params": float(states.params), "grads": float(states.grads), "optimizer": float(states.optimizer),
            "expert_params": ex["params"], "expert_grads": ex["grads"], "expert_optimizer": ex["optimizer"],
            "expert_total": ex["total"], "total": total, "offload": mode, "gpu": gpu,
            "cpu_per_node": float(placed.cpu_per_node(q.gpus_per_node)) + ex["cpu_per_node"], "nvme_per_node": nvme,
            "nvme_fits": bool(nvme <= q.nvme_tb * TB), "nvme_seconds": _nvme_seconds(q, psi, s, mode, bpp),
            "floor": float(memory.floor_bytes(psi, s, **kw))
            + float(memory.split_coefficients(s, **kw)[0]) * expert_rank,
            "reduction_vs_dp": dp_total / total,
            "comm_psi": float(comm.zero_volume_multiple(s)), "comm_bytes": sent,
            "comm_seconds": _comm_seconds(q, psi, expert_rank, s, bpp.param_bytes),
            "usable": usable, "headroom": usable - gpu, "fits": bool(gpu <= usable), "smallest_nd": need,
        }
        if q.deepspeed and s in (2, 3):
            row |= _deepspeed(q, s)
        stages[memory.STAGE_KEYS[s]] = row
    return ZeroReport(q, psi, bpp, usable, stages, expert_rank)


def _nvme_seconds(q: ZeroParams, psi: float, stage: int, mode: str, bpp: memory.BytesPerParam) -> float:
    """Time per step (one micro-batch) to move every rank's NVMe traffic through the node's drives."""
    if mode != "nvme":
        return 0.0
    traffic = nvme_traffic(psi, q.nd, bpp.k, bpp.param_bytes) * min(q.gpus_per_node, q.nd)
    return float(traffic / (q.nvme_bw * GB))


def per_rank_layer(q: ZeroParams) -> float:
    return q.largest_layer / q.t


def _deepspeed(q: ZeroParams, stage: int) -> dict:
    """DeepSpeed's estimate for the same N_d, split into nodes of gpus_per_node (it knows nothing of t, p)."""
    per_node = min(q.gpus_per_node, q.nd)
    if q.nd % per_node:
        raise InputError(f"deepspeed: N_d = {q.nd} is not a whole number of {per_node}-GPU nodes")
    nodes = q.nd // per_node
    offload = q.offload != "none"
    formula = "4 x largest layer + 18 Psi / GPUs, DeepSpeed's code (stage3.py)"
    if stage == 2:
        est = deepspeed_estimate.zero2(q.params, per_node, nodes, offload,
                                       revision=deepspeed_estimate.FORMULA_REVISION[q.deepspeed_zero2])
        formula = deepspeed_estimate.ZERO2_FORMULA[q.deepspeed_zero2]
    else:
        est = deepspeed_estimate.zero3(q.params, q.largest_layer, per_node, nodes, offload,
                                       q.offload in PARAM_OFFLOADS, True)
    return {"deepspeed_gpu": float(est["gpu"]), "deepspeed_cpu_per_node": float(est["cpu"]),
            "deepspeed_formula": formula}


@dataclass(frozen=True)
class Shape:
    """What activations and FSDP units need of the model (from a preset or the custom inputs)."""

    hidden: int
    heads: int
    layers: int
    seq: int
    vocab: int
    block_params: float


def preset_shape(key: str) -> Shape:
    m = presets.model(key)
    block = counts.largest_layer_params(m)
    return Shape(m.hidden, m.heads, m.layers, m.seq, m.vocab, block)


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
            "bw": ZERO["bw"].parse(g.inter_gbs)}


@dataclass(frozen=True)
class ActInputs:
    mb: int
    sequence_parallel: bool
    recompute: str
    schedule: str
    m: int
    v: int
    cp: int = 1  # context parallelism: every activation term / cp


def from_inputs(v: Mapping[str, Any]) -> tuple[ZeroParams, Shape, ActInputs | None]:
    """The ZeRO page's inputs (by URL key, as core.params.zero_page names them) as core's parameters.

    A named model sets Psi, the shape and (unless typed) the largest module, a named GPU its memory, GPUs per
    node and bandwidth; "custom" takes the typed values. Raises InputError for a combination ZeroParams refuses.
    """
    zero = {k: v[k] for k in ZERO if k in v}
    if v["model"] != "custom":
        zero["params"] = preset_params(v["model"])
        zero["expert_params"] = preset_expert_params(v["model"])
        if not zero.get("largest_layer"):  # 0: not given; a named model knows its largest module
            zero["largest_layer"] = counts.largest_module_params(presets.model(v["model"]))
        shape = preset_shape(v["model"])
    else:
        shape = Shape(**{k: v[k] for k in zero_page.CUSTOM})
    if v["gpu"] != "custom":
        zero.update(preset_gpu(v["gpu"]))
    act = ActInputs(**{k: v[k] for k in zero_page.ACT}) if v["act"] else None
    return ZeroParams(**zero), shape, act


@dataclass(frozen=True)
class StageBar:
    """One bar of the stacked chart: bytes on one GPU by component, and whether it fits."""

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


@dataclass(frozen=True)
class ActInfo:
    schedule: str
    p: int
    m: int
    v: int
    inflight: float
    report: dict


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


def _activations(q: ZeroParams, shape: Shape, a: ActInputs) -> ActInfo:
    if q.p > PIPELINE["p"].hi:
        raise InputError(f"activations: the pipeline simulator covers p <= {PIPELINE['p'].hi:g}; p = {q.p} is "
                         "left without activations")
    inflight = peak_inflight(a.schedule, q.p, a.m, a.v)
    rep = activations.report(shape.seq, a.mb, shape.hidden, shape.heads, shape.layers, q.p, inflight, q.t,
                             a.sequence_parallel, a.recompute, shape.vocab, cp=a.cp)
    return ActInfo(a.schedule, q.p, a.m, a.v, inflight, rep)


def zero_view(q: ZeroParams, shape: Shape, act: ActInputs | None) -> ZeroView:
    """Every number of the ZeRO page's main view, all stages side by side (the page caches it per input)."""
    notes: list[str] = []
    rep = build(replace(q, stage="all", deepspeed=False))
    if q.stage != "all":
        try:  # a single stage refuses an offload it cannot do (the "all" view falls back per stage)
            build(replace(q, deepspeed=False))
        except InputError as exc:
            notes.append(str(exc))
    if q.deepspeed:
        try:  # DeepSpeed's estimate needs N_d to be whole nodes
            rep = build(replace(q, stage="all"))
        except InputError as exc:
            notes.append(str(exc))
    kw = rep.bytes_per_param.kwargs()
    info = None
    if act is not None:
        try:
            info = _activations(q, shape, act)
        except InputError as exc:
            notes.append(str(exc))
    acts = info.report["peak"] if info else 0.0
    if not q.largest_layer and (q.deepspeed or q.offload in PARAM_OFFLOADS):
        notes.append(f"Largest layer is 0, so DeepSpeed's stage-3 estimate and the layer ZeRO-Infinity gathers count "
                     f"nothing for it. Enter the largest module's parameters (Offload, reserve and cluster): for a "
                     f"transformer usually the embedding, V x h = {shape.vocab * shape.hidden:,}.")
    if act is not None and act.schedule == "dualpipe":
        notes.append("DualPipe runs the pipeline in both directions, so every device holds two stages' parameters, "
                     "gradients and optimizer state: twice the model states drawn here (they assume one stage per "
                     "device, as DualPipeV and every other schedule do).")
    layer = per_rank_layer(q)
    bars = []
    for s, key in enumerate(memory.STAGE_KEYS):
        mode = supported(q.offload, s)
        placed = placement(rep.psi_rank, q.nd, s, mode, largest_layer=layer, **kw)
        ex = _expert_part(q, rep.expert_rank, s, mode, kw)
        both = fit.together(float(placed.gpu_total) + ex["gpu"], acts, rep.usable)
        if mode != "none":
            need = np.nan
        elif rep.expert_rank:
            need = experts.min_nd(rep.psi_rank, rep.expert_rank, q.ep, s, rep.usable, other_bytes=acts, **kw)
        else:
            need = float(fit.min_nd(rep.psi_rank, s, rep.usable, other_bytes=acts, **kw))
        bars.append(StageBar(key, memory.STAGE_LABELS[s], mode, float(placed.gpu["params"]),
                             float(placed.gpu["grads"]), float(placed.gpu["optimizer"]), float(placed.working),
                             acts, float(placed.cpu_per_node(q.gpus_per_node)) + ex["cpu_per_node"], both["total"],
                             both["fits"], need, rep.usable - both["total"],
                             float(placed.nvme_per_node(q.gpus_per_node)) + ex["nvme_per_node"],
                             memory.stage_title(s), ex["params"], ex["grads"], ex["optimizer"]))
    nds = sorted({*TABLE1_ND, q.nd})
    if rep.expert_rank:
        notes.append(f"Mixture of experts: {q.expert_params:,} routed-expert parameters over ep = {q.ep} "
                     f"({rep.expert_rank:,.0f} per GPU, ZeRO over N_d / ep = {q.nd // q.ep} ranks) are drawn "
                     "hatched; the curve adds them, Table 1 and the communication table count the dense part.")
    return ZeroView(
        report=rep, bars=tuple(bars), limits=memory.max_reduction(**kw),
        curve=_curve(rep, q, kw),
        table1=memory.table1(rep.psi_rank, nds, **kw),
        comm=comm.zero_comm_table(rep.psi_rank, q.nd, q.bw, rep.bytes_per_param.param_bytes),
        act=info, notes=tuple(notes), gpu_bytes=float(fit.usable_bytes(q.gpu_mem)),
        units_note=comm.volume_units_note(rep.bytes_per_param.param_bytes),
    )


def _curve(rep: ZeroReport, q: ZeroParams, kw: dict) -> pd.DataFrame:
    """Bytes per GPU against N_d for every stage; routed experts add their states sharded over N_d / ep."""
    curve = memory.curve_vs_nd(rep.psi_rank, max(CURVE_ND_MAX, q.nd), 80, **kw)
    if rep.expert_rank:
        group = np.maximum(curve["nd"].to_numpy() / q.ep, 1.0)
        for s, key in enumerate(memory.STAGE_KEYS):
            curve[f"{key} [bytes]"] += experts.sharded_states(rep.expert_rank, group, s, **kw).total
            curve[f"{key} floor [bytes]"] += float(memory.split_coefficients(s, **kw)[0]) * rep.expert_rank
    return curve


def _comm_seconds(q: ZeroParams, psi: float, expert_rank: float, stage: int, bytes_per_value: float) -> float:
    """The stage's collectives per step as NCCL runs them (core.cost.comm.zero_comm_seconds, the communication
    table's own numbers), the routed experts' over N_d / ep ranks beside the dense weights'."""
    out = comm.zero_comm_seconds(psi, q.nd, stage, q.bw, bytes_per_value)
    if expert_rank:
        out += comm.zero_comm_seconds(expert_rank, q.nd // q.ep, stage, q.bw, bytes_per_value)
    return out
