"""One concrete parallel layout of one model on one GPU type: what the planner picks and the exporters print.

Only rules that make a layout meaningless raise InputError here (degrees that do not multiply out, a batch
that does not split into micro-batches, an offload that needs ZeRO-3, BF16 on a GPU without it). Whether it
fits in memory or runs fast is the planner's business.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import InputError
from core.model.config import GpuSpec, ModelConfig
from core.model.presets import gpu, model
from core.params.memory import ACTIVATIONS, GRAD_DTYPES, LOSS_KERNELS, OPTIMIZER_DTYPES
from core.params.model import CLUSTER
from core.params.pipeline import SEARCH_SCHEDULES
from core.params.planner import CP_COMMS, MOE_DISPATCHERS
from core.pipeline.schedules import REGISTRY
from core.planner.cp_ep_rules import first_reason
from core.planner.factors import chunk_slots

SCHEDULES = SEARCH_SCHEDULES  # the planner's: every registered schedule with a `search` record
RECOMPUTE = ("none", "selective", "full")
OFFLOAD = ("none", "optimizer", "optimizer+params")
PRECISIONS = ("bf16", "fp16", "fp8")  # fp8: FP8 GEMMs on top of BF16 (core.memory.fp8 says which bytes shrink)


@dataclass(frozen=True)
class Layout:
    """t x p x d x cp GPUs (ep and etp regroup them for the experts), the batch split, the memory switches."""

    model: ModelConfig
    gpu: GpuSpec
    t: int
    p: int
    d: int
    global_batch: int
    micro_batch_size: int = 1
    zero_stage: int = 1
    schedule: str = "1f1b"
    v: int = 1
    recompute: str = "none"
    sequence_parallel: bool = False
    offload: str = "none"
    precision: str = "bf16"
    gpus_per_node: int = 0  # 0 = the GPU preset's server size
    cp: int = 1  # context parallelism: each sequence split over cp ranks
    ep: int = 1  # expert parallelism: each MoE layer's routed experts spread over ep ranks
    etp: int = 0  # expert tensor parallelism; 0 = t (Megatron-LM's default)
    replicate: int = 1  # hybrid sharding: ZeRO within d x cp / replicate ranks, that many copies (ZeRO >= 1)
    recompute_layers: int = 0  # full recompute on the first N layers of each stage (chunk) only; 0 = every layer
    reshard: bool = True  # ZeRO-3 frees the gathered parameters after the forward (FSDP reshard_after_forward)
    tp_comm_overlap: bool = False  # TP collectives inside their GEMMs (Megatron-LM --tp-comm-overlap)
    cp_comm: str = "p2p"  # context parallelism's K/V exchange (core.params.planner CP_COMMS)
    moe_dispatcher: str = "alltoall"  # how the expert all-to-all moves tokens (core.cost.expert_comm)
    moe_a2a_overlap: bool = False  # Megatron-Core's batch-level EP overlap (core.cost.moe_overlap)
    ends_in_split: bool = False  # the embedding, loss and MTP depths take layer slots (core.model.stage_split)
    grad_dtype: str = "auto"  # the gradient buffer's precision the plan counted (core.params.memory)
    optimizer_dtype: str = "fp32"  # Adam's moments as the plan counted them
    loss: str = "auto"  # the cross-entropy kernel the plan counted (core.frameworks.loss)
    grouped_gemm: bool = True  # MoE layers through Transformer Engine's grouped GEMM (Megatron-LM --moe-grouped-gemm)
    recompute_modules: tuple = ACTIVATIONS["recompute_modules"].default  # what selective recompute re-runs

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelConfig) or not isinstance(self.gpu, GpuSpec):
            raise InputError("layout needs a ModelConfig and a GpuSpec")
        for name in ("t", "p", "d", "v", "zero_stage", "gpus_per_node", "cp", "ep", "etp", "replicate",
                     "recompute_layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise InputError(f"{name}: expected a whole number, got {value!r}")
        if min(self.t, self.p, self.d, self.v, self.cp, self.ep, self.replicate) < 1 or min(self.etp,
                                                                                          self.recompute_layers) < 0:
            raise InputError("t, p, d, v, cp, ep and replicate must be at least 1 (etp 0 = t; recompute_layers 0 = "
                             "every layer)")
        if self.replicate > 1 and self.zero_stage == 0:
            raise InputError("replicate > 1 (hybrid sharding) needs ZeRO stage 1 or more: ZeRO-0 shards nothing")
        if self.etp == 0:
            object.__setattr__(self, "etp", self.t)
        CLUSTER["gpus"].check(self.n_gpus)
        CLUSTER["batch"].check(self.global_batch)
        CLUSTER["mbs"].check(self.micro_batch_size)
        if self.gpus_per_node == 0:
            object.__setattr__(self, "gpus_per_node", self.gpu.gpus_per_node)
        CLUSTER["gpn"].check(self.gpus_per_node)
        for name, value, choices in (("schedule", self.schedule, SCHEDULES), ("recompute", self.recompute, RECOMPUTE),
                                     ("offload", self.offload, OFFLOAD), ("precision", self.precision, PRECISIONS),
                                     ("cp_comm", self.cp_comm, CP_COMMS),
                                     ("moe_dispatcher", self.moe_dispatcher, MOE_DISPATCHERS),
                                     ("grad_dtype", self.grad_dtype, GRAD_DTYPES),
                                     ("optimizer_dtype", self.optimizer_dtype, OPTIMIZER_DTYPES),
                                     ("loss", self.loss, LOSS_KERNELS)):
            if value not in choices:
                raise InputError(f"{name}: {value!r} is not allowed; choose one of {', '.join(choices)}")
        object.__setattr__(self, "recompute_modules", ACTIVATIONS["recompute_modules"].parse(self.recompute_modules))
        for name in ("sequence_parallel", "reshard", "tp_comm_overlap", "moe_a2a_overlap", "ends_in_split",
                     "grouped_gemm"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"{name}: expected true or false")
        if self.zero_stage not in (0, 1, 2, 3):
            raise InputError(f"zero_stage: {self.zero_stage} is not 0, 1, 2 or 3")
        if self.global_batch % (self.micro_batch_size * self.d):
            raise InputError(f"global batch {self.global_batch} is not a multiple of micro-batch "
                             f"{self.micro_batch_size} x data-parallel {self.d}")
        self._check_chunks()
        if self.model.heads % self.t or self.model.kv_heads % self.t and self.t % self.model.kv_heads:
            raise InputError(f"tensor-parallel {self.t} must divide the {self.model.heads} heads and split the "
                             f"{self.model.kv_heads} key/value heads evenly")
        if self.offload != "none" and self.zero_stage == 0:
            raise InputError("offloading needs ZeRO stage 1 or more (DeepSpeed: offload_optimizer is valid for 1-3)")
        if self.offload == "optimizer+params" and self.zero_stage != 3:
            raise InputError("offloading parameters needs ZeRO stage 3 (DeepSpeed: offload_param is stage 3 only)")
        if self.precision in ("bf16", "fp8") and not self.gpu.bf16:
            raise InputError(f"{self.gpu.name} has no BF16 support; use fp16")
        if self.precision == "fp8" and self.gpu.tflops_fp8 is None:
            raise InputError(f"{self.gpu.name} has no FP8 tensor cores; use bf16 or fp16")
        reason = first_reason(self.model, self.t, self.d, self.cp, self.ep, self.etp, self.replicate)
        if reason:
            raise InputError(reason)

    def _check_chunks(self) -> None:
        entry = REGISTRY[self.schedule]
        if entry.chunks == "v" and self.v < 2:
            raise InputError(f"{self.schedule} needs v >= 2 chunks per device")
        if entry.chunks != "v" and self.v != entry.chunks_per_device(self.v):
            raise InputError(f"{self.schedule} uses v = {entry.chunks_per_device(self.v)} chunk(s) per device, "
                             f"got {self.v}")
        if self.v > 1 and self.p < 2:
            raise InputError(f"{self.schedule} needs pipeline parallelism (p >= 2)")
        if self.p * self.v > chunk_slots(self.model.layers, self.p, self.v):
            raise InputError(f"{self.p * self.v} pipeline chunks for {self.model.layers} layers")

    @property
    def n_gpus(self) -> int:
        return self.t * self.p * self.d * self.cp

    @property
    def half(self) -> str:
        """The 16-bit type of weights and gradients: BF16 under FP8 training too."""
        return "fp16" if self.precision == "fp16" else "bf16"

    @property
    def nodes(self) -> int:
        return -(-self.n_gpus // self.gpus_per_node)

    @property
    def grad_accum_steps(self) -> int:
        """Micro-batches per data-parallel replica per step (DeepSpeed's gradient_accumulation_steps; m)."""
        return self.global_batch // (self.micro_batch_size * self.d)

    @property
    def tp_crosses_node(self) -> bool:
        return self.t > self.gpus_per_node


def from_published(model_key: str, which: int = 0, **overrides) -> Layout:
    """A layout a preset model was trained with (its assumed fields as recorded), with optional overrides.
    which: 0 = the main run, 1... = its other published layouts (e.g. Llama 3's 128K stage, at its length)."""
    m = model(model_key)
    if not 0 <= which < len(m.layouts):
        raise InputError(f"{m.name} has {len(m.layouts)} published layout(s)")
    pub = m.layouts[which]
    values = dict(t=pub.t, p=pub.p, d=pub.d, global_batch=pub.global_batch, micro_batch_size=pub.micro_batch_size,
                  zero_stage=pub.zero_stage, schedule=pub.schedule, v=pub.v, recompute=pub.recompute,
                  sequence_parallel=pub.sequence_parallel, precision=pub.precision, gpus_per_node=pub.gpus_per_node,
                  cp=pub.cp, ep=pub.ep)
    values.update(overrides)
    return Layout(model=m.with_seq(pub.seq) if pub.seq else m, gpu=gpu(pub.gpu), **values)
