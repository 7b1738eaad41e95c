"""A Hugging Face config.json: the model's architecture, key by key (transformers' configuration_*.py names).

It says nothing about training (layout, batch, precision), so on its own the layout is searched; with a DeepSpeed
JSON it supplies the model that JSON leaves to code.
"""

from __future__ import annotations

from core.configs.account import Reading, json_object
from core.configs.model import settle
from core.errors import InputError

GATED = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3",
         "gemma", "gemma2", "gemma3", "gemma3_text", "olmo", "olmo2", "olmoe", "granite", "phi3", "kimi_k2", "glm4_moe",
         "gpt_oss", "llama4", "llama4_text", "qwen3_next", "dbrx")  # gated MLPs (gate, up, down)
NO_EFFECT = {
    "checkpoint and generation metadata": (
        "architectures", "transformers_version", "torch_dtype", "dtype", "use_cache", "bos_token_id",
        "eos_token_id", "pad_token_id", "auto_map", "_name_or_path", "pretraining_tp", "initializer_range",
        "max_position_embeddings", "return_dict", "output_attentions", "output_hidden_states", "model_name",
        "quantization_config", "generation_config", "tokenizer_class", "max_window_layers", "ep_size"),
    "numerics with no bytes or time of their own": (
        "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "rope_theta", "rope_scaling", "rope_parameters",
        "attention_bias", "mlp_bias", "hidden_act", "router_aux_loss_coef", "output_router_logits",
        "norm_topk_prob", "scoring_func", "topk_method", "n_group", "topk_group", "routed_scaling_factor",
        "aux_loss_alpha", "seq_aux", "router_jitter_noise",
        "embd_pdrop", "resid_pdrop", "rope_interleave", "swiglu_limit", "partial_rotary_factor", "head_dim_scale"),
}
# Families whose attention normalises q and k (transformers' modeling_*.py q_norm / k_norm: RMSNorm over the head
# size, OLMo 2's over the projection); a config may also say so itself (qk_layernorm, use_qk_norm).
QK_NORM = ("qwen3", "qwen3_moe", "olmo2", "olmoe", "gemma3", "gemma3_text")
_NO_EFFECT = {k: why for why, keys in NO_EFFECT.items() for k in keys}
LAYERS = ("num_hidden_layers", "n_layer", "num_layers")


def read(text: str, source: str = "config.json") -> Reading:
    data = json_object(text, source)
    r = Reading("huggingface", "", source=source)
    family = str(data.pop("model_type", ""))
    data, family = _language_model(data, family, r)
    arch = _sizes(data, r)
    _shape(data, family, arch, r)
    for key, value in data.items():
        if key in _NO_EFFECT:
            r.no_effect(key, value, _NO_EFFECT[key])
        else:
            r.unsupported(key, value, "not a key the importer knows; its effect is not counted")
    settle(r, arch)
    return r


def _language_model(data: dict, family: str, r: Reading) -> tuple[dict, str]:
    """A multimodal checkpoint's config (Llama 4, Gemma 3, Qwen2.5-VL ...) nests the language model under
    text_config: that is the model trained here; the vision tower is not counted."""
    inner = data.get("text_config")
    if not isinstance(inner, dict) or any(k in data for k in LAYERS):
        return data, family
    inner = dict(inner)
    r.read("text_config", family or "(multimodal)", {}, "the language model's own config is read")
    for key in sorted(set(data) - {"text_config"}):
        if key == "tie_word_embeddings" and key not in inner:  # Llama 4 ties (or not) at the top level
            inner[key] = data[key]
        elif key in _NO_EFFECT:
            r.no_effect(key, data[key], _NO_EFFECT[key])
        else:
            r.unsupported(key, data[key], "outside the language model (text_config): not counted")
    return inner, str(inner.pop("model_type", family))


def _sizes(data: dict, r: Reading) -> dict[str, object]:
    """The whole-number fields, under any of the names transformers' model families give them."""
    arch: dict[str, object] = {}

    def take(keys: tuple[str, ...], field: str) -> None:
        for key in keys:
            if key in data:
                value = data.pop(key)
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    arch[field] = value
                    r.read(key, value, {}, f"{field} = {value}")
                elif value is None:
                    r.no_effect(key, "null", f"{field} not used")
                else:
                    r.unsupported(key, value, f"expected a whole number for {field}")
                return

    take(LAYERS, "layers")
    take(("hidden_size", "n_embd", "d_model"), "hidden")
    take(("num_attention_heads", "n_head"), "heads")
    take(("num_key_value_heads",), "kv_heads")
    take(("intermediate_size", "n_inner", "ffn_hidden_size"), "ffn")
    take(("vocab_size",), "vocab")
    take(("num_local_experts", "num_experts", "n_routed_experts"), "experts")
    take(("num_experts_per_tok", "moe_topk", "experts_per_token"), "top_k")
    if "experts_per_token" in data:  # gpt-oss names the top-k twice
        r.no_effect("experts_per_token", data.pop("experts_per_token"), "the same top-k as num_experts_per_tok")
    take(("moe_intermediate_size",), "expert_ffn")
    take(("n_shared_experts",), "shared_experts")
    take(("first_k_dense_replace",), "dense_layers")
    take(("num_nextn_predict_layers",), "mtp_layers")
    take(("kv_lora_rank",), "kv_lora_rank")
    take(("q_lora_rank",), "q_lora_rank")
    take(("qk_nope_head_dim",), "qk_head_dim")
    take(("qk_rope_head_dim",), "qk_rope_dim")
    take(("v_head_dim",), "v_head_dim")
    return arch


def _qk_norm(data: dict, family: str, arch: dict[str, object], r: Reading) -> None:
    """QK normalisation: the family's (QK_NORM), or the config's own qk_layernorm / use_qk_norm."""
    for key in ("qk_layernorm", "use_qk_norm"):
        if key in data:
            value = data.pop(key)
            if not isinstance(value, bool):
                r.unsupported(key, value, "not true or false; the family decides")
                continue
            arch["qk_norm"] = value
            r.read(key, value, {}, f"qk_norm = {str(value).lower()}")
            return
    if family in QK_NORM:
        arch["qk_norm"] = True
        r.read("model_type", family, {}, "qk_norm = true (the family normalises q and k)")


def _window(data: dict, family: str, arch: dict[str, object], r: Reading) -> None:
    """Sliding-window attention: the window (sliding_window, unless use_sliding_window is false) and the share of
    the layers that use it: layer_types where given (GPT-OSS, Gemma 2 / 3 since 2025), else Gemma 3's
    sliding_window_pattern N (N - 1 of every N), Gemma 2's every other layer, or every layer (Mistral v0.1)."""
    window, use = data.pop("sliding_window", None), data.pop("use_sliding_window", None)
    types, pattern = data.pop("layer_types", None), data.pop("sliding_window_pattern", None)
    if not window or use is False or not isinstance(window, int) or isinstance(window, bool):
        if window is not None or use is not None:
            r.no_effect("sliding_window / use_sliding_window", f"{window} / {use}", "sliding windows are off")
        return
    if isinstance(types, list) and types:
        share = sum(str(t).startswith("sliding") for t in types) / len(types)
        how = f"layer_types: {share:.3g} of the layers"
    elif isinstance(pattern, int) and pattern > 0:
        share, how = (pattern - 1) / pattern, f"sliding_window_pattern {pattern}: {pattern - 1} of every {pattern}"
    elif family == "gemma2":
        share, how = 0.5, "Gemma 2 alternates windowed and full layers"
    else:
        share, how = 1.0, "every layer"
    arch["window"], arch["window_share"] = window, round(share, 6)
    r.read("sliding_window", window, {}, f"window = {window} tokens in {how}")


def _moe_step(data: dict, arch: dict[str, object], r: Reading) -> None:
    """Experts every k-th layer (Qwen2-MoE decoder_sparse_step, DeepSeek moe_layer_freq, Llama 4
    interleave_moe_layer_step): 1 is every layer; another k is not an input yet, and the file is told so."""
    for key in ("moe_layer_freq", "decoder_sparse_step", "interleave_moe_layer_step"):
        if key not in data:
            continue
        step = data.pop(key)
        if step in (1, None) or not arch.get("experts"):
            r.no_effect(key, step, "every layer after the dense ones is MoE" if arch.get("experts") else "no experts")
        else:
            r.unsupported(key, step, "experts every k-th layer is not an input: counted as every layer MoE (more "
                          "expert parameters and all-to-all than the model has)")


def _shape(data: dict, family: str, arch: dict[str, object], r: Reading) -> None:
    """Head size, MLP kind, tying, shared experts, dropout and windows; fails when the sizes are missing."""
    source = r.source
    if "head_dim" in data:
        value = data.pop("head_dim")
        if isinstance(value, int) and arch.get("hidden") and arch.get("heads") and \
                value != int(arch["hidden"]) // int(arch["heads"]):
            arch["head_dim"] = value
            r.read("head_dim", value, {}, f"head_dim = {value} (decoupled from hidden / heads)")
        elif isinstance(value, int) or value is None:
            r.no_effect("head_dim", value, "equals hidden / heads")
        else:
            r.unsupported("head_dim", value, "not a whole number; hidden / heads is used")
    if family:
        gated = family in GATED
        arch["mlp"] = "swiglu" if gated else "gelu"
        r.read("model_type", family, {}, f"mlp = {arch['mlp']}" + ("" if gated else " (not a gated family the "
                                                                   "importer knows: GPT-style)"))
    _qk_norm(data, family, arch, r)
    tied = data.pop("tie_word_embeddings", None)
    if tied is not None and not isinstance(tied, bool):
        raise InputError(f"{r.source}: tie_word_embeddings {str(tied)[:20]!r} is not true or false")
    arch["tied"] = tied if tied is not None else True
    r.read("tie_word_embeddings", "default true" if tied is None else tied, {}, f"tied = {arch['tied']}")
    if arch.get("experts") and family == "mixtral":
        arch["expert_ffn"] = arch.get("ffn", 0)
    shared = data.pop("shared_expert_intermediate_size", None)
    if shared:
        width = int(arch.get("expert_ffn") or arch.get("ffn") or 0)
        if width and shared % width == 0:
            arch["shared_experts"] = shared // width
            r.read("shared_expert_intermediate_size", shared, {}, f"shared_experts = {shared // width}")
        else:
            r.unsupported("shared_expert_intermediate_size", shared, "not a whole number of experts")
    for key in ("attention_dropout", "hidden_dropout", "attn_pdrop", "hidden_dropout_prob"):
        if key in data:
            value = data.pop(key)
            r.read(key, value, {"dropout": bool(value)})
    _moe_step(data, arch, r)
    _window(data, family, arch, r)
    if "kv_heads" not in arch and "heads" in arch:
        arch["kv_heads"] = arch["heads"]
    if not arch.get("kv_lora_rank"):
        for key in ("qk_head_dim", "qk_rope_dim", "v_head_dim", "q_lora_rank"):
            arch.pop(key, None)
    missing = [k for k in ("layers", "hidden", "heads") if k not in arch]
    if missing:
        raise InputError(f"{source}: no {', '.join(missing)} (a Hugging Face config.json gives num_hidden_layers, "
                         "hidden_size and num_attention_heads)")
