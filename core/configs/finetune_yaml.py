"""The fine-tuning frameworks' run YAMLs: LLaMA-Factory (`llamafactory-cli train x.yaml`: model_name_or_path,
finetuning_type, cutoff_len, per_device_train_batch_size, deepspeed) and Axolotl (`axolotl train x.yml`: base_model,
sequence_len, micro_batch_size, deepspeed or fsdp). Both run Hugging Face's Trainer, so the engine is DeepSpeed
(the ZeRO stage from the named JSON: give the JSON with the file, or its name says ds_z3 / zero3) or PyTorch FSDP,
and gradient checkpointing is full recompute of each decoder layer. Only full-parameter training is modelled: a
LoRA / QLoRA / frozen run, or one with a reference model (DPO, KTO, PPO), is refused with one line.
"""

from __future__ import annotations

import re

from core.configs import hub
from core.configs.account import ADAPTERS, Reading, yaml_object
from core.errors import InputError

STAGE_NO = {"dpo", "kto", "ppo", "rm", "orpo", "simpo", "grpo"}
NO_EFFECT = {"dataset", "dataset_dir", "template", "max_samples", "overwrite_cache", "preprocessing_num_workers",
             "output_dir", "logging_steps", "save_steps", "plot_loss", "overwrite_output_dir", "learning_rate",
             "num_train_epochs", "lr_scheduler_type", "warmup_ratio", "ddp_timeout", "val_size", "eval_strategy",
             "eval_steps", "per_device_eval_batch_size", "trust_remote_code", "do_train", "report_to",
             "save_only_model", "dataloader_num_workers", "resume_from_checkpoint", "datasets",
             "dataset_prepared_path", "num_epochs", "optimizer", "lr_scheduler", "warmup_steps", "saves_per_epoch",
             "evals_per_epoch", "wandb_project", "wandb_entity", "wandb_name", "special_tokens", "tokenizer_type",
             "model_type", "chat_template", "val_set_size", "sample_packing", "pad_to_sequence_len", "seed",
             "weight_decay", "max_grad_norm", "train_on_inputs", "group_by_length", "hub_model_id", "strict", "tf32",
             "xformers_attention", "sdp_attention", "early_stopping_patience", "save_strategy", "eval_sample_packing",
             "max_steps", "mask_history", "save_total_limit"}


def is_finetune(data: object) -> bool:
    return isinstance(data, dict) and (("model_name_or_path" in data and "finetuning_type" in data)
                                       or ("base_model" in data and ("sequence_len" in data
                                                                     or "micro_batch_size" in data)))


def read(text: str, source: str = "train.yaml") -> Reading:
    data = yaml_object(text, source, is_finetune, "a LLaMA-Factory or Axolotl run config")
    axolotl = "base_model" in data
    _method(data, axolotl)
    engine = str(data.get("deepspeed") or "")
    r = Reading("axolotl" if axolotl else "llama-factory", "deepspeed" if engine else "torch", source=source)
    _model(str(data.pop("base_model" if axolotl else "model_name_or_path")), r)
    seq = data.pop("sequence_len" if axolotl else "cutoff_len", None)
    if isinstance(seq, int) and seq > 0:
        r.read("sequence_len" if axolotl else "cutoff_len", seq, {"seq": seq})
    micro = data.pop("micro_batch_size" if axolotl else "per_device_train_batch_size", 1)
    r.read("micro_batch_size" if axolotl else "per_device_train_batch_size", micro, {"mb_sizes": micro})
    accumulation = data.pop("gradient_accumulation_steps", 1)
    r.read("gradient_accumulation_steps", accumulation, {}, f"batch = {micro} x {accumulation} x d (d from the GPUs "
           "given at launch)")
    r.accumulation = accumulation if isinstance(accumulation, int) and accumulation > 0 else 1
    _engine(data, engine, axolotl, r)
    for key in ("bf16", "fp16"):
        if data.pop(key, None) in (True, "true", "auto"):
            r.read(key, True, {"precision": key})
    checkpointing = data.pop("gradient_checkpointing", None)
    off = data.pop("disable_gradient_checkpointing", False)
    full = bool(checkpointing) if axolotl else not off  # LLaMA-Factory checkpoints unless told not to
    r.read("gradient_checkpointing" if axolotl else "disable_gradient_checkpointing", checkpointing if axolotl
           else off, {"recompute": "full" if full else "none"}, f"recompute = {'full' if full else 'none'}")
    flash = data.pop("flash_attention", data.pop("flash_attn", None))
    if flash is not None:
        r.read("flash_attention", flash, {"flash": "false" if flash in (False, "disabled", "eager") else "true"})
    for key, value in data.items():
        (r.no_effect if key in NO_EFFECT else r.unsupported)(key, value, "data, schedule and logging: no bytes, no "
                                                             "time" if key in NO_EFFECT else "not read")
    return r


def _method(data: dict, axolotl: bool) -> None:
    """Full-parameter pre-training or fine-tuning only."""
    kind = str(data.pop("adapter", "") or "") if axolotl else str(data.pop("finetuning_type", "full"))
    if (axolotl and kind) or (not axolotl and kind != "full"):
        raise InputError(f"{kind[:20]} {ADAPTERS}")
    stage = str(data.pop("stage", "sft"))
    if stage in STAGE_NO or (axolotl and data.get("rl")):
        raise InputError(f"stage {stage if not axolotl else data.get('rl')!s:.20}: a reference or reward model "
                         "beside the trained one is not modelled; the planner counts pre-training and SFT")


def _model(name: str, r: Reading) -> None:
    if not hub.read(name, "model", r):
        r.unsupported("model", name, "not a hub id the checker maps to a preset: give the model's config.json with "
                      "the file, or --model")


def _engine(data: dict, engine: str, axolotl: bool, r: Reading) -> None:
    """DeepSpeed by its JSON's name (the JSON itself, given with the file, wins), or FSDP, or DDP."""
    data.pop("deepspeed", None)
    fsdp = data.pop("fsdp", None) or data.pop("fsdp_config", None)
    if engine:
        m = re.search(r"(?:z|zero|stage)_?(\d)", engine.rsplit("/", 1)[-1].lower())
        if m:
            r.assume("zero", int(m.group(1)), f"the DeepSpeed JSON's name {engine.rsplit('/', 1)[-1]!r} (give the "
                     "JSON with the file to read its stage and offload)")
        r.read("deepspeed", engine, {}, "DeepSpeed's engine (its JSON holds the ZeRO stage)")
        r.raw["memory_framework"] = "deepspeed"
    elif fsdp:
        words = " ".join(fsdp) if isinstance(fsdp, list) else str(fsdp)
        zero = 0 if "no_shard" in words else 3
        r.read("fsdp", words[:60], {"zero": zero, "reshard": "off" if "shard_grad_op" in words else "on",
                                    "offload": "optimizer+params" if "offload" in words else "none"})
    else:
        r.assume("zero", 0, "no deepspeed and no fsdp: Hugging Face's Trainer runs DDP")
