"""Model and GPU presets: validated objects built from the catalog in assets/*.json.

Presets are data with sources, so a reader can check every number (core.params.catalog reads the files);
custom models and GPUs come from CLI / URL values through the same dataclasses (core.model.config).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from functools import lru_cache
from typing import Any

from core.errors import InputError
from core.model.blocks import MlaConfig, MoeConfig
from core.model.config import GpuSpec, ModelConfig, PublishedLayout, Throughput
from core.params import catalog, parse_strict
from core.params.catalog import entries
from core.params.model import AUTO_HEADS, CLUSTER, MODEL, resolve_heads


def _tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, list) else value


def _build(cls: type, entry: Mapping[str, Any], where: str) -> Any:
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(entry) - names)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}")
    return cls(**{k: _tuple(v) for k, v in entry.items()})


def _layout_from_json(layout: Mapping[str, Any], where: str) -> PublishedLayout:
    layout = dict(layout)
    throughput = tuple(_build(Throughput, row, "throughput") for row in layout.pop("throughput", ()))
    return _build(PublishedLayout, {**layout, "throughput": throughput}, where)


def _model_from_json(entry: Mapping[str, Any]) -> ModelConfig:
    entry = dict(entry)
    if "head_dim" in entry:  # the data file says head_dim (Hugging Face's name); the dataclass keeps it as given
        entry["kv_channels"] = entry.pop("head_dim")
    where = f"layout of {entry.get('key')}"
    layout = entry.pop("layout", None)
    if layout is not None:
        layout = _layout_from_json(layout, where)
    others = tuple(_layout_from_json(x, where) for x in entry.pop("other_layouts", ()))
    for name, cls in (("moe", MoeConfig), ("mla", MlaConfig)):
        if entry.get(name) is not None:
            entry[name] = _build(cls, entry[name], f"{name} of {entry.get('key')}")
    return _build(ModelConfig, {**entry, "layout": layout, "other_layouts": others}, f"model {entry.get('key')}")


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

    gelu selects a GPT-style block (LayerNorm, biases, learned positions, dropout), swiglu a Llama-style one
    (RMSNorm, no biases, rotary positions, no dropout): those details move the count by O(h) per layer only.
    experts > 0 makes every layer after the first dense_layers a mixture-of-experts layer; head_dim > 0 decouples
    the head size from hidden / heads; kv_lora_rank > 0 makes the attention multi-head latent attention.
    """
    raw = dict(raw)
    auto = parse_strict({k: AUTO_HEADS[k] for k in ("heads", "kv_heads") if k in raw},
                        {k: raw[k] for k in ("heads", "kv_heads") if k in raw})
    hidden = MODEL["hidden"].parse(raw.get("hidden", MODEL["hidden"].default))
    head_dim = MODEL["head_dim"].parse(raw.get("head_dim", 0))
    raw["heads"], raw["kv_heads"] = resolve_heads(hidden, auto.get("heads", 0), auto.get("kv_heads", 0), head_dim)
    v = parse_strict(MODEL, raw)
    moe = None
    if v["experts"]:
        if v["top_k"] > v["experts"]:
            raise InputError(f"top_k: {v['top_k']} experts per token, but only {v['experts']} experts")
        moe = MoeConfig(experts=v["experts"], top_k=v["top_k"], shared=v["shared_experts"],
                        expert_ffn=v["expert_ffn"], first_dense=v["dense_layers"])
    mla = None
    if v["kv_lora_rank"]:
        mla = MlaConfig(kv_lora_rank=v["kv_lora_rank"], qk_head_dim=v["qk_head_dim"], qk_rope_dim=v["qk_rope_dim"],
                        v_head_dim=v["v_head_dim"], q_lora_rank=v["q_lora_rank"])
    return ModelConfig(
        name=name, layers=v["layers"], hidden=v["hidden"], heads=v["heads"], kv_heads=v["kv_heads"], ffn=v["ffn"],
        vocab=v["vocab"], seq=v["seq"], mlp=v["mlp"], tied=v["tied"], params_published=v["params"] or None, moe=moe,
        mla=mla, flash_attention=v["flash"], parallel_block=v["parallel"], kv_channels=v["head_dim"],
        mtp_layers=v["mtp_layers"], qk_norm=v["qk_norm"], window=v["window"], window_share=v["window_share"],
        **custom_family(v["mlp"]),
    )


def custom_family(mlp: str) -> dict:
    """What a custom model's MLP kind implies of the rest of its block: a SwiGLU model is Llama-like (RMSNorm, no
    biases, RoPE, no dropout), a GeLU one GPT-like (LayerNorm, biases, learned positions, dropout)."""
    llama = mlp == "swiglu"
    return {"norm": "rmsnorm" if llama else "layernorm", "bias": not llama,
            "position": "rope" if llama else "learned", "dropout": not llama}


def chosen_model(key: str, custom: Mapping[str, Any] | None = None, seq: int = 0,
                 flash: bool | None = None, depth: int = 0) -> ModelConfig:
    """The model a planner question names: a preset by key, or with key "custom" the fields in `custom` (keyed as
    MODEL). seq > 0 trains either at that length (a preset's other fields stay as published); 0 keeps the preset's
    own length, or MODEL's default for a custom model. flash: the attention kernel (None keeps the preset's, or
    the custom fields' `flash`). depth > 0: a preset stacked that many layers (a custom model's `layers` says it)."""
    if key == "custom":
        fields_ = {**dict(custom or {}), "seq": seq or MODEL["seq"].default}
        return custom_model(fields_ if flash is None else {**fields_, "flash": flash})
    chosen = model(key)
    chosen = chosen.with_seq(seq) if seq else chosen
    chosen = chosen.with_layers(depth) if depth else chosen
    return chosen if flash is None or flash == chosen.flash_attention else replace(chosen, flash_attention=flash)


# GpuSpec field of each planner GPU input (core.params.planner.GPU_KEYS): the numbers a preset takes overrides of.
GPU_FIELDS = {"gpu_mem": "mem_gb", "gpu_tflops": "tflops", "gpn": "gpus_per_node", "intra_bw": "intra_gbs",
              "inter_bw": "inter_gbs", "gpu_bw": "mem_bw_gbs", "gpu_sms": "sms", "gpu_tflops_fp8": "tflops_fp8"}
CUSTOM_BASE = "h100-80gb"  # a custom GPU starts from these numbers (CLUSTER's defaults are the same), without FP8


def custom_gpu(raw: Mapping[str, Any], name: str = "custom") -> GpuSpec:
    """A GPU from CLI/URL values keyed gpu_mem, gpu_tflops, gpn, intra_bw, inter_bw, gpu_bw, gpu_sms (other CLUSTER
    keys ignored; a missing one takes its default)."""
    keys = ("gpu_mem", "gpu_tflops", "gpn", "intra_bw", "inter_bw", "gpu_bw", "gpu_sms")
    v = parse_strict({k: CLUSTER[k] for k in keys}, {k: raw[k] for k in keys if k in raw})
    return GpuSpec(name=name, mem_gb=v["gpu_mem"], tflops=v["gpu_tflops"], gpus_per_node=v["gpn"],
                   intra_gbs=v["intra_bw"], inter_gbs=v["inter_bw"], mem_bw_gbs=v["gpu_bw"], sms=v["gpu_sms"])


def chosen_gpu(key: str, overrides: Mapping[str, float], calibration: str = "auto") -> GpuSpec:
    """The GPU a planner question names: a preset by key with any of its numbers overridden (`overrides` keyed as
    GPU_FIELDS, 0 or absent = the preset's), or with key "custom" the H100 SXM's numbers without FP8 (a custom GPU
    has an FP8 peak only when given one). calibration: the family whose record times it ("auto": the preset's)."""
    changed = {GPU_FIELDS[k]: v for k, v in overrides.items() if v}
    if key == "custom":
        base = replace(gpu(CUSTOM_BASE), name="custom", key="custom", tflops_fp8=None, tflops_sparse=None,
                       mem_label="", source="", derived=(), notes=(), device_gib=None, device_source="",
                       calibration_note=GpuSpec.__dataclass_fields__["calibration_note"].default)
    else:
        base = gpu(key)
        if "mem_gb" in changed:  # the memory typed is the memory used
            base = replace(base, device_gib=None, device_source="")
        if changed:
            shown = ", ".join(f"{k} {v:g}" for k, v in overrides.items() if v)
            name = f"{base.name}, {shown}"
            base = replace(base, name=name if len(name) <= 80 else f"{base.name} ({len(changed)} changed)")
    if calibration != "auto" and calibration != base.calibration:
        base = replace(base, calibration=calibration, calibration_note=f"calibration {calibration} chosen")
    return replace(base, **changed) if changed else base
