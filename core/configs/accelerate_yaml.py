"""A Hugging Face Accelerate config (`accelerate config`'s default_config.yaml, keys of accelerate/commands/config):
how many processes, which distributed engine (FSDP 1 or 2, DeepSpeed, DDP), its sharding, offload and activation
checkpointing, mixed precision, and (Accelerate >= 1.10) the tensor / context / data sharding sizes of
`parallelism_config`. The model is the Hugging Face config.json given with it; the batch and the sequence are the
training script's, so they are assumed unless given (--global-batch, --seq).
"""

from __future__ import annotations

from core.configs.account import Reading, yaml_object
from core.errors import InputError

# FSDP 1 sharding strategies by name or by their number (torch.distributed.fsdp.ShardingStrategy, 1-5)
# (ZeRO stage, parameters resharded after the forward, hybrid), as the torchtitan reader writes FSDP's policies
STRATEGIES = {"FULL_SHARD": (3, True, False), "SHARD_GRAD_OP": (3, False, False), "NO_SHARD": (0, True, False),
              "HYBRID_SHARD": (3, True, True), "HYBRID_SHARD_ZERO2": (3, False, True)}
NUMBERED = dict(enumerate(("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"), 1))
PRECISIONS = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "no": "bf16"}
NO_EFFECT = {"compute_environment", "debug", "machine_rank", "main_training_function", "rdzv_backend",
             "same_network", "tpu_env", "tpu_use_cluster", "tpu_use_sudo", "use_cpu", "downcast_bf16",
             "main_process_ip", "main_process_port", "gpu_ids", "enable_cpu_affinity", "dynamo_config"}
FSDP_NO_EFFECT = {"fsdp_auto_wrap_policy", "fsdp_backward_prefetch", "fsdp_backward_prefetch_policy",
                  "fsdp_cpu_ram_efficient_loading", "fsdp_forward_prefetch", "fsdp_state_dict_type",
                  "fsdp_sync_module_states", "fsdp_use_orig_params", "fsdp_transformer_layer_cls_to_wrap",
                  "fsdp_min_num_params"}


def is_accelerate(data: object) -> bool:
    return isinstance(data, dict) and "distributed_type" in data and "num_processes" in data


def read(text: str, source: str = "default_config.yaml") -> Reading:
    data = yaml_object(text, source, is_accelerate, "an Accelerate config (no distributed_type and num_processes)")
    kind = str(data.pop("distributed_type"))
    r = Reading("accelerate", "deepspeed" if kind == "DEEPSPEED" else "torch", source=source)
    gpus = _whole(data.pop("num_processes"), "num_processes")
    r.read("num_processes", gpus, {"gpus": gpus}, f"gpus = {gpus} (all machines' processes)")
    machines = _whole(data.pop("num_machines", 1), "num_machines")
    r.no_effect("num_machines", machines, "the GPUs are num_processes; the server size is the GPU preset's")
    precision = str(data.pop("mixed_precision", "no"))
    r.read("mixed_precision", precision, {"precision": PRECISIONS.get(precision, "bf16")})
    if precision == "no":
        r.unsupported("mixed_precision", "no", "fp32 training is not modelled; counted as bf16")
    _parallelism(dict(data.pop("parallelism_config", None) or {}), r)  # a copy: the parsed file is shared
    fsdp, ds = data.pop("fsdp_config", None) or {}, data.pop("deepspeed_config", None) or {}
    if kind == "FSDP":
        _fsdp(dict(fsdp), machines, r)
    elif kind == "DEEPSPEED":
        _deepspeed(dict(ds), r)
    elif kind in ("MULTI_GPU", "NO"):
        r.read("distributed_type", kind, {"zero": 0}, "DDP: every GPU holds the whole model states (ZeRO-0)")
    else:
        raise InputError(f"{source}: distributed_type {kind[:30]!r} is not one the checker reads (FSDP, DEEPSPEED, "
                         "MULTI_GPU)")
    for key, value in data.items():
        (r.no_effect if key in NO_EFFECT else r.unsupported)(key, value, "launch details: no bytes, no time"
                                                             if key in NO_EFFECT else "not read")
    return r


def _whole(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{name}: {str(value)[:20]!r} is not a whole number of at least 1")
    return value


def _parallelism(block: dict, r: Reading) -> None:
    """Accelerate >= 1.10's ND parallelism sizes (ParallelismConfig: dp_replicate, dp_shard, tp, cp)."""
    for key, target in (("parallelism_config_tp_size", "fix_t"), ("parallelism_config_cp_size", "fix_cp")):
        if key in block:
            size = _whole(block.pop(key), key)
            r.read(key, size, {target: size, **({"sp": "on"} if target == "fix_t" and size > 1 else {})})
    if "parallelism_config_dp_replicate_size" in block:
        rep = _whole(block.pop("parallelism_config_dp_replicate_size"), "parallelism_config_dp_replicate_size")
        if rep > 1:
            r.read("parallelism_config_dp_replicate_size", rep, {"fix_replicate": rep})
    for key, value in block.items():
        r.no_effect(key, value, "the shard degree is what the other sizes leave")


def _fsdp(block: dict, machines: int, r: Reading) -> None:
    version = block.pop("fsdp_version", 1)
    if version == 2 or "fsdp_reshard_after_forward" in block and isinstance(block["fsdp_reshard_after_forward"],
                                                                              bool):
        reshard = block.pop("fsdp_reshard_after_forward", True) is not False
        r.read("fsdp_version / fsdp_reshard_after_forward", f"{version} {reshard}",
               {"zero": 3, "reshard": "on" if reshard else "off"},
               "FSDP2: ZeRO-3" + ("" if reshard else ", parameters kept gathered from forward to backward"))
        hybrid = False
    else:
        strategy = block.pop("fsdp_sharding_strategy", block.pop("fsdp_reshard_after_forward", "FULL_SHARD"))
        name = NUMBERED.get(strategy, str(strategy)) if isinstance(strategy, int) else str(strategy)
        if name not in STRATEGIES:
            raise InputError(f"fsdp_sharding_strategy: {str(strategy)[:30]!r} is not one of {', '.join(STRATEGIES)}")
        zero, reshard, hybrid = STRATEGIES[name]
        r.read("fsdp_sharding_strategy", strategy, {"zero": zero, "reshard": "on" if reshard else "off"},
               f"{name}: ZeRO-{zero}" + ("" if reshard else ", parameters kept gathered from forward to backward"))
    if hybrid and machines > 1 and not r.has("fix_replicate"):
        r.read("(hybrid sharding)", machines, {"fix_replicate": machines}, f"sharded within a machine, {machines} "
               "copies (HYBRID_SHARD)")
    offload = bool(block.pop("fsdp_offload_params", block.pop("fsdp_cpu_offload", False)))
    r.read("fsdp_offload_params", offload, {"offload": "optimizer+params" if offload else "none"})
    checkpointing = bool(block.pop("fsdp_activation_checkpointing", False))
    r.read("fsdp_activation_checkpointing", checkpointing, {"recompute": "full" if checkpointing else "none"},
           "recompute = full: each wrapped layer" if checkpointing else "recompute = none")
    for key, value in block.items():
        (r.no_effect if key in FSDP_NO_EFFECT else r.unsupported)(
            f"fsdp_config.{key}", value, "wrapping, prefetch and checkpoint format" if key in FSDP_NO_EFFECT
            else "not read")


def _deepspeed(block: dict, r: Reading) -> None:
    if "deepspeed_config_file" in block:
        r.unsupported("deepspeed_config.deepspeed_config_file", block.pop("deepspeed_config_file"),
                      "give that JSON file too (it holds the ZeRO stage and batch)")
    stage = block.pop("zero_stage", 0)
    r.read("deepspeed_config.zero_stage", stage, {"zero": _whole(stage + 1, "zero_stage") - 1})
    optimizer, params = (str(block.pop(k, "none")) for k in ("offload_optimizer_device", "offload_param_device"))
    offload = "optimizer+params" if params != "none" else "optimizer" if optimizer != "none" else "none"
    r.read("deepspeed_config.offload_optimizer_device", optimizer, {"offload": offload})
    for key, value in block.items():
        r.no_effect(f"deepspeed_config.{key}", value, "accumulation, clipping and init (the batch is the script's)")
