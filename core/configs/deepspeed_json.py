"""A DeepSpeed JSON config (deepspeed/runtime/config.py and zero/config.py key names), plus, read the same way, the
Python setup that builds DeepSpeed's pipeline topology (a syntax tree: nothing runs).

The JSON holds the batch, precision, ZeRO stage and offload; t and p live in code (a PipelineModule over a
PipeModelDataParallelTopology), and the model in the user's code or a Hugging Face config.json given alongside.
"""

from __future__ import annotations

import ast

from core.configs.account import Reading, json_object, python_tree
from core.errors import InputError

DEFAULT_BUCKET = 500_000_000  # DeepSpeed's reduce_bucket_size / allgather_bucket_size default (elements)
NO_EFFECT = (
    "gradient_clipping", "steps_per_print", "wall_clock_breakdown", "scheduler", "prescale_gradients",
    "gradient_predivide_factor", "dump_state", "tensorboard", "wandb", "csv_monitor", "comms_logger", "flops_profiler",
    "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "memory_breakdown", "checkpoint",
    "data_efficiency", "elasticity", "autotuning", "seed", "logging", "sparse_gradients", "disable_allgather",
    "aio", "amp", "monitor_config", "train_batch_size_per_gpu", "timers", "weight_quantization")
ZERO_NO_EFFECT = (
    "contiguous_gradients", "overlap_comm", "reduce_scatter", "allgather_partitions", "round_robin_gradients",
    "stage3_gather_16bit_weights_on_model_save", "gather_16bit_weights_on_model_save", "load_from_fp32_weights",
    "elastic_checkpoint", "ignore_unused_parameters", "legacy_stage1", "cpu_offload", "memory_efficient_linear",
    "mics_hierarchical_params_gather", "use_multi_rank_bucket_allreduce", "log_trace_cache_warnings",
    "zero_quantized_weights", "zero_quantized_gradients", "zero_hpz_partition_size", "sub_group_size",
    "stage3_param_persistence_threshold", "stage3_max_live_parameters", "stage3_max_reuse_distance",
    "stage3_prefetch_bucket_size", "prefetch_bucket_size", "param_persistence_threshold", "max_live_parameters",
    "max_reuse_distance", "module_granularity_threshold")


def read(text: str, source: str = "ds_config.json") -> Reading:
    data = json_object(text, source)
    r = Reading("deepspeed", "deepspeed", source=source)
    _batch(data, r)
    _precision(data, r)
    _zero(data.pop("zero_optimization", None), r)
    _recompute(data, r)
    optimizer = data.pop("optimizer", None)
    if isinstance(optimizer, dict):
        kind = str(optimizer.get("type", "Adam"))
        sgd = kind.lower() == "sgd"
        r.read("optimizer.type", kind, {"optimizer": "sgd-momentum" if sgd else "adam"})
        if kind.lower() not in ("adam", "adamw", "fusedadam", "cpuadam", "deepspeedcpuadam", "sgd"):
            r.unsupported("optimizer.type", kind, "counted as Adam's state (two fp32 moments)")
        for key, value in optimizer.items():
            if key != "type":
                r.no_effect(f"optimizer.{key}", value, "optimizer hyperparameters")
    comm = data.pop("communication_data_type", None)
    if comm is not None:
        r.read("communication_data_type", comm, {"grad_reduce_bytes": 4 if str(comm).startswith("fp32") else 2})
    tp = data.pop("tensor_parallel", None)
    if isinstance(tp, dict) and isinstance(tp.get("autotp_size"), int):
        r.read("tensor_parallel.autotp_size", tp["autotp_size"], {"fix_t": tp["autotp_size"]})
    elif tp is not None:
        r.unsupported("tensor_parallel", tp, "no whole-number autotp_size; t is not read")
    ulysses = data.pop("sequence_parallel_size", None)
    if ulysses not in (None, 1):
        r.unsupported("sequence_parallel_size", ulysses, "Ulysses sequence parallelism is not modelled")
    pipe = data.pop("pipeline", None)
    if isinstance(pipe, dict):
        for key, value in pipe.items():
            if key == "activation_checkpoint_interval" and isinstance(value, int):
                r.read("pipeline.activation_checkpoint_interval", value,
                       {"recompute": "full" if value else "none"})
            else:
                r.no_effect(f"pipeline.{key}", value, "pipeline engine options with no bytes or time of their own")
    for key, value in data.items():
        if key in NO_EFFECT:
            r.no_effect(key, value, "logging, clipping, schedules and tools: no bytes, no time")
        else:
            r.unsupported(key, value, "not a key the importer knows; its effect is not counted")
    return r


def _auto(value: object) -> bool:
    return isinstance(value, str) and value.lower() == "auto"


def _batch(data: dict, r: Reading) -> None:
    total, micro, accum = (data.pop(k, None) for k in ("train_batch_size", "train_micro_batch_size_per_gpu",
                                                       "gradient_accumulation_steps"))
    for name, value in (("train_batch_size", total), ("train_micro_batch_size_per_gpu", micro),
                        ("gradient_accumulation_steps", accum)):
        if _auto(value):
            r.unsupported(name, value, "'auto' is filled in by the Hugging Face Trainer at launch; give it")
    total, micro, accum = (v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None
                           for v in (total, micro, accum))
    if micro:
        r.read("train_micro_batch_size_per_gpu", micro, {"mb_sizes": micro})
    if total:
        r.read("train_batch_size", total, {"batch": total})
    if accum:
        if total and micro:
            if total % (micro * accum):
                raise InputError(f"{r.source}: train_batch_size {total} is not micro-batch {micro} x accumulation "
                                 f"{accum} x data-parallel ranks (DeepSpeed asserts it)")
            d = total // (micro * accum)
            r.read("gradient_accumulation_steps", accum, {"fix_d": d},
                   f"d = {total} / ({micro} x {accum}) = {d} data-parallel ranks")
        else:
            r.read("gradient_accumulation_steps", accum, {}, "with the batch and micro-batch: d")


def _precision(data: dict, r: Reading) -> None:
    for key in ("bf16", "fp16"):
        block = data.pop(key, None)
        if isinstance(block, dict) and block.get("enabled") in (True, "true"):
            r.read(f"{key}.enabled", "true", {"precision": key})
            for k, v in block.items():
                if k != "enabled":
                    r.no_effect(f"{key}.{k}", v, "loss scaling and casting options: no bytes, no time")
        elif block is not None:
            r.no_effect(key, block, "not enabled")
    if "precision" not in r.raw:
        r.unsupported("(precision)", "fp32", "neither bf16 nor fp16 is enabled: DeepSpeed trains in fp32, which "
                      "the planner does not model; counted as bf16")
        r.raw["precision"] = "bf16"


def _zero(block: object, r: Reading) -> None:
    if block is not None and not isinstance(block, dict):
        r.unsupported("zero_optimization", block, "not a block of options; DeepSpeed's stage 0 assumed")
    if not isinstance(block, dict):
        r.assume("zero", 0, "no zero_optimization block: DeepSpeed's stage 0")
        r.raw["offload"] = "none"
        return
    block = dict(block)
    stage = block.pop("stage", 0)
    if stage not in (0, 1, 2, 3):
        raise InputError(f"{r.source}: zero_optimization.stage {stage!r} is not 0-3")
    r.read("zero_optimization.stage", stage, {"zero": stage})
    opt, par = block.pop("offload_optimizer", None), block.pop("offload_param", None)
    devices = [b.get("device", "none") if isinstance(b, dict) else "none" for b in (opt, par)]
    offload = "optimizer+params" if devices[1] in ("cpu", "nvme") else "optimizer" if devices[0] in ("cpu", "nvme") \
        else "none"
    r.read("zero_optimization.offload_optimizer", devices[0], {"offload": offload})
    r.read("zero_optimization.offload_param", devices[1], {}, f"with the optimizer's: offload = {offload}")
    if "nvme" in devices:
        r.unsupported("offload device", "nvme", "NVMe offload is timed as CPU offload over PCIe")
    _mics(block.pop("mics_shard_size", None), stage, r)
    for key in ("reduce_bucket_size", "allgather_bucket_size"):
        value = block.pop(key, None)
        if value is None or _auto(value) or value == DEFAULT_BUCKET:
            r.no_effect(f"zero_optimization.{key}", value, "DeepSpeed's default bucket, which the accounting counts")
        else:
            r.unsupported(f"zero_optimization.{key}", value, f"the accounting counts DeepSpeed's default "
                          f"{DEFAULT_BUCKET:.0e}-element bucket")
    for key, value in block.items():
        if key in ZERO_NO_EFFECT:
            r.no_effect(f"zero_optimization.{key}", value, "overlap and prefetch tuning: not modelled apart")
        else:
            r.unsupported(f"zero_optimization.{key}", value, "not a key the importer knows")


def _mics(size: object, stage: int, r: Reading) -> None:
    """MiCS (DeepSpeed before 0.19.8; that release rejects the key): ZeRO-3 within groups of `size` ranks,
    replicated across the groups: hybrid sharding with d / size copies."""
    if size is None or size == -1:
        return
    d = int(r.raw.get("fix_d", "0") or 0)
    if stage != 3 or not isinstance(size, int) or isinstance(size, bool) or size < 1 or not d or d % size:
        r.unsupported("zero_optimization.mics_shard_size", size, "MiCS needs ZeRO-3 and a group size dividing the "
                      "data-parallel ranks (read from the batch); counted as ZeRO over all of them")
        return
    r.read("zero_optimization.mics_shard_size", size, {"fix_replicate": d // size},
           f"hybrid sharding (MiCS): ZeRO-3 within {size} ranks, {d // size} copies; DeepSpeed 0.19.8 removed MiCS "
           "and rejects this key")


def _recompute(data: dict, r: Reading) -> None:
    block = data.pop("activation_checkpointing", None)
    if isinstance(block, dict):  # it configures deepspeed.checkpointing, which model code calls once per layer
        r.read("activation_checkpointing", "{...}", {"recompute": "full"}, "recompute = full: whole layers, where "
               "the model calls deepspeed.checkpointing.checkpoint (Megatron-DeepSpeed's --checkpoint-activations)")
        for key, value in block.items():
            if key in ("partition_activations", "cpu_checkpointing") and value:
                r.unsupported(f"activation_checkpointing.{key}", value, "not modelled (activations counted on "
                              "every tensor-parallel rank, on the GPU)")
            else:
                r.no_effect(f"activation_checkpointing.{key}", value, "applies only where model code calls "
                            "deepspeed.checkpointing")


def read_setup(text: str, source: str = "setup.py") -> Reading:
    """DeepSpeed pipeline setup code: PipeModelDataParallelTopology(num_pp, num_mp, num_dp) and
    PipelineModule(activation_checkpoint_interval=...), read from the syntax tree."""
    tree = python_tree(text, source)
    r = Reading("deepspeed", "deepspeed", source=source)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", getattr(node.func, "attr", ""))
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if name == "PipeModelDataParallelTopology":
            for arg, key in (("num_pp", "fix_p"), ("num_mp", "fix_t"), ("num_dp", "fix_d")):
                value = _literal(kw.get(arg))
                if isinstance(value, int):
                    r.read(f"PipeModelDataParallelTopology({arg})", value, {key: value})
        elif name == "PipelineModule" and "activation_checkpoint_interval" in kw:
            value = _literal(kw["activation_checkpoint_interval"])
            if isinstance(value, int):
                r.read("PipelineModule(activation_checkpoint_interval)", value,
                       {"recompute": "full" if value else "none"})
    if not r.entries:
        raise InputError(f"{source}: no DeepSpeed pipeline topology found")
    return r


def _literal(node: ast.AST | None) -> object:
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, SyntaxError):
        return None
