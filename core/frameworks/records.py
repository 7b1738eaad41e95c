"""The records a framework's memory rules are written in: model-state bytes, the tensors a block keeps for its
backward, the loss, and the buffers and workspaces beside them.

Plain data, so that core.memory evaluates every framework with one set of formulas and a framework module only says
what its code does, each rule with the source line it was read from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from core.params.memory import RECOMPUTE_MODULES_DEFAULT

ALL_MODES = frozenset({"none", "selective", "full"})
NOT_FULL = frozenset({"none", "selective"})
NONE_ONLY = frozenset({"none"})
FULL_ONLY = frozenset({"full"})

# What a kept tensor's size is per token, in elements (core.memory.saved turns these into bytes):
#   h: hidden; q: heads x head size; kv: key/value heads x head size; f: the MLP's inner width;
#   heads: one value per head (fused attention's fp32 log-sum-exp); kvheads: one value per key/value head (the key
#   norm's statistics under QK normalisation); scores: heads x s (eager attention's s x s
#   matrices); token: one value per token (a norm's statistics);
#   a mixture-of-experts layer's: kh: the k routed copies of a token (top-k x capacity x h), kf: their experts'
#   inner width (top-k x capacity x expert ffn), k: one value per routed copy (indices), sf: the shared experts'
#   inner width, experts: one value per routed expert (router scores);
#   multi-head latent attention's: mqk: a query's or key's heads x (qk head + rope dims), mv: heads x v head dim,
#   mkv: the key/value up-projection's output, heads x (qk head + v head dims), lat: the compressed key/value latent
#   (kv_lora_rank), qlat: the query latent (q_lora_rank).
WIDTHS = ("h", "q", "kv", "f", "heads", "kvheads", "scores", "token", "kh", "kf", "k", "sf", "experts", "mqk", "mv",
          "mkv", "lat", "qlat")
# How tensor parallelism divides it: "rep" is replicated over the t ranks (sequence parallelism shards it), "tp" is
# split over them (a key/value head stays whole: each rank keeps max(kv_heads / t, 1) of them, for kv and kvheads).
SPLITS = ("rep", "tp")


@dataclass(frozen=True)
class Arch:
    """What decides which tensors a transformer block keeps: one model's block, as scalars."""

    norm: str = "layernorm"  # layernorm | rmsnorm
    mlp: str = "gelu"  # gelu | swiglu
    dropout: bool = True  # hidden and attention dropout (p > 0): one-byte masks
    flash: bool = False  # a fused attention kernel: no s x s matrices kept
    rope: bool = False  # rotary positions applied to q and k
    parallel: bool = False  # attention and MLP read one normed input (GPT-J, PaLM)
    gqa: bool = False  # fewer key/value heads than query heads
    fp8: bool = False  # FP8 GEMMs: the linear layers' inputs kept in one byte
    compiled: bool = False  # torch.compile on the block (PyTorch)
    repeat_kv: bool = False  # K and V widened to every query head before the attention kernel (PyTorch)
    sac_attention: bool = True  # PyTorch's per-op selective recompute saves the attention kernel's output
    moe: bool = False  # a mixture-of-experts layer: routed (and shared) experts in place of the dense MLP
    mla: bool = False  # multi-head latent attention (DeepSeek-V2/V3) in place of the plain attention
    q_lora: bool = False  # MLA's queries pass through a latent of their own (q_lora_rank > 0)
    qk_norm: bool = False  # q and k normalised per head before RoPE (Qwen3, OLMo 2, Gemma 3; --qk-layernorm)
    # what Megatron-LM's selective recompute re-runs (--recompute-modules; core.params.memory RECOMPUTE_MODULES)
    recompute_modules: tuple[str, ...] = RECOMPUTE_MODULES_DEFAULT


@dataclass(frozen=True)
class Kept:
    """One tensor a block keeps from its forward to its backward, per token: `width` elements of `nbytes` bytes,
    divided over the tensor-parallel ranks as `split` says, kept under the recompute modes in `modes`."""

    name: str
    width: str
    nbytes: float
    split: str
    modes: frozenset = NOT_FULL

    def __post_init__(self) -> None:
        if self.width not in WIDTHS or self.split not in SPLITS or not self.modes <= ALL_MODES:
            raise ValueError(f"kept tensor {self.name}: width {self.width}, split {self.split}, modes {self.modes}")


@dataclass(frozen=True)
class StateBytes:
    """How one framework stores model states, in bytes per parameter: the compute copy of the weights, the gradient
    buffer, the optimizer's master weights (0 where the weights themselves are fp32) and, per ZeRO stage, which of
    them are sharded over the data-parallel group. The optimizer's moments come from the optimizer (K - 4 for
    mixed-precision presets, core.memory.states)."""

    param: float
    grad: float
    master: float
    sharded_from: tuple[tuple[str, int], ...]  # (component, first ZeRO stage that shards it)
    source: str
    grad_fp16: float = 0.0  # the gradient buffer under fp16 where it differs from bf16's (0: the same)


@dataclass(frozen=True)
class Loss:
    """The output layer's logits and the loss, in bytes per logit (s x b x V / t on a vocabulary-parallel rank):
    `held` stays from a micro-batch's forward to its backward, `peak` is the most alive at once while the loss
    runs (forward or backward), for the one micro-batch being computed."""

    held: float
    peak: float
    source: str
    peak_parallel: float = 0.0  # the peak when the vocabulary is split over t > 1 ranks, where it differs (0: same)


@dataclass(frozen=True)
class Buffers:
    """What a framework keeps beside the model states and activations, in bytes: workspaces inside PyTorch's
    caching allocator (cuBLAS, Transformer Engine), gradient buckets, and what lives outside it (CUDA context,
    NCCL's buffers), each with its source."""

    workspace: float
    tp_overlap_workspace: float = 0.0  # more with TP communication overlap (Transformer Engine userbuffers' GEMMs)
    grouped_workspace: float = 0.0  # more when MoE layers run Transformer Engine's grouped GEMM
    bucket_elements: float = 0.0  # DeepSpeed's reduce bucket (elements, 16-bit), doubled with overlap_comm
    context: float = 0.0  # CUDA context and module images: outside the allocator
    nccl: float = 0.0  # NCCL's channel buffers per process: outside the allocator
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class Accounting:
    """One framework as the memory model sees it."""

    key: str
    label: str
    version: str
    states: StateBytes
    block: Callable[[Arch], tuple[Kept, ...]]  # what one transformer layer keeps for its backward
    head: Callable[[Arch], tuple[Kept, ...]]  # what the final norm and the output layer keep (never recomputed)
    loss: Loss
    buffers: Buffers
    selective: str  # what its selective recompute keeps, in words
    reserve: float = 0.0  # the caching allocator's reserve over the peak allocated, as a share (fitted)
    notes: tuple[str, ...] = field(default_factory=tuple)
