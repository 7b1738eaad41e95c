"""The model and GPU descriptions every other part of core reads, validated on construction.

Presets (assets/*.json) and custom inputs go through the same frozen dataclasses and the same Spec bounds
(core.params.model), so nothing downstream ever sees a model with zero heads or a GPU with negative memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from core.errors import InputError
from core.model import counts
from core.model.blocks import MlaConfig, MoeConfig
from core.params.model import CLUSTER, HEAD_SIZE, MODEL

NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("learned", "rope", "alibi")
MAX_PARAMS = MODEL["params"].hi  # a model bigger than the largest accepted parameter count is nonsense here


def _checked(obj: Any, specs: Mapping, mapping: Mapping[str, str]) -> None:
    """Parse each mapped field with its Spec and store the typed value back (frozen-safe)."""
    for field_name, key in mapping.items():
        value = getattr(obj, field_name)
        if isinstance(value, bool) and specs[key].kind in ("int", "float"):
            raise InputError(f"{key}: expected a number, got {value!r}")
        object.__setattr__(obj, field_name, specs[key].parse(value))


def _choice(name: str, value: Any, choices: tuple) -> None:
    if value not in choices:
        raise InputError(f"{name}: {value!r} is not allowed; choose one of {', '.join(choices)}")


def _flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise InputError(f"{name}: expected true or false, got {value!r}")


def _text(name: str, value: Any, limit: int = 2000) -> None:
    if not isinstance(value, str) or len(value) > limit:
        raise InputError(f"{name}: expected text of at most {limit} characters")


@dataclass(frozen=True)
class Throughput:
    """A published speed measurement of a layout (kept to check the FLOPs formulas against)."""

    gpus: int
    tflops_per_gpu: float
    source: str
    iteration_s: float | None = None
    mfu: float | None = None
    pct_peak: float | None = None


@dataclass(frozen=True)
class PublishedLayout:
    """How a model was actually trained: degrees, batch, and which fields are this project's assumptions."""

    t: int
    p: int
    d: int
    gpu: str
    gpus: int
    gpus_per_node: int
    global_batch: int
    micro_batch_size: int
    schedule: str
    v: int
    zero_stage: int
    sequence_parallel: bool
    recompute: str
    precision: str
    source: str
    cp: int = 1
    ep: int = 1
    seq: int = 0  # 0 = the model's sequence length; else the length this layout trained at (long-context stages)
    label: str = ""
    assumed: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    throughput: tuple[Throughput, ...] = ()

    def __post_init__(self) -> None:
        for name in ("t", "p", "d", "cp", "ep", "gpus", "gpus_per_node", "global_batch", "micro_batch_size", "v"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(f"layout {name}: expected a positive whole number, got {value!r}")
        if self.t * self.p * self.d * self.cp != self.gpus:
            raise InputError(f"layout: t x p x d x cp = {self.t * self.p * self.d * self.cp}, not gpus = {self.gpus}")
        unknown = set(self.assumed) - {f.name for f in fields(self)}
        if unknown:
            raise InputError(f"layout assumed: unknown field(s) {', '.join(sorted(unknown))}")


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer, enough to count parameters, FLOPs, activations and TP traffic.

    mlp gelu = GPT MLP (two h x ffn matrices); swiglu = gated MLP (three). kv_heads < heads = grouped-query
    attention. bias/norm/position/embed_norm only move the parameter count by O(h) per layer. `moe` replaces MLPs
    by routed experts (core.model.blocks.MoeConfig), `mla` the attention by multi-head latent attention.
    flash_attention and dropout only change the step time (core.cost.layer_ops) and, for flash, the activations.
    mtp_layers: multi-token prediction modules (DeepSeek-V3) after the last layer, outside `params` as published.
    parallel_block: attention and MLP read the same normed input and add to one residual branch (GPT-J, GPT-NeoX,
    PaLM): the same weights and FLOPs, one norm, one residual add and (with TP) one all-reduce per block forward.
    kv_channels (the `head_dim` input) decouples the head size from hidden / heads (Qwen3, Gemma): Q is
    h x (heads d), K and V h x (kv_heads d), the output projection (heads d) x h.
    qk_norm: q and k pass a norm over the head size before RoPE (Qwen3, OLMo 2, Gemma 3): 2 d weights per layer
    (4 d for LayerNorm), and the norms' inputs and statistics kept for the backward (core.frameworks).
    window / window_share: sliding-window attention in that share of the layers (GPT-OSS, Gemma 2 / 3, Mistral):
    fewer score FLOPs and a fused kernel's time (core.model.counts.score_share); no weights, no activations.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq: int
    mlp: str = "gelu"
    tied: bool = True
    norm: str = "layernorm"
    bias: bool = True
    position: str = "learned"
    embed_norm: bool = False
    flash_attention: bool = False
    dropout: bool = True
    parallel_block: bool = False
    params_published: float | None = None
    key: str = "custom"
    source: str = ""
    derived: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    layout: PublishedLayout | None = None
    moe: MoeConfig | None = None
    mla: MlaConfig | None = None
    params_active_published: float | None = None
    other_layouts: tuple[PublishedLayout, ...] = ()
    kv_channels: int = 0  # the head size as given (Megatron-LM's name; JSON / URL key head_dim); 0 = hidden // heads
    mtp_layers: int = 0  # multi-token prediction depths on the last stage (core.model.counts.mtp_params)
    qk_norm: bool = False  # q and k normalised per head before RoPE (Qwen3, OLMo 2; Megatron-LM --qk-layernorm)
    window: int = 0  # sliding attention window in tokens, 0 = full causal attention (core.model.counts.score_share)
    window_share: float = 1.0  # the share of the layers that use it

    def __post_init__(self) -> None:
        _text("name", self.name, 80)
        if not self.name.strip():
            raise InputError("name: must not be empty")
        _checked(self, MODEL, {k: k for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq",
                                               "mtp_layers", "window", "window_share")} | {"kv_channels": "head_dim"})
        _choice("mlp", self.mlp, MODEL["mlp"].choices)
        _choice("norm", self.norm, NORMS)
        _choice("position", self.position, POSITIONS)
        for name in ("tied", "bias", "embed_norm", "flash_attention", "dropout", "parallel_block", "qk_norm"):
            _flag(name, getattr(self, name))
        self._check_head_dim()
        if self.kv_heads > self.heads or self.heads % self.kv_heads:
            raise InputError(f"heads {self.heads} must be a multiple of kv_heads {self.kv_heads}")
        for name, kind in (("moe", MoeConfig), ("mla", MlaConfig)):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), kind):
                raise InputError(f"{name}: expected a {kind.__name__}")
        if self.moe is not None and self.moe.first_dense >= self.layers:
            raise InputError(f"dense_layers {self.moe.first_dense} leaves no MoE layer among {self.layers} layers")
        for name in ("params_published", "params_active_published"):
            if getattr(self, name) is not None:
                value = MODEL["params"].parse(getattr(self, name))
                if value <= 0:
                    raise InputError("params: a given parameter count must be positive (0 means derive it)")
                object.__setattr__(self, name, value)
        count = counts.model_params(self)
        if count > MAX_PARAMS:
            raise InputError(f"this architecture has {count:.3g} parameters; at most {MAX_PARAMS:.0e} are accepted")

    def _check_head_dim(self) -> None:
        """kv_channels 0 = hidden // heads (which must then divide); a given head size is free of hidden (Megatron-LM's
        --kv-channels: `kv_channels = hidden_size // num_attention_heads` unless set), even under rotary positions
        (RoPE rotates channel pairs: Su et al. 2021, arXiv:2104.09864, section 3.2 takes d even), and its query
        width heads x head_dim bounded like hidden. Kept as given, not resolved in place, so that
        dataclasses.replace(model, hidden=..., heads=...) never carries a stale head size."""
        if not self.kv_channels:
            if self.hidden % self.heads:
                fix = (f"set heads to {self.hidden // HEAD_SIZE} (head size {HEAD_SIZE})"
                       if self.hidden % HEAD_SIZE == 0 else "set heads to a divisor of hidden")
                raise InputError(f"hidden {self.hidden} must be divisible by heads {self.heads} (hidden / heads is "
                                 f"the head size): {fix}, leave heads at 0 to derive it, or give head_dim")
            return
        if self.position == "rope" and self.head_dim % 2:
            raise InputError(f"head_dim {self.head_dim}: rotary position embeddings rotate channel pairs, so the head "
                             f"size must be even")
        width, hi = self.heads * self.head_dim, int(MODEL["hidden"].hi)
        if width > hi:
            raise InputError(f"heads x head_dim = {self.heads} x {self.head_dim} = {width:,}: the attention width "
                             f"may be at most {hi:,}")

    @property
    def head_dim(self) -> int:
        """Channels per attention head: kv_channels where given, else hidden // heads."""
        return self.kv_channels or self.hidden // self.heads

    @property
    def attention_width(self) -> int:
        """heads x head_dim: the query (and attention-output) width, hidden unless the head size is decoupled."""
        return self.heads * self.head_dim

    @property
    def decoupled_heads(self) -> bool:
        """The head size is not hidden / heads (Megatron-LM needs --kv-channels then)."""
        return self.attention_width != self.hidden

    @property
    def swiglu(self) -> bool:
        return self.mlp == "swiglu"

    @property
    def params(self) -> float:
        """The count other modules should use: the published one if given, else the architecture's."""
        return float(self.params_published) if self.params_published is not None else counts.model_params(self)

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    def _scaled(self, part: str) -> float:
        """A part of the architecture's count, scaled to the count in use (so a published total keeps the
        architecture's split between experts and the rest)."""
        parts = counts.breakdown(self)
        return self.params * parts[part] / parts["total"]

    @property
    def params_active(self) -> float:
        """Parameters one token uses (top_k routed experts per MoE layer); the total for a dense model."""
        return self._scaled("active")

    @property
    def expert_params(self) -> float:
        """Routed-expert parameters of the whole model: the part expert parallelism spreads over its group."""
        return self._scaled("experts")

    @property
    def dense_params(self) -> float:
        """Everything that is not a routed expert (attention, dense and shared MLPs, router, embeddings, norms)."""
        return self.params - self.expert_params

    @property
    def moe_layers(self) -> int:
        return self.moe.layer_counts(self.layers)[1] if self.moe else 0

    @property
    def layouts(self) -> tuple[PublishedLayout, ...]:
        """Every published layout of this model: the main run first, then others (e.g. long-context stages)."""
        return ((self.layout,) if self.layout else ()) + tuple(self.other_layouts)

    def with_layers(self, layers: int) -> ModelConfig:
        """The same block stacked `layers` times (a framework's few-layer proxy of a published model): the published
        counts and layouts describe the full depth, so they are dropped."""
        layers = MODEL["layers"].parse(layers)
        if layers == self.layers:
            return self
        return replace(self, layers=layers, name=f"{self.name} at {layers} layers", params_published=None,
                       params_active_published=None, layout=None, other_layouts=())

    def with_seq(self, seq: int) -> ModelConfig:
        """The same architecture trained at another sequence length (a learned position table grows with it)."""
        seq = MODEL["seq"].parse(seq)
        return self if seq == self.seq else replace(self, seq=seq)


@dataclass(frozen=True)
class GpuSpec:
    """One GPU type and its server. Bandwidths are per GPU and per direction (ring formulas need that).

    mem_bw_gbs and sms feed the per-operation time model (core.cost.layer_ops); `calibration` names the GPU family
    whose calibration record (assets/efficiency.json) times it, `calibration_note` why when it borrows another
    GPU's; gemm_eff / mem_eff are this GPU's own published efficiencies when it has them (None = the record's).
    """

    name: str
    mem_gb: float
    tflops: float
    gpus_per_node: int
    intra_gbs: float
    inter_gbs: float
    mem_bw_gbs: float = 3350.0
    sms: int = 132
    gemm_eff: float | None = None
    mem_eff: float | None = None
    calibration: str = "h100"
    calibration_note: str = "a custom GPU borrows the H100 SXM's calibration"
    bf16: bool = True
    key: str = "custom"
    mem_label: str = ""
    tflops_sparse: float | None = None
    tflops_fp8: float | None = None
    intra_bidir_gbs: float | None = None
    inter_gbits: float | None = None
    source: str = ""
    derived: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    device_gib: float | None = None  # what the device reports to PyTorch (total_memory, GiB); None: mem_gb is it
    device_source: str = ""

    def __post_init__(self) -> None:
        _text("name", self.name, 80)
        if self.device_gib is not None and not 0.001 <= float(self.device_gib) <= CLUSTER["gpu_mem"].hi:
            raise InputError(f"device_gib: expected a memory size in GiB, got {self.device_gib!r}")
        _checked(self, CLUSTER, {"mem_gb": "gpu_mem", "tflops": "gpu_tflops", "gpus_per_node": "gpn",
                                 "intra_gbs": "intra_bw", "inter_gbs": "inter_bw", "mem_bw_gbs": "gpu_bw",
                                 "sms": "gpu_sms"})
        for name in ("gemm_eff", "mem_eff"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not 0.05 <= float(value) <= 1.0):
                raise InputError(f"{name}: expected a fraction from 0.05 to 1 (or none), got {value!r}")
        _flag("bf16", self.bf16)
        _text("calibration", self.calibration, 40)
        _text("calibration_note", self.calibration_note)
        if self.tflops_fp8 is not None:
            object.__setattr__(self, "tflops_fp8", CLUSTER["gpu_tflops"].parse(self.tflops_fp8))

    @property
    def mem_bytes(self) -> float:
        return self.mem_gb * 1e9

    @property
    def capacity_bytes(self) -> float:
        """The memory a process can use, as the device reports it (torch.cuda.get_device_properties().total_memory:
        an 'H100 80GB' reports 79.18 GiB); the labelled GB where that is not known or the user set the memory."""
        return self.device_gib * float(1 << 30) if self.device_gib else self.mem_bytes

    @property
    def peak_flops(self) -> float:
        """Dense 16-bit peak in FLOP/s."""
        return self.tflops * 1e12

    @property
    def peak_flops_fp8(self) -> float | None:
        """Dense FP8 tensor peak in FLOP/s, None where the GPU has no FP8 tensor cores (Ampere, Volta)."""
        return None if self.tflops_fp8 is None else self.tflops_fp8 * 1e12

    @property
    def mem_bytes_per_s(self) -> float:
        return self.mem_bw_gbs * 1e9

    @property
    def intra_bytes_per_s(self) -> float:
        return self.intra_gbs * 1e9

    @property
    def inter_bytes_per_s(self) -> float:
        return self.inter_gbs * 1e9
