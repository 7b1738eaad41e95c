"""Model and GPU presets: validated objects built from the catalog in assets/*.json.

Presets are data with sources, so a reader can check every number (core.params.catalog reads the files);
custom models and GPUs come from CLI / URL values through the same dataclasses (core.model.config).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from functools import lru_cache
from typing import Any

from core.errors import InputError
from core.model.config import GpuSpec, ModelConfig, PublishedLayout, Throughput
from core.params import catalog, parse_strict
from core.params.catalog import entries
from core.params.model import CLUSTER, MODEL


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
    out: dict[str, Any] = {}
    for entry in entries(filename, list_key):
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


model_keys = catalog.model_keys
gpu_keys = catalog.gpu_keys


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
