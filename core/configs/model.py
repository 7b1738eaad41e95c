"""A model read from a config, as planner inputs: a preset when the architecture is one, else a custom model.

A file that spells out Llama 3 8B's shape gets the preset (its published parameter count and notes), so the row
is the one a user who picked the preset sees; a preset's block at another depth (a few-layer proxy) gets the preset
with `depth`; any other shape is a custom model with the fields the file gave.
"""

from __future__ import annotations

from core.configs.account import Reading
from core.errors import InputError
from core.model import presets
from core.params.model import MODEL

ARCH_KEYS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "mlp", "tied", "experts", "top_k",
             "shared_experts", "expert_ffn", "dense_layers", "mtp_layers", "kv_lora_rank", "q_lora_rank",
             "qk_head_dim", "qk_rope_dim", "v_head_dim", "parallel", "qk_norm", "window", "window_share")
_COMPARED = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "mlp", "tied", "mtp_layers", "parallel_block",
             "qk_norm", "window", "window_share")


def settle(reading: Reading, arch: dict[str, object]) -> None:
    """Puts the model into `reading.raw`: `model` = a preset key whose architecture equals `arch`, or `custom` with
    the architecture's fields (MODEL keys). `arch` holds what the file gave plus the framework's defaults."""
    raw = {k: _text(v) for k, v in arch.items() if k in ARCH_KEYS and v is not None}
    try:
        built = presets.custom_model({**raw, "seq": MODEL["seq"].default})
    except InputError as exc:
        raise InputError(f"the model the config describes is not one the planner can count: {exc}") from None
    for key, preset in presets._models().items():
        if _same(built, preset):
            reading.read("(architecture)", key, {"model": key},
                         f"model = {key}: the file's architecture is this preset's exactly, so its published "
                         "parameter count and notes apply")
            return
    for key, preset in presets._models().items():  # a preset's block at another depth: a few-layer proxy
        if built.layers != preset.layers and _same(built, _deeper(preset, built.layers)):
            reading.read("(architecture)", f"{key} at {built.layers} layers", {"model": key, "depth": built.layers},
                         f"model = {key} with depth = {built.layers}: the preset's block, stacked "
                         f"{built.layers} times instead of {preset.layers}")
            return
    reading.raw["model"] = "custom"
    reading.raw.update(raw)


def _deeper(preset: presets.ModelConfig, layers: int) -> presets.ModelConfig | None:
    try:
        return preset.with_layers(layers)
    except InputError:  # fewer layers than its first dense ones
        return None


def _same(a: presets.ModelConfig, b: presets.ModelConfig | None) -> bool:
    if b is None:
        return False
    if any(getattr(a, k) != getattr(b, k) for k in _COMPARED):
        return False
    if (a.kv_channels or a.hidden // a.heads) != (b.kv_channels or b.hidden // b.heads):
        return False
    return (a.moe is None) == (b.moe is None) and (a.mla is None) == (b.mla is None) and (
        a.moe is None or _moe_key(a) == _moe_key(b)) and (a.mla is None or a.mla == b.mla)


def _moe_key(m: presets.ModelConfig) -> tuple:
    e = m.moe
    return e.experts, e.top_k, e.shared, (e.expert_ffn or m.ffn), e.first_dense


def _text(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
