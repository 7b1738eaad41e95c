"""Flags of Megatron-LM before 2022 and of Megatron-DeepSpeed (microsoft/Megatron-DeepSpeed, the BigScience fork that
trained BLOOM, MT-NLG's), rewritten into the flags core.configs.megatron_args reads, each said in the account.

- `--checkpoint-activations` (removed from Megatron-LM in 2022 for `--recompute-granularity full`) checkpoints every
  layer (`--checkpoint-num-layers`, default 1): full recompute, uniform.
- `--pad-vocab-size-to N` (BigScience) is the padded vocabulary itself.
- `--deepspeed` runs the model under DeepSpeed's engine: its ZeRO stage is `--zero-stage`, and under `--bf16` at
  stage 0 DeepSpeed's BF16_Optimizer still shards the fp32 master weights and Adam moments over the data-parallel
  ranks (deepspeed/runtime/bf16_optimizer.py), i.e. ZeRO-1; the compute pace is Megatron-DeepSpeed's
  (compute_stack, fitted on BigScience's benchmarks).
"""

from __future__ import annotations

from core.configs.account import Reading

NO_EFFECT = {
    "deepspeed-activation-checkpointing": "DeepSpeed's implementation of the same checkpointing",
    "deepspeed-config": "the DeepSpeed JSON (give it with the script to read its batch and ZeRO switches)",
    "deepspeed_config": "the DeepSpeed JSON (give it with the script to read its batch and ZeRO switches)",
    "embed-layernorm": "a norm after the embedding: O(h) bytes per token",
    "sync-tp-duplicated-parameters": "numerics", "abort-on-unmet-fused-kernel-constraints": "a kernel check",
    "kill-switch-path": "a stop file", "tokenizer-name-or-path": "the vocabulary is --pad-vocab-size-to's",
    "pp-partition-method": "the layer split (type:transformer, as the planner's)",
    "synchronize-each-layer": "a debugging switch", "contigious-checkpointing": "memory layout of the checkpoints",
    "contiguous-checkpointing": "memory layout of the checkpoints"}


def translate(flags: dict[str, str], r: Reading) -> None:
    """Rewrite the legacy and Megatron-DeepSpeed flags of `flags` in place (name without dashes -> value)."""
    if flags.pop("checkpoint-activations", None) == "true":
        count = flags.pop("checkpoint-num-layers", "1")
        flags.setdefault("recompute-granularity", "full")
        flags.setdefault("recompute-method", "uniform")
        flags.setdefault("recompute-num-layers", count)
        r.read("--checkpoint-activations", "true", {}, "recompute = full (Megatron-LM before 2022: every layer "
               f"checkpointed, {count} at a time)")
    padded = flags.pop("pad-vocab-size-to", None)
    if padded is not None:
        flags["vocab-size"] = padded
        flags.setdefault("make-vocab-size-divisible-by", "1")
        r.read("--pad-vocab-size-to", padded, {}, f"vocab = {padded} (the padded size itself)")
    if flags.pop("deepspeed", None) == "true":
        stage = flags.pop("zero-stage", "0")
        zero = int(stage) if stage.isdigit() else 0
        if zero == 0 and flags.get("bf16") == "true":
            zero = 1
        r.framework = "deepspeed"
        r.read("--deepspeed --zero-stage", stage, {"zero": zero, "compute_stack": "megatron-deepspeed",
                                                    "memory_framework": "deepspeed"},
               f"ZeRO-{zero} under DeepSpeed's engine" + (" (BF16_Optimizer shards the fp32 master weights and "
                                                          "moments at stage 0)" if stage == "0" and zero == 1 else "")
               + "; the compute pace is Megatron-DeepSpeed's")
    for flag in list(flags):
        if flag in NO_EFFECT:
            r.no_effect(f"--{flag}", flags.pop(flag), NO_EFFECT[flag])
