"""A torchtune recipe config (`tune run --nproc_per_node N full_finetune_distributed --config x.yaml`;
recipes/configs/<family>/*_full.yaml): the model from its builder (`torchtune.models.llama3_1.llama3_1_8b`), the
per-GPU batch and accumulation, the sequence cap, FSDP2 with CPU offload and the 2025 device-mesh sizes (tensor,
replicate, context), activation checkpointing, compile, the dtype, the optimizer and the loss. torchtune shards
every decoder layer with FSDP2 (`fully_shard`, parameters resharded after the forward). LoRA / QLoRA builders,
quantization-aware training and preference or RL recipes (a reference or reward model beside the trained one) are
refused with one line; `${key}` references are resolved (core.configs.interpolation).
"""

from __future__ import annotations

import re

from core.configs import interpolation
from core.configs import model as model_of
from core.configs.account import ADAPTERS, Reading, yaml_object
from core.configs.torchtitan_flavors import flavor
from core.cost import releases
from core.errors import InputError

# builder name -> (torchtitan flavor family, size): Llama 3 / 3.1 / 3.2 / 3.3 and Qwen3, the shapes the importer has
BUILDERS = ((r"llama3(?:_[123])?_(8|70|405|1|3)b", "llama3"), (r"qwen3_(0_6|1_7|4|8|14|32)b(?:_base|_instruct)?",
                                                                 "qwen3"), (r"qwen3_(30b_a3b|235b_a22b)\w*", "qwen3"))
OPTIMIZERS = {"AdamW": "adam", "Adam": "adam", "PagedAdamW8bit": "adam-8bit", "AdamW8bit": "adam-8bit",
              "SGD": "sgd-momentum"}
DTYPES = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16"}
REFUSED = ("ppo", "dpo", "kd", "reward", "ref_", "policy_model", "teacher")
NO_EFFECT = {"output_dir", "tokenizer", "dataset", "seed", "shuffle", "run_val_every_n_steps", "dataset_val",
             "batch_size_val", "checkpointer", "resume_from_checkpoint", "epochs", "max_steps_per_epoch",
             "clip_grad_norm", "device", "custom_sharded_layers", "metric_logger", "log_every_n_steps",
             "log_peak_memory_stats", "log_level", "profiler", "lr_scheduler", "tensor_parallel_plan",
             "data_parallel_shard_dim", "collate_fn", "save_every_n_steps", "keep_last_n_checkpoints",
             "cudnn_deterministic_mode", "tokenizer_max_seq_len"}


def is_torchtune(data: object) -> bool:
    model = data.get("model") if isinstance(data, dict) else None
    return isinstance(model, dict) and str(model.get("_component_", "")).startswith("torchtune.models.") and (
        "batch_size" in data)


def read(text: str, source: str = "config.yaml") -> Reading:
    data = interpolation.resolve(yaml_object(text, source, is_torchtune, "a torchtune recipe config (a "
                                             "torchtune.models builder and a batch_size)"))
    _refuse(data)
    r = Reading("torchtune", "torch", source=source)
    timed = f"timed with the base records ({releases.base()}'s), the FlashAttention-2 rate of PyTorch's SDPA"
    if "full_finetune_single_device" in text:  # the config's own header names the recipe it is for
        r.read("(recipe)", "full_finetune_single_device", {"memory_framework": "torch", "gpus": 1, "zero": 0,
                                                          "release": releases.base()},
               f"one GPU holds the whole model states (the file's header names the single-device recipe); {timed}")
    else:
        r.read("(recipe)", "full_finetune_distributed", {"memory_framework": "torch", "zero": 3, "reshard": "on",
                                                        "release": releases.base()},
               f"FSDP2 on every decoder layer (ZeRO-3, resharded after the forward): PyTorch's bytes; {timed}")
    _model(str(data.pop("model")["_component_"]), r)
    seq = (data.get("tokenizer") or {}).get("max_seq_len")
    if isinstance(seq, int) and seq > 0:
        r.read("tokenizer.max_seq_len", seq, {"seq": seq})
    else:
        r.unsupported("tokenizer.max_seq_len", seq, "null: each batch is as long as its longest sample; give --seq")
    micro = data.pop("batch_size")
    r.read("batch_size", micro, {"mb_sizes": micro}, f"micro-batch = {micro} per GPU")
    accumulation = data.pop("gradient_accumulation_steps", 1)
    r.read("gradient_accumulation_steps", accumulation, {}, f"batch = {micro} x {accumulation} x d (d from the "
           "GPUs given at launch)")
    r.accumulation = accumulation if isinstance(accumulation, int) and accumulation > 0 else 1
    _memory(data, r)
    _mesh(data, r)
    for key, value in data.items():
        (r.no_effect if key in NO_EFFECT else r.unsupported)(key, value, "data, checkpoints and logging: no bytes, "
                                                             "no time" if key in NO_EFFECT else "not read")
    return r


def _refuse(data: dict) -> None:
    builder = str(data["model"].get("_component_", ""))
    if "lora" in builder.rsplit(".", 1)[-1]:
        raise InputError(f"model: {builder.rsplit('.', 1)[-1][:40]}: LoRA / QLoRA {ADAPTERS}")
    if "quantizer" in data:
        raise InputError("quantizer: quantization-aware training (fake-quantized weights and activations) is not "
                         "modelled")
    loss = str((data.get("loss") or {}).get("_component_", "")).lower()
    if any(k in data for k in ("ref_checkpointer", "policy_model", "teacher_model")) or any(
            w in loss for w in ("dpo", "ppo", "kd_loss", "distill")):
        raise InputError("a preference, RL or distillation recipe (a reference, reward or teacher model beside the "
                         "trained one) is not modelled; the planner counts pre-training and SFT")


def _model(builder: str, r: Reading) -> None:
    name = builder.rsplit(".", 1)[-1]
    for pattern, family in BUILDERS:
        m = re.fullmatch(pattern, name)
        if m:
            size = _size(m.group(1))
            arch, src = flavor(family, size)
            r.read("model._component_", builder, {}, f"{family} {size}: {src}")
            model_of.settle(r, arch)
            return
    raise InputError(f"model._component_: {name[:40]!r} is not a builder the checker maps to a shape (Llama 3.x, "
                     "Qwen3); give the model's Hugging Face config.json with the file, or --model")


def _size(group: str) -> str:
    """A builder's size as the flavor names it: '0_6' -> '0.6B', '30b_a3b' -> '30B-A3B'."""
    if "_a" in group:
        total, active = group.split("_a")
        return f"{total.upper()}-A{active.upper()}"
    return group.replace("_", ".") + "B"


def _memory(data: dict, r: Reading) -> None:
    dtype = str(data.pop("dtype", "bf16"))
    r.read("dtype", dtype, {"precision": DTYPES.get(dtype, "bf16"), "grad_dtype": "bf16",
                            "optimizer_dtype": "pure-bf16"},
           "optimizer_dtype = pure-bf16: the model is built in this dtype (recipes/full_finetune_distributed.py: "
           "training.set_default_dtype) and FSDP2 has no mixed-precision policy, so 16-bit weight shards, gradients "
           "(reduced in 16 bits) and Adam moments, with no fp32 master")
    if dtype not in DTYPES:
        r.unsupported("dtype", dtype, "fp32 training is not modelled; counted as bf16")
    ac = bool(data.pop("enable_activation_checkpointing", False))
    r.read("enable_activation_checkpointing", ac, {"recompute": "full" if ac else "none"},
           "recompute = full: each decoder layer" if ac else "recompute = none")
    if data.pop("enable_activation_offloading", False):
        r.unsupported("enable_activation_offloading", True, "activations offloaded to the CPU are not modelled")
    offload = bool(data.pop("fsdp_cpu_offload", False))
    r.read("fsdp_cpu_offload", offload, {"offload": "optimizer+params" if offload else "none"})
    compiled = bool(data.pop("compile", False))
    r.read("compile", compiled, {"compile": compiled})
    r.assume("repeat_kv", True, "torchtune's MultiHeadAttention expands K and V to every query head before the "
             "attention (torchtune/modules/attention.py: k.unsqueeze(2).expand(...).flatten(1, 2), a copy), which "
             "keeps them at that width")
    optimizer = str((data.pop("optimizer", None) or {}).get("_component_", "torch.optim.AdamW")).rsplit(".", 1)[-1]
    r.read("optimizer._component_", optimizer, {"optimizer": OPTIMIZERS.get(optimizer, "adam")})
    if optimizer not in OPTIMIZERS:
        r.unsupported("optimizer._component_", optimizer, "not an optimizer the planner counts; counted as Adam")
    if data.pop("optimizer_in_bwd", False):
        r.unsupported("optimizer_in_bwd", True, "each gradient applied and freed in the backward: the gradients the "
                      "planner holds are not held")
    loss = str((data.pop("loss", None) or {}).get("_component_", "")).rsplit(".", 1)[-1]
    chunked = loss in ("LinearCrossEntropyLoss", "CEWithChunkedOutputLoss")
    r.read("loss._component_", loss, {"loss": "chunked" if chunked else "upcast"},
           "loss = chunked (the output projection and cross-entropy a chunk of tokens at a time)" if chunked else
           "loss = upcast (the cross-entropy on an fp32 copy of the logits)")


def _mesh(data: dict, r: Reading) -> None:
    """The 2025 device-mesh sizes of full_finetune_distributed (tensor, replicate, context; the shard dim is the
    rest)."""
    for key, target in (("tensor_parallel_dim", "fix_t"), ("context_parallel_dim", "fix_cp"),
                        ("data_parallel_replicate_dim", "fix_replicate")):
        size = data.pop(key, 1)
        if isinstance(size, int) and not isinstance(size, bool) and size > 1:
            r.read(key, size, {target: size, **({"sp": "on"} if target == "fix_t" else {})})
        elif key in ("tensor_parallel_dim",):
            r.read(key, size, {}, "no tensor parallelism")
