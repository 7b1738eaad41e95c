"""A NeMo 1 (or NeMo-Framework-Launcher) training YAML: its model section holds Megatron-Core's arguments under
NeMo's names, so they are renamed to Megatron-LM flags and read by core.configs.megatron_args (one meaning per
argument); trainer.num_nodes x trainer.devices gives the GPUs. OmegaConf interpolations (${model.x}, ${.x},
${multiply:a,b}, ${sum:a,b}) are resolved within the file; anything else is reported unresolved.
"""

from __future__ import annotations

from dataclasses import replace

from core.configs import interpolation, megatron_args
from core.configs.account import Reading, yaml_data
from core.errors import InputError

RENAME = {"encoder_seq_length": "seq-length", "virtual_pipeline_model_parallel_size":
          "num-virtual-stages-per-pipeline-rank", "activations_checkpoint_granularity": "recompute-granularity",
          "activations_checkpoint_method": "recompute-method", "activations_checkpoint_num_layers":
          "recompute-num-layers", "num_moe_experts": "num-experts", "ub_tp_comm_overlap": "tp-comm-overlap",
          "kv_channels": "kv-channels", "moe_router_topk": "moe-router-topk"}
NEMO_NO_EFFECT = (  # NeMo's own switches for fusions, logging and initialisation: no bytes, no modelled time
    "mcore_gpt", "use_scaled_init_method", "pre_process", "post_process", "persist_layer_norm",
    "transformer_block_type", "normalize_attention_scores", "rotary_percentage", "apply_rope_fusion",
    "attention_type", "native_amp_init_scale", "native_amp_growth_interval", "megatron_amp_O2",
    "grad_allreduce_chunk_size_mb", "grad_div_ar_fusion", "bias_activation_fusion", "bias_dropout_add_fusion",
    "masked_softmax_fusion", "apex_transformer_log_level", "gradient_as_bucket_view", "defer_embedding_wgrad_compute",
    "wgrad_deferral_limit", "transformer_engine", "overlap_p2p_comm", "batch_p2p_comm", "gc_interval",
    "sync_batch_comm", "nsys_profile", "seed", "resume_from_checkpoint", "ffn_dropout", "fp32_residual_connection",
    "fp16_lm_cross_entropy", "hysteresis", "apply_query_key_layer_scaling", "onnx_safe", "share_embeddings",
    "num_micro_batches_with_partial_activation_checkpoints", "activations_checkpoint_layers_per_pipeline",
    "sequence_parallel_pp", "fsdp", "fsdp_sharding_strategy", "use_cpu_initialization", "cpu_offloading",
    "headscale", "layernorm_zero_centered_gamma", "do_layer_norm_weight_decay", "openai_gelu",
    "num_tokens_to_generate", "pipeline_model_parallel_split_rank", "deterministic_mode", "reduce_amax",
    "fp8_e4m3", "fp8_hybrid", "fp8_margin", "fp8_interval", "fp8_amax_history_len", "fp8_amax_compute_algo",
    "use_emha", "ub_tp_comm_overlap_cfg", "mcore_customization_config", "sharp", "position_embedding_type",
    "normalization", "layernorm_epsilon", "init_method_std", "rampup_batch_size", "max_position_embeddings",
    "make_vocab_size_divisible_by", "rotary_base", "scale_positional_embedding", "context_parallel_algo")


def read(text: str, source: str = "config.yaml") -> Reading:
    data = yaml_data(text, source)  # shared with detection; resolve builds its own copy
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise InputError(f"{source}: not a NeMo training config (no model section)")
    r = Reading("nemo", "megatron", source=source)
    data = interpolation.resolve(data)
    model, trainer = dict(data.pop("model")), dict(data.pop("trainer", {}) or {})
    flags: dict[str, str] = {}
    spelled: dict[str, str] = {}

    def put(flag: str, value: object, key: str) -> None:
        flags[flag] = "true" if value is True else str(value)
        spelled[f"--{flag}"] = key

    for key, value in model.items():
        if (isinstance(value, dict) and key != "tokenizer") or value is None or value is False and key not in (
                "share_embeddings_and_output_weights", "gradient_accumulation_fusion"):
            r.no_effect(f"model.{key}", value, "unset, off or a nested option block")
            continue
        if key in NEMO_NO_EFFECT:
            r.no_effect(f"model.{key}", value, "NeMo's fusion, logging and initialisation switches: no bytes, no "
                        "modelled time")
        elif key == "tokenizer":
            _tokenizer(value, put, r)
        elif key == "use_flash_attention":
            put("use-flash-attn", bool(value), "model.use_flash_attention")
        elif key == "gradient_accumulation_fusion":
            if not value:
                put("no-gradient-accumulation-fusion", True, "model.gradient_accumulation_fusion")
            else:
                r.no_effect(f"model.{key}", value, "on, as the step time assumes")
        elif key == "activation":
            if "glu" in str(value):
                put("swiglu", True, "model.activation")
            else:
                r.read("model.activation", value, {}, "mlp = gelu")
        elif key == "share_embeddings_and_output_weights":
            if not value:
                put("untie-embeddings-and-output-weights", True, "model.share_embeddings_and_output_weights")
            else:
                r.read(f"model.{key}", value, {}, "tied = true")
        elif key == "num_query_groups":
            put("num-query-groups", value, "model.num_query_groups")
            if value != model.get("num_attention_heads"):
                flags["group-query-attention"] = "true"
        elif key == "bias":
            r.no_effect("model.bias", value, "biases move the count by O(h) per layer")
        elif key == "fp8" and value:
            put("fp8-format", str(model.get("fp8_hybrid") and "hybrid" or "e4m3"), "model.fp8")
        elif key == "optim":
            continue
        else:
            put(RENAME.get(key, key.replace("_", "-")), value, f"model.{key}")
    optim = model.get("optim") or {}
    if isinstance(optim, dict) and "distributed" in str(optim.get("name", "")):
        put("use-distributed-optimizer", True, "model.optim.name")
    precision = str(trainer.pop("precision", "32"))
    if precision.startswith("bf16"):
        put("bf16", True, "trainer.precision")
    elif precision.startswith("16"):
        put("fp16", True, "trainer.precision")
    nodes, devices = trainer.pop("num_nodes", 1), trainer.pop("devices", 1)
    if isinstance(nodes, int) and isinstance(devices, int):
        r.read("trainer.num_nodes x devices", f"{nodes} x {devices}", {"gpus": nodes * devices})
    for key, value in trainer.items():
        r.no_effect(f"trainer.{key}", value, "run length, logging and checkpoints")
    for key in data:
        r.no_effect(key, "...", "names, paths and logging")
    megatron_args.apply(flags, r)
    r.entries = [replace(e, name=spelled.get(e.name, e.name)) for e in r.entries]
    return r


def _tokenizer(block: dict, put, r: Reading) -> None:
    """NeMo's tokenizer block as Megatron's --tokenizer-type / --tokenizer-model (for the vocabulary)."""
    library, kind = str(block.get("library", "")), str(block.get("type", ""))
    if library == "megatron" or kind == "GPT2BPETokenizer":
        put("tokenizer-type", "GPT2BPETokenizer", "model.tokenizer")
    else:
        put("tokenizer-type", "HuggingFaceTokenizer", "model.tokenizer")
        put("tokenizer-model", kind or str(block.get("model", "")), "model.tokenizer.type")
    r.no_effect("model.tokenizer (paths)", "", "vocabulary and merge files: read for the vocabulary only")
