"""The plan's memory switches (gradient buffer precision, optimizer state precision, cross-entropy kernel) as each
export carries them, so that the pasted run holds the bytes the plan counted: Megatron-LM's flags, or a note where
an export's script runs something else.

Megatron-LM at d98e8a6 (megatron/training/arguments.py): under --bf16 the gradient buffer is fp32 unless
--grad-reduce-in-bf16 (param_and_grad_buffer.py: torch.float if grad_reduce_in_fp32 else param.dtype); under --fp16
it is fp16 unless --accumulate-allreduce-grads-in-fp32. The precision-aware optimizer's bf16 moments need the
distributed optimizer (megatron/core/optimizer/__init__.py raises without it). --cross-entropy-loss-fusion runs the
native fused kernel; the Transformer Engine one (--cross-entropy-fusion-impl te) is refused there.
"""

from __future__ import annotations

from core.planner.layout import Layout

AUTO = ("auto", "upcast")  # the framework's own loss


def megatron_flags(layout: Layout, notes: list[str]) -> list[str]:
    """pretrain_gpt.py flags for the layout's memory switches (core.params.memory grad_dtype, optimizer_dtype,
    loss); what Megatron-LM cannot run is said in `notes`."""
    out: list[str] = []
    fp16 = layout.precision == "fp16"
    if layout.grad_dtype in ("bf16", "fp16") and not fp16:
        out.append("--grad-reduce-in-bf16")
        notes.append("--grad-reduce-in-bf16: the gradient buffer and its reduction in bf16 (2 bytes per parameter), "
                     "as the plan counts; Megatron-LM's default under BF16 is fp32.")
    elif layout.grad_dtype == "fp32" and fp16:
        out.append("--accumulate-allreduce-grads-in-fp32")
    if layout.optimizer_dtype == "bf16":
        if layout.zero_stage == 1:
            if layout.offload != "optimizer":  # the offload path adds the switch itself
                out.append("--use-precision-aware-optimizer")
            out += ["--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype", "bf16"]
        else:
            notes.append("bf16 Adam moments need Megatron-LM's precision-aware optimizer, which only runs with the "
                         "distributed optimizer (ZeRO-1): this command keeps fp32 moments, more than the plan "
                         "counts.")
    elif layout.optimizer_dtype == "pure-bf16":
        notes.append("The plan counts pure bf16 training (no fp32 master); Megatron-LM always keeps an fp32 main copy "
                     "of the weights (or its remainder), so this command holds more than the plan counts.")
    if layout.loss == "native":
        out.append("--cross-entropy-loss-fusion")
    elif layout.loss not in AUTO:
        notes.append(f"The plan counts the {layout.loss} cross-entropy kernel; Megatron-LM runs its own unfused one "
                     "here (its Transformer Engine fusion, --cross-entropy-fusion-impl te, is refused at d98e8a6), "
                     "which holds more bytes per logit. Plan with --loss auto or native to match this command.")
    return out


def script_notes(layout: Layout, framework: str) -> list[str]:
    """What a PyTorch or DeepSpeed export's script runs where the plan counted another memory switch."""
    said = []
    if layout.grad_dtype != "auto":
        said.append(f"gradient buffer {layout.grad_dtype}")
    if layout.optimizer_dtype != "fp32":
        said.append(f"optimizer state {layout.optimizer_dtype}")
    if layout.loss not in AUTO:
        said.append(f"the {layout.loss} cross-entropy")
    if not said:
        return []
    own = {"torch": "fp32 gradient shards (reduce_dtype float32), fp32 Adam moments and an fp32 cross-entropy",
           "deepspeed": "its own gradient and optimizer precisions and the model's loss"}[framework]
    return [f"The plan counts {', '.join(said)}; this script runs {own}. Its memory is the plan's with those "
            "switches at their defaults."]
