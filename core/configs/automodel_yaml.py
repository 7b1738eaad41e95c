"""A NeMo Automodel recipe YAML (`automodel <recipe>.yaml` or `torchrun ... -c x.yaml`; examples/llm_pretrain,
llm_finetune, llm_benchmark): the model by its hub id (`NeMoAutoModelForCausalLM.from_pretrained` or `from_config`),
the step scheduler's global and local batch, the sequence (the dataset's seq_len or the packed size), and the
`distributed` section: FSDP2 (or Megatron-FSDP, or DDP) with tensor, context, pipeline and expert degrees, sequence
parallelism, activation checkpointing, compile, resharding and the pipeline's schedule, micro-batch and layers per
stage. Automodel builds its models in bf16 by default (`torch_dtype` auto) and FSDP2 keeps those shards, so unless
the optimizer keeps an fp32 master (Transformer Engine's FusedAdam with master_weights) the run trains in pure bf16.
The MoE backend's dispatcher (DeepEP, HybridEP) and grouped experts are read; LoRA (`peft`) is refused.
"""

from __future__ import annotations

import math

from core.configs import hub, interpolation, torchtitan_toml
from core.configs import model as model_of
from core.configs.account import ADAPTERS, Reading, yaml_object
from core.configs.bridge_recipe import hub_preset
from core.configs.torchtitan_flavors import flavor
from core.errors import InputError
from core.model import presets

STRATEGIES = {"fsdp2": 3, "megatron_fsdp": 3, "ddp": 0}
# Automodel's pp_schedule names are PyTorch pipelining's (torch.distributed.pipelining), as torchtitan's, in lower case
SCHEDULES = {name.lower(): key for name, key in torchtitan_toml.SCHEDULES.items()}
GPUS_PER_NODE = 8  # the DGX servers Automodel's benchmark tables ran on; `benchmark.num_nodes` counts them
NO_EFFECT = {"recipe", "seed", "dist_env", "checkpoint", "dataloader", "validation_dataset", "validation_dataloader",
             "lr_scheduler", "wandb", "mlflow", "ci", "clip_grad_norm", "auto_resume", "rng", "tokenizer",
             "processor", "logging", "packed_sequence", "dataset"}
DIST_NO_EFFECT = {"_target_", "enable_fsdp2_prefetch", "enable_async_tensor_parallel", "patch_is_packed_sequence",
                  "defer_fsdp_grad_sync", "mp_policy", "offload_policy", "backend", "moe"}


def is_automodel(data: object) -> bool:
    model = data.get("model") if isinstance(data, dict) else None
    return isinstance(model, dict) and str(model.get("_target_", "")).startswith("nemo_automodel.") and (
        "step_scheduler" in data)


def read(text: str, source: str = "recipe.yaml") -> Reading:
    data = interpolation.resolve(yaml_object(text, source, is_automodel, "a NeMo Automodel recipe (a "
                                             "nemo_automodel model and a step_scheduler)"))
    if data.get("peft"):
        raise InputError(f"peft: LoRA {ADAPTERS}")
    r = Reading("automodel", "torch", source=source)
    model = dict(data.pop("model"))
    _model(model, r)
    dist = dict(data.pop("distributed", None) or {})
    pipeline = dict(dist.pop("pipeline", None) or {})
    pp = dist.get("pp_size") if isinstance(dist.get("pp_size"), int) else 1
    _batch(dict(data.pop("step_scheduler")), pipeline if pp > 1 else {}, r)
    _seq(data, r)
    _distributed(dist, r)
    _pipeline(pipeline, pp, r)
    policy = dist.get("mp_policy") if isinstance(dist.get("mp_policy"), dict) else {}
    _precision(str(model.get("torch_dtype", "auto")), dict(data.pop("optimizer", None) or {}),
               str(policy.get("reduce_dtype", "float32")), r)
    _loss(dict(data.pop("loss_fn", None) or {}), r)
    bench = data.pop("benchmark", None) or {}
    nodes = bench.get("num_nodes") if isinstance(bench, dict) else None
    if isinstance(nodes, int) and nodes > 0:
        r.assume("gpus", nodes * GPUS_PER_NODE, f"benchmark.num_nodes {nodes} x {GPUS_PER_NODE} GPUs per server")
    for key, value in data.items():
        (r.no_effect if key in NO_EFFECT else r.unsupported)(key, value, "data, checkpoints and logging: no bytes, "
                                                             "no time" if key in NO_EFFECT else "not read")
    return r


def _model(model: dict, r: Reading) -> None:
    config = model.get("config")
    hub_id = str(model.get("pretrained_model_name_or_path") or (config.get("pretrained_model_name_or_path")
                                                                if isinstance(config, dict) else "") or "")
    if hub_preset(hub_id) == "deepseek-v3":  # Automodel builds no MTP depth: the shape without it (torchtitan's)
        arch, src = flavor("deepseek_v3", "671B")
        r.read("model.pretrained_model_name_or_path", hub_id, {}, f"DeepSeek-V3 without the multi-token prediction "
               f"depth Automodel's model does not build ({src})")
        model_of.settle(r, arch)
    elif not hub.read(hub_id, "model.pretrained_model_name_or_path", r):
        raise InputError(f"model.pretrained_model_name_or_path: {hub_id[:60]!r} is not a hub id the checker maps to "
                         "a preset; give the model's config.json with the file, or --model")
    backend = model.get("backend") if isinstance(model.get("backend"), dict) else {}
    dispatcher = str(backend.get("dispatcher", ""))
    if dispatcher in ("deepep", "hybridep"):
        r.read("model.backend.dispatcher", dispatcher, {"moe_dispatcher": "deepep"},
               "moe_dispatcher = deepep" + (" (HybridEP timed as DeepEP's forwarding)" if dispatcher == "hybridep"
                                             else ""))
    attn = backend.get("attn")
    if attn is not None:
        r.read("model.backend.attn", attn, {"repeat_kv": False}, f"repeat_kv = false: {attn} attention takes K and "
               "V at their own width (Transformer Engine's num_gqa_groups, FlexAttention's and SDPA's enable_gqa)")
    experts = backend.get("experts")
    if experts is not None:
        r.read("model.backend.experts", experts, {"grouped_gemm": experts != "torch"})


def _batch(sched: dict, pipeline: dict, r: Reading) -> None:
    batch, local = sched.pop("global_batch_size", None), sched.pop("local_batch_size", None)
    if isinstance(batch, int) and batch > 0:
        r.read("step_scheduler.global_batch_size", batch, {"batch": batch})
    micro = pipeline.get("pp_microbatch_size") if pipeline else None
    micro = micro if isinstance(micro, int) and micro > 0 else local
    if isinstance(micro, int) and micro > 0:
        r.read("pipeline.pp_microbatch_size" if pipeline.get("pp_microbatch_size") else
               "step_scheduler.local_batch_size", micro, {"mb_sizes": micro})
    for key, value in sched.items():
        r.no_effect(f"step_scheduler.{key}", value, "steps, checkpoints and validation: no bytes, no time")


def _seq(data: dict, r: Reading) -> None:
    dataset = data.get("dataset") if isinstance(data.get("dataset"), dict) else {}
    packed = data.get("packed_sequence") if isinstance(data.get("packed_sequence"), dict) else {}
    for name, value in (("dataset.seq_len", dataset.get("seq_len")),
                        ("packed_sequence.packed_sequence_size", packed.get("packed_sequence_size"))):
        if isinstance(value, int) and value > 0:
            r.read(name, value, {"seq": value})
            return
    r.unsupported("dataset", str(dataset.get("_target_", ""))[-40:], "the sequence is the dataset's: give --seq")


def _distributed(dist: dict, r: Reading) -> None:
    strategy = str(dist.pop("strategy", "fsdp2"))
    if strategy not in STRATEGIES:
        raise InputError(f"distributed.strategy: {strategy[:30]!r} is not one of {', '.join(STRATEGIES)}")
    r.read("distributed.strategy", strategy, {"zero": STRATEGIES[strategy], **(
        {"memory_framework": "megatron"} if strategy == "megatron_fsdp" else {"memory_framework": "torch"})})
    for key, target in (("tp_size", "fix_t"), ("cp_size", "fix_cp"), ("pp_size", "fix_p"), ("ep_size", "fix_ep"),
                        ("dp_replicate_size", "fix_replicate"), ("dp_size", "fix_d")):
        size = dist.pop(key, None)
        if isinstance(size, int) and not isinstance(size, bool) and size >= 1:
            r.read(f"distributed.{key}", size, {target: size, **({"fix_etp": 1} if key == "ep_size" and size > 1
                                                                 else {})})
    sp = bool(dist.pop("sequence_parallel", False))
    r.read("distributed.sequence_parallel", sp, {"sp": "on" if sp else "off"})
    ac = bool(dist.pop("activation_checkpointing", False))
    r.read("distributed.activation_checkpointing", ac, {"recompute": "full" if ac else "none"})
    if "enable_compile" in dist:
        compiled = bool(dist.pop("enable_compile"))
        r.read("distributed.enable_compile", compiled, {"compile": compiled})
    if "reshard_after_forward" in dist:
        reshard = bool(dist.pop("reshard_after_forward"))
        r.read("distributed.reshard_after_forward", reshard, {"reshard": "on" if reshard else "off"})
    offload = dist.get("offload_policy")
    if offload:
        r.read("distributed.offload_policy", "CPUOffloadPolicy", {"offload": "optimizer+params"})
    for key, value in dist.items():
        (r.no_effect if key in DIST_NO_EFFECT else r.unsupported)(
            f"distributed.{key}", value, "prefetch, wrapping and precision policy (read with the model's dtype)"
            if key in DIST_NO_EFFECT else "not read")


def _pipeline(pipeline: dict, pp: int, r: Reading) -> None:
    if pp <= 1:
        return
    schedule = str(pipeline.get("pp_schedule", "1f1b")).lower()
    if schedule not in SCHEDULES:
        r.unsupported("distributed.pipeline.pp_schedule", schedule, "not a schedule the simulator runs; 1F1B taken")
    sets = {"schedule": SCHEDULES.get(schedule, SCHEDULES["1f1b"])}
    per_stage = pipeline.get("layers_per_stage")
    if sets["schedule"] not in (SCHEDULES["1f1b"], SCHEDULES["gpipe"]) and isinstance(per_stage, int) and per_stage > 0:
        layers = _layers(r)
        if layers:
            stages = math.ceil(layers / per_stage)
            rounding = str(pipeline.get("round_virtual_stages_to_pp_multiple", "up"))
            stages = (stages // pp if rounding == "down" else math.ceil(stages / pp)) * pp
            sets["v"] = max(stages // pp, 2)
    r.read("distributed.pipeline", f"{schedule}, {per_stage} layers per stage", sets)


def _layers(r: Reading) -> int:
    key = r.raw.get("model", "")
    return int(r.raw.get("layers", 0)) if key == "custom" else presets.model(key).layers if key else 0


def _precision(dtype: str, optimizer: dict, reduce: str, r: Reading) -> None:
    """bf16 by default (torch_dtype auto selects bfloat16), fp32 shards when the model is built in float32; a
    Transformer Engine FusedAdam with master_weights keeps an fp32 master (as 16-bit remainders when asked). FSDP2
    reduces in the policy's reduce_dtype (Automodel's default float32) into shards of the parameters' dtype."""
    name = str(optimizer.get("_target_", "torch.optim.AdamW")).rsplit(".", 1)[-1]
    master = bool(optimizer.get("master_weights", False))
    r.read("optimizer._target_", name, {"optimizer": "adam"})
    fp32 = dtype in ("float32", "fp32", "torch.float32")
    kind = "fp32" if fp32 or master else "pure-bf16"
    sets = {"precision": "bf16", "optimizer_dtype": kind, **({} if fp32 else {"grad_dtype": "bf16"})}
    r.read("model.torch_dtype", dtype, sets,
           "optimizer_dtype = pure-bf16: the model built in bf16 (Automodel's default) and FSDP2 keeping those "
           "shards, no fp32 master" if kind == "pure-bf16" else "optimizer_dtype = fp32: an fp32 master (fp32 "
           "shards, or FusedAdam's master_weights)" + ("" if fp32 else "; gradient shards in bf16"))
    wide = "32" in reduce
    r.read("distributed.mp_policy.reduce_dtype", reduce, {"grad_reduce_bytes": 4 if wide else 2},
           f"gradients reduced in {'fp32' if wide else '16 bits'}")
    if master and optimizer.get("store_param_remainders"):
        r.unsupported("optimizer.store_param_remainders", True, "the master kept as 16-bit remainders: 2 bytes per "
                      "parameter fewer than counted")


def _loss(loss: dict, r: Reading) -> None:
    """MaskedCrossEntropy upcasts the logits to fp32 unless fp32_upcast is false (then the 16-bit kernel);
    FusedLinearCrossEntropy computes the loss chunk by chunk with no logits kept (the chunked kernel)."""
    name = str(loss.get("_target_", "MaskedCrossEntropy")).rsplit(".", 1)[-1]
    if name == "FusedLinearCrossEntropy":
        kernel = "chunked"
    elif name == "MaskedCrossEntropy":
        kernel = "upcast" if loss.get("fp32_upcast", True) is not False else "bf16"
    else:
        r.unsupported("loss_fn._target_", name, "not a loss the checker knows; the framework's default counted")
        return
    r.read("loss_fn", f"{name}" + ("" if kernel != "bf16" else " (fp32_upcast false)"), {"loss": kernel})

