"""What the step-time model takes, as records: the named assumptions, the question's constants (model, GPU, cluster,
batch, bytes per parameter) and the candidate layouts as arrays, one entry per candidate.

core.cost.step_time.stage_costs(setting, layouts) and estimate(StepInput(...)) take these whole, as Megatron-core
passes its TransformerConfig: a new switch is one field here, not a keyword threaded through every call.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import numpy as np

from core.cost.rates import Rates
from core.memory.states import shard_group
from core.model import stage_split
from core.model.config import GpuSpec, ModelConfig
from core.params.memory import RECOMPUTE_MODULES_DEFAULT
from core.params.planner import ASSUMPTIONS, WHY


@dataclass(frozen=True)
class Assumptions:
    """The step-time model's named numbers (see core.params.planner.ASSUMPTIONS for what each means)."""

    eff: float = ASSUMPTIONS["eff"].default
    mem_eff: float = ASSUMPTIONS["mem_eff"].default
    flash_kernel: str = ASSUMPTIONS["flash_kernel"].default
    compute_stack: str = ASSUMPTIONS["compute_stack"].default
    release: str = ASSUMPTIONS["release"].default
    megatron_deepspeed_share: float = ASSUMPTIONS["megatron_deepspeed_share"].default
    comm_eff: float = ASSUMPTIONS["comm_eff"].default
    tp_overlap: float = ASSUMPTIONS["tp_overlap"].default
    tp_overlap_eff: float = ASSUMPTIONS["tp_overlap_eff"].default
    tp_bwd_overlap: bool = ASSUMPTIONS["tp_bwd_overlap"].default
    grad_accum_fusion: bool = ASSUMPTIONS["grad_accum_fusion"].default
    dp_overlap: float = ASSUMPTIONS["dp_overlap"].default
    pp_overlap: bool = ASSUMPTIONS["pp_overlap"].default
    cp_comm: str = ASSUMPTIONS["cp_comm"].default
    param_sync_ahead: bool = ASSUMPTIONS["param_sync_ahead"].default
    ends_in_split: bool = ASSUMPTIONS["ends_in_split"].default
    dp_bucket: float = ASSUMPTIONS["dp_bucket"].default
    grad_reduce_bytes: float = ASSUMPTIONS["grad_reduce_bytes"].default
    ring_loss: float = ASSUMPTIONS["ring_loss"].default
    straggler: float = ASSUMPTIONS["straggler"].default
    production_margin: float = ASSUMPTIONS["production_margin"].default
    p2p_latency_us: float = ASSUMPTIONS["p2p_latency_us"].default
    net_latency_us: float = ASSUMPTIONS["net_latency_us"].default
    reserve_frac: float = ASSUMPTIONS["reserve_frac"].default
    pcie_bw: float = ASSUMPTIONS["pcie_bw"].default
    cpu_adam: float = ASSUMPTIONS["cpu_adam"].default
    ep_overlap: float = ASSUMPTIONS["ep_overlap"].default
    moe_dispatcher: str = ASSUMPTIONS["moe_dispatcher"].default
    moe_a2a_overlap: bool = ASSUMPTIONS["moe_a2a_overlap"].default
    moe_overlap_sync_us: float = ASSUMPTIONS["moe_overlap_sync_us"].default
    moe_fp8_dispatch: bool = ASSUMPTIONS["moe_fp8_dispatch"].default
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

    @property
    def compute_share(self) -> float:
        """The share of the calibrated compute rates the training software runs at (compute_stack)."""
        return self.megatron_deepspeed_share if self.compute_stack == "megatron-deepspeed" else 1.0

    def rates(self, gpu: GpuSpec, fp8: bool = False) -> Rates:
        return Rates.of(gpu, self.eff, self.mem_eff, fp8, self.flash_kernel, self.compute_share, self.release)


@dataclass(frozen=True)
class Setting:
    """What every candidate of one question shares: the model, the GPU and its cluster, the assumptions, the global
    batch, the precision and the bytes of each model-state component per parameter."""

    model: ModelConfig
    gpu: GpuSpec
    a: Assumptions = field(default_factory=Assumptions)
    gpus: int = 1
    batch: int = 1
    precision: str = "bf16"
    param_bytes: float = 2.0  # the dense weights as the collectives move them (1 for FP8 GEMM weights)
    grad_bytes: float = 2.0
    optimizer_bytes: float = 12.0
    reduce_bytes: float = 4.0  # bytes per gradient value the data-parallel reduction moves when grad_reduce_bytes is 0
    recompute_modules: tuple = RECOMPUTE_MODULES_DEFAULT  # what selective recompute re-runs (Megatron-LM's names)

    @property
    def fp8(self) -> bool:
        return self.precision == "fp8"


# Layouts' fields that are arrays of numbers (the rest are arrays of names or booleans)
_NUMBERS = ("t", "p", "d", "cp", "ep", "etp", "b", "chunks", "m", "zero", "replicate")


@dataclass(frozen=True, eq=False)
class Layouts:
    """Candidate layouts as arrays (one entry each; scalars broadcast). d is the dense weights' data-parallel degree
    without cp (their ZeRO group is d x cp, `dp_group`); etp 0 = t; chunks = v for interleaved schedules; split: the
    schedule splits the backward (zero-bubble); reshard: ZeRO-3 gathers the parameters again for the backward
    (FSDP reshard_after_forward); tp_comm_overlap: the TP collectives run inside their GEMMs (Megatron-LM
    --tp-comm-overlap)."""

    t: np.ndarray | int = 1
    p: np.ndarray | int = 1
    d: np.ndarray | int = 1
    cp: np.ndarray | int = 1
    ep: np.ndarray | int = 1
    etp: np.ndarray | int = 0
    micro_batch_size: np.ndarray | int = 1
    chunks: np.ndarray | int = 1
    m: np.ndarray | int = 1
    zero: np.ndarray | int = 0
    recompute: np.ndarray | str = "none"
    sp: np.ndarray | bool = False
    split: np.ndarray | bool = False
    offload: np.ndarray | str = "none"
    reshard: np.ndarray | bool = True
    tp_comm_overlap: np.ndarray | bool = False
    replicate: np.ndarray | int = 1  # hybrid sharding: ZeRO within d x cp / replicate ranks, all-reduce across copies
    recompute_layers: np.ndarray | int = 0  # full recompute on the first N layers of each chunk only (0: all)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = np.asarray(getattr(self, f.name))
            if f.name in ("sp", "split", "reshard", "tp_comm_overlap"):
                value = value.astype(bool)
            object.__setattr__(self, f.name, value)
        if np.any(self.etp == 0):
            object.__setattr__(self, "etp", np.where(self.etp == 0, self.t, self.etp))

    @property
    def size(self) -> int:
        return int(np.broadcast(*(getattr(self, f.name) for f in fields(self))).size)

    @property
    def dp_group(self) -> np.ndarray:
        """Ranks the dense weights' gradients are reduced over: d x cp (Megatron's data-parallel-with-cp group)."""
        return self.d * self.cp

    @property
    def shard_group(self) -> np.ndarray:
        """Ranks ZeRO shards over and its gathers and reduce-scatters span: d x cp, or one replica's share (HSDP)."""
        return shard_group(self.d, self.cp, self.replicate)

    def stage_layers(self, model: ModelConfig, ends_in_split: bool = False) -> tuple[np.ndarray, ...]:
        """(layers of the fullest middle stage, of the first, of the last) of the p x chunks stages
        (core.model.stage_split)."""
        return stage_split.stage_layers(model.layers, self.p, self.chunks, model.mtp_layers, ends_in_split)

    def device_layers(self, model: ModelConfig, ends_in_split: bool = False) -> np.ndarray:
        """Transformer layers on the fullest device: v chunks of the fullest middle stage's count (ceil(L / (p v))
        when the layers split evenly)."""
        return self.stage_layers(model, ends_in_split)[0] * self.chunks

    def recompute_share(self, model: ModelConfig, ends_in_split: bool = False) -> np.ndarray:
        """Share of the fullest device's layers its recompute mode re-runs: 1, or under full recompute with
        `recompute_layers` N the first N of each chunk (Megatron-LM's --recompute-method block)."""
        n = np.asarray(self.device_layers(model, ends_in_split), dtype=float)
        rec = stage_split.recomputed(n, self.chunks, self.recompute_layers, self.recompute)
        return np.where(n > 0, rec / np.maximum(n, 1.0), 1.0)

    def take(self, rows) -> Layouts:
        """The same layouts at `rows` (a mask or indices); scalar fields stay scalars."""
        n = self.size
        return replace(self, **{f.name: (v if v.ndim == 0 else np.broadcast_to(v, (n,))[rows])
                                for f in fields(self) for v in (getattr(self, f.name),)})

    def numbers(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in _NUMBERS}


@dataclass(frozen=True, eq=False)
class ExpertShard:
    """Routed-expert parameters per GPU, the ZeRO group they are sharded over, their bytes per weight, and the
    group's members in one server (core.planner.cp_ep)."""

    rank: np.ndarray
    group: np.ndarray
    param_bytes: float
    per_node: np.ndarray


@dataclass(frozen=True, eq=False)
class StepInput:
    """Everything `estimate` needs for a set of candidates: the setting, their layouts and per-micro-batch stage
    costs (core.cost.step_time.StageCosts), what the simulator measured (makespan / busiest device's busy time;
    whether the last stage sits on the first device), the dense parameters on one GPU before ZeRO sharding, the
    routed experts, and the MoE all-to-all / ring attention seconds {"a2a" | "ring": (total, exposed)}."""

    setting: Setting
    layouts: Layouts
    costs: object  # core.cost.step_time.StageCosts (defined there; the record only carries it)
    makespan_factor: np.ndarray
    last_on_first: np.ndarray
    psi_rank: np.ndarray
    expert: ExpertShard | None = None
    extra: dict = field(default_factory=dict)
