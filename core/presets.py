"""Model and GPU presets, read once from assets/*.json, and the dataclasses custom inputs go through.

Presets are data with sources, so a reader can check every number; custom models and GPUs are built through the
same frozen dataclasses and validated against the same Spec bounds (core.params.model), so the rest of core
never sees a model with zero heads or a GPU with negative memory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.errors import InputError
from core.params import parse_strict
from core.params.model import CLUSTER, MODEL

ASSETS = Path(__file__).resolve().parent.parent / "assets"

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
    micro_batch: int
    schedule: str
    v: int
    zero_stage: int
    sequence_parallel: bool
    recompute: str
    precision: str
    source: str
    cp: int = 1
    assumed: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    throughput: tuple[Throughput, ...] = ()

    def __post_init__(self) -> None:
        for name in ("t", "p", "d", "cp", "gpus", "gpus_per_node", "global_batch", "micro_batch", "v"):
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
    attention. bias/norm/position/embed_norm only move the parameter count by O(h) per layer.
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
    params_published: float | None = None
    key: str = "custom"
    source: str = ""
    derived: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    layout: PublishedLayout | None = None

    def __post_init__(self) -> None:
        _text("name", self.name, 80)
        if not self.name.strip():
            raise InputError("name: must not be empty")
        _checked(self, MODEL, {k: k for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq")})
        _choice("mlp", self.mlp, MODEL["mlp"].choices)
        _choice("norm", self.norm, NORMS)
        _choice("position", self.position, POSITIONS)
        for name in ("tied", "bias", "embed_norm"):
            _flag(name, getattr(self, name))
        if self.hidden % self.heads:
            raise InputError(f"hidden {self.hidden} must be divisible by heads {self.heads}")
        if self.kv_heads > self.heads or self.heads % self.kv_heads:
            raise InputError(f"heads {self.heads} must be a multiple of kv_heads {self.kv_heads}")
        if self.params_published is not None:
            value = MODEL["params"].parse(self.params_published)
            if value <= 0:
                raise InputError("params: a given parameter count must be positive (0 means derive it)")
            object.__setattr__(self, "params_published", value)
        from core.flops import model_params  # local: flops only needs the fields above

        count = model_params(self)
        if count > MAX_PARAMS:
            raise InputError(f"this architecture has {count:.3g} parameters; at most {MAX_PARAMS:.0e} are accepted")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def swiglu(self) -> bool:
        return self.mlp == "swiglu"

    @property
    def params(self) -> float:
        """The count other modules should use: the published one if given, else the architecture's."""
        from core.flops import model_params

        return float(self.params_published) if self.params_published is not None else model_params(self)


@dataclass(frozen=True)
class GpuSpec:
    """One GPU type and its server. Bandwidths are per GPU and per direction (ring formulas need that)."""

    name: str
    mem_gb: float
    tflops: float
    gpus_per_node: int
    intra_gbs: float
    inter_gbs: float
    bf16: bool = True
    key: str = "custom"
    mem_label: str = ""
    tflops_sparse: float | None = None
    intra_bidir_gbs: float | None = None
    inter_gbits: float | None = None
    source: str = ""
    derived: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _text("name", self.name, 80)
        _checked(self, CLUSTER, {"mem_gb": "gpu_mem", "tflops": "gpu_tflops", "gpus_per_node": "gpn",
                                 "intra_gbs": "intra_bw", "inter_gbs": "inter_bw"})
        _flag("bf16", self.bf16)

    @property
    def mem_bytes(self) -> float:
        return self.mem_gb * 1e9

    @property
    def peak_flops(self) -> float:
        """Dense 16-bit peak in FLOP/s."""
        return self.tflops * 1e12

    @property
    def intra_bytes_per_s(self) -> float:
        return self.intra_gbs * 1e9

    @property
    def inter_bytes_per_s(self) -> float:
        return self.inter_gbs * 1e9


def _tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, list) else value


def _build(cls: type, entry: Mapping[str, Any], where: str) -> Any:
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(entry) - names)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}")
    return cls(**{k: _tuple(v) for k, v in entry.items()})


def _model_from_json(entry: Mapping[str, Any]) -> ModelConfig:
    entry = dict(entry)
    layout = entry.pop("layout", None)
    if layout is not None:
        layout = dict(layout)
        throughput = tuple(_build(Throughput, row, "throughput") for row in layout.pop("throughput", ()))
        layout = _build(PublishedLayout, {**layout, "throughput": throughput}, f"layout of {entry.get('key')}")
    return _build(ModelConfig, {**entry, "layout": layout}, f"model {entry.get('key')}")


def _load(filename: str, list_key: str, make) -> dict[str, Any]:
    data = json.loads((ASSETS / filename).read_text(encoding="utf-8"))
    out: dict[str, Any] = {}
    for entry in data[list_key]:
        try:
            item = make(entry)
        except (InputError, TypeError, ValueError) as exc:  # broken assets are a bug, not a user error
            raise RuntimeError(f"assets/{filename}, entry {entry.get('key')!r}: {exc}") from None
        if item.key in out:
            raise RuntimeError(f"assets/{filename}: duplicate key {item.key!r}")
        out[item.key] = item
    return out


@lru_cache(maxsize=1)
def _gpus() -> dict[str, GpuSpec]:
    return _load("gpus.json", "gpus", lambda entry: _build(GpuSpec, entry, f"gpu {entry.get('key')}"))


@lru_cache(maxsize=1)
def _models() -> dict[str, ModelConfig]:
    models = _load("models.json", "models", _model_from_json)
    for m in models.values():
        if m.layout is not None and m.layout.gpu not in _gpus():
            raise RuntimeError(f"assets/models.json, entry {m.key!r}: unknown gpu {m.layout.gpu!r}")
    return models


def model_keys() -> tuple[str, ...]:
    return tuple(_models())


def gpu_keys() -> tuple[str, ...]:
    return tuple(_gpus())


def model(key: str) -> ModelConfig:
    """A preset model by key (InputError names the allowed keys)."""
    try:
        return _models()[key]
    except (KeyError, TypeError):
        raise InputError(f"model: unknown preset {str(key)[:40]!r}; choose one of {', '.join(_models())}") from None


def gpu(key: str) -> GpuSpec:
    """A preset GPU by key."""
    try:
        return _gpus()[key]
    except (KeyError, TypeError):
        raise InputError(f"gpu: unknown preset {str(key)[:40]!r}; choose one of {', '.join(_gpus())}") from None


def custom_model(raw: Mapping[str, Any], name: str = "custom") -> ModelConfig:
    """A model from CLI/URL values keyed as in core.params.model.MODEL.

    gelu selects a GPT-style block (LayerNorm, biases, learned positions), swiglu a Llama-style one (RMSNorm,
    no biases, rotary positions): those details move the count by O(h) per layer only.
    """
    v = parse_strict(MODEL, raw)
    llama = v["mlp"] == "swiglu"
    return ModelConfig(
        name=name, layers=v["layers"], hidden=v["hidden"], heads=v["heads"], kv_heads=v["kv_heads"], ffn=v["ffn"],
        vocab=v["vocab"], seq=v["seq"], mlp=v["mlp"], tied=v["tied"], norm="rmsnorm" if llama else "layernorm",
        bias=not llama, position="rope" if llama else "learned", params_published=v["params"] or None,
    )


def custom_gpu(raw: Mapping[str, Any], name: str = "custom") -> GpuSpec:
    """A GPU from CLI/URL values keyed gpu_mem, gpu_tflops, gpn, intra_bw, inter_bw (other CLUSTER keys ignored)."""
    keys = ("gpu_mem", "gpu_tflops", "gpn", "intra_bw", "inter_bw")
    v = parse_strict({k: CLUSTER[k] for k in keys}, {k: raw[k] for k in keys if k in raw})
    return GpuSpec(name=name, mem_gb=v["gpu_mem"], tflops=v["gpu_tflops"], gpus_per_node=v["gpn"],
                   intra_gbs=v["intra_bw"], inter_gbs=v["inter_bw"])
