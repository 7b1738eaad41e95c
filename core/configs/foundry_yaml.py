"""An LLM Foundry train YAML (`composer scripts/train/train.py x.yaml`; scripts/train/yamls/pretrain and finetune):
the model (`mpt_causal_lm` with its shape, or `hf_causal_lm` with a hub id), max_seq_len, the global batch and the
per-GPU micro-batch, the precision, and Composer's FSDP (sharding strategy, mixed-precision mode, activation
checkpointing, CPU offload) or, from 2024, `parallelism_config` with FSDP and tensor parallelism. The YAML's
`${variables.x}` references are resolved first (core.configs.interpolation). The GPUs are the launcher's
(`composer -n`), so they are given with --gpus or assumed.
"""

from __future__ import annotations

from core.configs import hub, interpolation
from core.configs import model as model_of
from core.configs.account import ADAPTERS, Reading, yaml_object
from core.cost import releases
from core.errors import InputError

PRECISIONS = {"amp_bf16": "bf16", "amp_fp16": "fp16", "amp_fp8": "fp8"}
# Composer's FSDP sharding strategies: (ZeRO stage, parameters resharded after the forward, hybrid)
STRATEGIES = {"FULL_SHARD": (3, True, False), "SHARD_GRAD_OP": (3, False, False), "NO_SHARD": (0, True, False),
              "HYBRID_SHARD": (3, True, True), "_HYBRID_SHARD_ZERO2": (3, False, True)}
# Composer's mixed-precision modes (composer/distributed/mosaic_parallelism.py get_mixed_precision): the bytes
# FSDP reduces each gradient value in: DEFAULT reduces in fp32, PURE in the training precision
REDUCE_BYTES = {"DEFAULT": 4, "PURE": 2}
NO_EFFECT = {"variables", "run_name", "tokenizer", "train_loader", "eval_loader", "scheduler", "algorithms",
             "max_duration", "eval_interval", "eval_first", "eval_subset_num_batches", "seed", "device_eval_batch_size",
             "progress_bar", "log_to_console", "console_log_interval", "callbacks", "loggers", "save_folder",
             "save_interval", "save_num_checkpoints_to_keep", "save_overwrite", "load_path", "load_weights_only",
             "dist_timeout", "icl_tasks", "icl_seq_len", "eval_gauntlet", "autoresume", "global_seed", "data_local",
             "data_remote", "python_log_level", "save_weights_only", "load_strict_model_weights", "metadata",
             "code_paths", "eval_loaders", "max_split_size_mb", "expandable_segments", "cuda_load_lazy",
             "dist_init_timeout", "log_config", "spin_dataloaders", "compile_config", "save_ignore_keys",
             "load_ignore_keys", "tokenizer_name", "model_name"}
FSDP_NO_EFFECT = {"limit_all_gathers", "activation_checkpointing_reentrant", "forward_prefetch", "backward_prefetch",
                  "use_orig_params", "sync_module_states", "state_dict_type", "verbose", "load_monolith_rank0_only",
                  "forward_prefetch_limit", "backward_prefetch_limit", "auto_wrap", "ignored_modules",
                  "save_planner", "load_planner", "activation_checkpointing_fn", "te_checkpoint_wrapper",
                  "te_shard_fp8_weight", "device_mesh"}
MODEL_NO_EFFECT = {"name", "init_device", "init_config", "pretrained", "use_auth_token", "trust_remote_code",
                   "norm_type", "norm_eps", "no_bias", "attention_bias", "logit_scale", "embedding_fraction",
                   "use_cache", "fc_type", "use_pad_tok_in_ffn", "learned_pos_emb", "use_train_metrics",
                   "z_loss", "load_in_8bit", "config_overrides_note"}


def is_foundry(data: object) -> bool:
    model = data.get("model") if isinstance(data, dict) else None
    return isinstance(model, dict) and "name" in model and any(
        k in data for k in ("global_train_batch_size", "device_train_microbatch_size", "max_duration"))


def read(text: str, source: str = "train.yaml") -> Reading:
    data = interpolation.resolve(yaml_object(text, source, is_foundry, "an LLM Foundry train YAML (model.name and "
                                             "a batch)"))
    if data.get("peft_config") or (data.get("model") or {}).get("peft_config"):
        raise InputError(f"peft_config: LoRA {ADAPTERS}")
    r = Reading("llm-foundry", "torch", source=source)
    r.read("(engine)", "Composer", {"memory_framework": "torch", "grad_accum_fusion": False,
                                    "release": releases.base()},
           "PyTorch FSDP under Composer: PyTorch's bytes; each micro-batch's weight gradient added to the gradient "
           f"apart (no fused accumulation); timed with the base records ({releases.base()}'s): FlashAttention-2, which "
           "LLM Foundry installs (its gpu-flash2 extra), not a Megatron release's cuDNN attention")
    model = dict(data.pop("model"))
    seq = data.pop("max_seq_len", model.get("max_seq_len"))
    _model(model, r)
    if isinstance(seq, int) and seq > 0:
        r.read("max_seq_len", seq, {"seq": seq})
    elif seq is not None:
        r.unsupported("max_seq_len", seq, "not a whole number (an unresolved reference?): give --seq")
    _batch(data, r)
    precision = str(data.pop("precision", "amp_bf16"))
    r.read("precision", precision, {"precision": PRECISIONS.get(precision, "bf16")})
    if precision not in PRECISIONS:
        r.unsupported("precision", precision, "fp32 training is not modelled; counted as bf16")
    parallel = data.pop("parallelism_config", None) or {}
    fsdp = data.pop("fsdp_config", None) or (parallel.get("fsdp") if isinstance(parallel, dict) else None)
    if isinstance(fsdp, dict):
        _fsdp(dict(fsdp), precision, r)
    else:
        r.assume("zero", 0, "no fsdp_config: Composer runs DDP")
    if isinstance(parallel, dict) and isinstance(parallel.get("tp"), dict):
        _tensor(dict(parallel["tp"]), r)
    for key, value in data.items():
        (r.no_effect if key in NO_EFFECT else r.unsupported)(key, value, "data, schedule, logging and checkpoints: "
                                                             "no bytes, no time" if key in NO_EFFECT else "not read")
    return r


def _model(model: dict, r: Reading) -> None:
    name = str(model.get("name"))
    if name == "hf_causal_lm":
        hub_id = str(model.pop("pretrained_model_name_or_path", ""))
        if not hub.read(hub_id, "model.pretrained_model_name_or_path", r):
            raise InputError(f"model.pretrained_model_name_or_path: {hub_id[:60]!r} is not a hub id the checker maps "
                             "to a preset; give the model's config.json with the file")
        flash = model.pop("use_flash_attention_2", None)
        if flash is not None:
            r.read("model.use_flash_attention_2", flash, {"flash": bool(flash)})
        if model.pop("config_overrides", None):
            r.unsupported("model.config_overrides", "...", "the preset's shape is counted, not the overrides")
    elif name == "mpt_causal_lm":
        _mpt(model, r)
    else:
        raise InputError(f"model.name: {name[:40]!r} is not a causal language model the checker reads (mpt_causal_lm, "
                         "hf_causal_lm)")
    loss = str(model.pop("loss_fn", "fused_crossentropy"))
    r.read("model.loss_fn", loss, {"loss": "fused" if loss == "fused_crossentropy" else "upcast"},
           "loss = fused (flash-attn's cross-entropy on the 16-bit logits)" if loss == "fused_crossentropy" else
           "loss = upcast (autocast runs the cross-entropy on an fp32 copy of the logits)")
    for key, v in model.items():
        known = key in MODEL_NO_EFFECT
        (r.no_effect if known else r.unsupported)(f"model.{key}", v, "init, norms and biases: O(h) bytes" if known
                                                  else "not read")


def _mpt(model: dict, r: Reading) -> None:
    """MPT's shape with llm-foundry's defaults (llmfoundry/models/mpt/configuration_mpt.py, config_defaults.py)."""
    attn = dict(model.pop("attn_config", None) or {})
    ffn_cfg = dict(model.pop("ffn_config", None) or {})
    hidden, heads = int(model.pop("d_model", 2048)), int(model.pop("n_heads", 16))
    kind = str(attn.pop("attn_type", "multihead_attention"))
    kv = {"multiquery_attention": 1, "grouped_query_attention": int(attn.pop("kv_n_heads", 1))}.get(kind, heads)
    ffn = int(ffn_cfg.pop("ffn_hidden_size", None) or round(float(model.pop("expansion_ratio", 4)) * hidden))
    ffn_type = str(ffn_cfg.pop("ffn_type", "mptmlp"))
    act_fn = ffn_cfg.pop("ffn_act_fn", None)
    act = str(act_fn.get("name", "silu") if isinstance(act_fn, dict) else "silu") if ffn_type == "mptglu" else "gelu"
    arch = {"layers": int(model.pop("n_layers", 24)), "hidden": hidden, "heads": heads, "kv_heads": kv,
            "head_dim": model.pop("head_dim", None), "ffn": ffn, "vocab": int(model.pop("vocab_size", 50368)),
            "mlp": "swiglu" if ffn_type == "mptglu" else "gelu", "tied": bool(model.pop("tie_word_embeddings", True))}
    if ffn_type in ("mb_moe", "mb_dmoe"):
        arch |= {"experts": int(ffn_cfg.pop("moe_num_experts", 1)), "top_k": int(ffn_cfg.pop("moe_top_k", 1)),
                 "expert_ffn": ffn, "mlp": "gelu"}
    elif ffn_type not in ("mptmlp", "mptglu", "te_ln_mlp"):
        raise InputError(f"model.ffn_config.ffn_type: {ffn_type[:30]!r} is not one the checker reads (mptmlp, mptglu, "
                         "te_ln_mlp, mb_moe, mb_dmoe)")
    r.read("model (MPT)", f"{arch['layers']} x d_model {hidden}", {}, f"{arch['layers']} layers, hidden {hidden}, "
           f"{heads} heads ({kv} K/V), ffn {ffn} ({ffn_type}{', ' + act if ffn_type == 'mptglu' else ''}), vocab "
           f"{arch['vocab']}, tied = {str(arch['tied']).lower()}")
    model_of.settle(r, arch)
    impl = str(attn.pop("attn_impl", "flash"))
    r.read("model.attn_config.attn_impl", impl, {"flash": impl != "torch", **({"flash_kernel": "triton"}
                                                                             if impl == "triton" else {})})
    drop = any(float(model.pop(k, 0.0) or 0.0) > 0 for k in ("resid_pdrop", "emb_pdrop")) or float(
        attn.pop("attn_pdrop", 0.0) or 0.0) > 0
    r.read("model.resid_pdrop / emb_pdrop / attn_pdrop", drop, {"dropout": drop})
    model.pop("max_seq_len", None)
    for key, v in {**{f"attn_config.{k}": v for k, v in attn.items()},
                   **{f"ffn_config.{k}": v for k, v in ffn_cfg.items()}}.items():
        r.no_effect(f"model.{key}", v, "positions, norms and kernels of O(h) bytes")


def _batch(data: dict, r: Reading) -> None:
    micro = data.pop("device_train_microbatch_size", None)
    if isinstance(micro, int) and not isinstance(micro, bool) and micro > 0:
        r.read("device_train_microbatch_size", micro, {"mb_sizes": micro})
    elif micro is not None:
        r.unsupported("device_train_microbatch_size", micro, "Composer finds it at run time; the planner searches "
                      "its own micro-batch sizes")
    batch = data.pop("global_train_batch_size", None)
    if isinstance(batch, int) and not isinstance(batch, bool) and batch > 0:
        r.read("global_train_batch_size", batch, {"batch": batch})


def _fsdp(block: dict, precision: str, r: Reading) -> None:
    name = str(block.pop("sharding_strategy", "FULL_SHARD")).upper()
    if name not in STRATEGIES:
        raise InputError(f"fsdp_config.sharding_strategy: {name[:30]!r} is not one of {', '.join(STRATEGIES)}")
    zero, reshard, hybrid = STRATEGIES[name]
    r.read("fsdp_config.sharding_strategy", name, {"zero": zero, "reshard": "on" if reshard else "off"},
           f"{name}: ZeRO-{zero}" + ("" if reshard else ", parameters kept gathered from forward to backward"))
    replicate = block.pop("data_parallel_replicate_degree", None)
    if hybrid or isinstance(replicate, int) and replicate > 1:
        if isinstance(replicate, int) and replicate > 1:
            r.read("fsdp_config.data_parallel_replicate_degree", replicate, {"fix_replicate": replicate})
        else:
            r.unsupported("(hybrid sharding)", name, "sharded within a node, copied across nodes: give "
                          "data_parallel_replicate_degree (the node count) to count it")
    block.pop("data_parallel_shard_degree", None)
    mode = block.pop("mixed_precision", "DEFAULT")
    mode = str(mode).upper() if isinstance(mode, str) else mode
    if mode in REDUCE_BYTES and precision in PRECISIONS:
        r.read("fsdp_config.mixed_precision", mode, {"grad_reduce_bytes": REDUCE_BYTES[mode]},
               f"gradients reduced in {'fp32' if mode == 'DEFAULT' else 'the training precision'}")
    else:
        r.unsupported("fsdp_config.mixed_precision", mode, "FULL (fp32 compute) or a custom policy is not modelled")
    checkpointing = bool(block.pop("activation_checkpointing", False))
    r.read("fsdp_config.activation_checkpointing", checkpointing, {"recompute": "full" if checkpointing else "none"},
           "recompute = full: each block" if checkpointing else "recompute = none")
    offload = bool(block.pop("cpu_offload", False))
    r.read("fsdp_config.cpu_offload", offload, {"offload": "optimizer+params" if offload else "none"})
    if block.pop("activation_cpu_offload", False):
        r.unsupported("fsdp_config.activation_cpu_offload", True, "activations offloaded to the CPU are not modelled")
    for key, value in block.items():
        (r.no_effect if key in FSDP_NO_EFFECT else r.unsupported)(
            f"fsdp_config.{key}", value, "prefetch, wrapping and checkpoint format" if key in FSDP_NO_EFFECT
            else "not read")


def _tensor(block: dict, r: Reading) -> None:
    degree = block.pop("tensor_parallel_degree", 1)
    if isinstance(degree, int) and degree > 1:
        r.read("parallelism_config.tp.tensor_parallel_degree", degree, {"fix_t": degree, "sp": "on"},
               f"t = {degree} (PyTorch's tensor parallel plan with sequence-parallel norms)")
    for key, value in block.items():
        r.no_effect(f"parallelism_config.tp.{key}", value, "the layer plan: the planner's Megatron-style split")
