"""The ZeRO page's inputs beyond core's tables, and its cached core calls.

Inputs: the page uses core.params.memory's ZERO table as it is (its keys are the URL keys: params, nd, k,
gpu_mem, ...), the activation and FSDP keys of ACTIVATIONS / FSDP, and a few page-only keys (PAGE): a model
and a GPU preset, activations on/off, the display unit and the open tab. Two adjustments, both derived from
the core specs rather than written anew:
- a custom model starts from the ZeRO paper's 7.5B model (assets/models.json), so switching the preset to
  "custom" keeps the numbers on screen consistent (Psi 7.5e9 with that model's shape);
- the equivalence demo's ranges are narrowed so one run stays well under a second on a 2-core machine.

Calls: `zero_view` assembles everything the page draws for one parameter set (one cached call per rerun),
`fsdp_view` and `equivalence` are cached separately because they have their own inputs. Each raises
core's InputError for inputs core refuses; optional parts (a stage/offload pair, DeepSpeed's node split,
the activation simulation) are reported as notes instead, so the rest of the page still draws.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from core import activations, comm, equivalence, fit, flops, fsdp, memory, presets, zero_report
from core.errors import InputError
from core.offload import placement, supported
from core.params import Spec, table
from core.params.memory import ACTIVATIONS, EQUIVALENCE, FSDP, ZERO, ZeroParams
from core.params.pipeline import PIPELINE
from core.pipeline import peak_inflight
from ui.cache import cached

PAPER_MODEL = presets.model("zero-7.5b")
TABLE1_ND = (1, 4, 16, 64, 256, 1024)  # the columns of the ZeRO paper's Table 1
CURVE_ND_MAX = 1 << 16
TABS = ("Table 1 and communication", "Activations", "DeepSpeed", "FSDP wrapping", "Equivalence")
UNITS = ("GB", "GiB")

PAGE = table(
    Spec("model", "choice", "custom", choices=(*presets.model_keys(), "custom"), label="Model",
         help="A published model sets Psi and the shape used for activations and FSDP units; custom lets you "
              "type them (it starts from the ZeRO paper's 7.5B model)."),
    Spec("gpu", "choice", "custom", choices=(*presets.gpu_keys(), "custom"), label="GPU",
         help="A datasheet GPU sets the memory, GPUs per node and the per-GPU network bandwidth; custom lets "
              "you type them."),
    Spec("act", "bool", False, label="Add activations",
         help="Add the peak activations of the most loaded pipeline stage (Korthikanti et al. 2022), with the "
              "micro-batches in flight measured by the pipeline simulator."),
    Spec("unit", "choice", "GB", choices=UNITS, label="Unit",
         help="GB = 1e9 bytes (papers, vendors); GiB = 2^30 bytes (what DeepSpeed and nvidia-smi print)."),
    Spec("tab", "choice", TABS[0], choices=TABS, label="Section", help="The detail section on screen."),
)


def _paper_default(spec: Spec, value) -> Spec:
    return replace(spec, default=spec.parse(value))


# The custom model's shape, starting at the ZeRO paper's 7.5B model.
CUSTOM = table(
    _paper_default(ACTIVATIONS["hidden"], PAPER_MODEL.hidden),
    _paper_default(ACTIVATIONS["heads"], PAPER_MODEL.heads),
    _paper_default(ACTIVATIONS["layers"], PAPER_MODEL.layers),
    _paper_default(ACTIVATIONS["seq"], PAPER_MODEL.seq),
    _paper_default(ACTIVATIONS["vocab"], PAPER_MODEL.vocab),
    FSDP["block_params"],
)
ACT = table(*(ACTIVATIONS[k] for k in ("mb", "sequence_parallel", "recompute", "schedule", "m", "v")))
WRAP = table(FSDP["min_params"], FSDP["prefetch"])
DEMO = table(
    replace(EQUIVALENCE["ranks"], hi=16),
    replace(EQUIVALENCE["steps"], hi=100),
    replace(EQUIVALENCE["size"], hi=1000),
    EQUIVALENCE["seed"],
    EQUIVALENCE["clip"],
)


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
    block = float(flops.layer_matmul_params(m.hidden, m.heads, m.kv_heads, m.ffn, m.swiglu))
    return Shape(m.hidden, m.heads, m.layers, m.seq, m.vocab, block)


def preset_note(key: str) -> str:
    """One line naming a preset model's shape and its source (plain data from assets/models.json)."""
    m = presets.model(key)
    return (f"{m.name}: L = {m.layers}, h = {m.hidden}, a = {m.heads}, s = {m.seq}, V = {m.vocab}. "
            f"Source: {m.source}")


def preset_params(key: str) -> int:
    return ZERO["params"].parse(presets.model(key).params)


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
    report: zero_report.ZeroReport
    bars: tuple[StageBar, ...]
    limits: dict[int, float]
    curve: pd.DataFrame
    table1: pd.DataFrame
    comm: pd.DataFrame
    act: ActInfo | None
    notes: tuple[str, ...]
    gpu_bytes: float  # the whole GPU memory, before any reserve


def _activations(q: ZeroParams, shape: Shape, a: ActInputs) -> ActInfo:
    if q.p > PIPELINE["p"].hi:
        raise InputError(f"activations: the pipeline simulator covers p <= {PIPELINE['p'].hi:g}; p = {q.p} is "
                         "left without activations")
    inflight = peak_inflight(a.schedule, q.p, a.m, a.v)
    rep = activations.report(shape.seq, a.mb, shape.hidden, shape.heads, shape.layers, q.p, inflight, q.t,
                             a.sequence_parallel, a.recompute, shape.vocab)
    return ActInfo(a.schedule, q.p, a.m, a.v, inflight, rep)


@cached(max_entries=64)
def zero_view(q: ZeroParams, shape: Shape, act: ActInputs | None) -> ZeroView:
    """Every number of the ZeRO page's main view, all stages side by side (cached per parameter set)."""
    notes: list[str] = []
    rep = zero_report.build(replace(q, stage="all", deepspeed=False))
    if q.stage != "all":
        try:  # a single stage refuses an offload it cannot do (the "all" view falls back per stage)
            zero_report.build(replace(q, deepspeed=False))
        except InputError as exc:
            notes.append(str(exc))
    if q.deepspeed:
        try:  # DeepSpeed's estimate needs N_d to be whole nodes
            rep = zero_report.build(replace(q, stage="all"))
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
    layer = zero_report.per_rank_layer(q)
    bars = []
    for s, key in enumerate(memory.STAGE_KEYS):
        mode = supported(q.offload, s)
        placed = placement(rep.psi_rank, q.nd, s, mode, largest_layer=layer, **kw)
        both = fit.together(placed.gpu_total, acts, rep.usable)
        need = float(fit.min_nd(rep.psi_rank, s, rep.usable, other_bytes=acts, **kw)) if mode == "none" else np.nan
        bars.append(StageBar(key, memory.STAGE_LABELS[s], mode, float(placed.gpu["params"]),
                             float(placed.gpu["grads"]), float(placed.gpu["optimizer"]), float(placed.working),
                             acts, float(placed.cpu_per_node(q.gpus_per_node)), both["total"], both["fits"], need))
    nds = sorted({*TABLE1_ND, q.nd})
    return ZeroView(
        report=rep, bars=tuple(bars), limits=memory.max_reduction(**kw),
        curve=memory.curve_vs_nd(rep.psi_rank, max(CURVE_ND_MAX, q.nd), 80, **kw),
        table1=memory.table1(rep.psi_rank, nds, **kw),
        comm=comm.zero_comm_table(rep.psi_rank, q.nd, q.bw, rep.bytes_per_param.param_bytes),
        act=info, notes=tuple(notes), gpu_bytes=float(fit.usable_bytes(q.gpu_mem)),
    )


@cached(max_entries=64)
def fsdp_view(psi: int, nd: int, layers: int, block_params: float, min_params: int, prefetch: bool,
              kw: tuple[tuple[str, float], ...]) -> pd.DataFrame:
    """core.fsdp.wrap_comparison: one row per wrap policy (root-only, per block, min-params)."""
    return fsdp.wrap_comparison(psi, nd, layers, block_params, min_params, prefetch, **dict(kw))


@cached(max_entries=32)
def equivalence_run(ranks: int, steps: int, size: int, seed: int, clip: float) -> equivalence.Equivalence:
    """core.equivalence.demonstrate: sharded and replicated Adam side by side."""
    return equivalence.demonstrate(ranks, steps, size, seed, clip)

