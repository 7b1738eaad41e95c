"""A layout as a Megatron-LM pretrain_gpt.py command line (torchrun launch included).

Every flag is one Megatron-LM's argument parser has at the pinned release (assets/megatron_flags.json, checked by
tests); a layout Megatron-LM cannot run exactly (a zero-bubble or V schedule, Megatron-FSDP with pipeline
parallelism, parameter offload) is refused with the reason, never rewritten into another layout.
"""

from __future__ import annotations

import shlex

from core.planner.export_base import Export, confirmed, launch, refusal
from core.planner.layout import Layout


def _uneven_split(layers: int, p: int) -> tuple[int, int] | None:
    """First/last stage layer counts when L does not divide by p (middle stages get ceil(L/p))."""
    if layers % p == 0 or p < 3:
        return None
    middle = -(-layers // p)
    rest = layers - middle * (p - 2)
    if rest < 2:
        return None
    return rest // 2, rest - rest // 2


def megatron_args(layout: Layout) -> tuple[list[str], list[str]]:
    """pretrain_gpt.py arguments (flag, value, flag, ...) and notes."""
    m, t, p = layout.model, layout.t, layout.p
    a: list[str] = ["--tensor-model-parallel-size", str(t), "--pipeline-model-parallel-size", str(p)]
    notes: list[str] = []
    if layout.schedule == "interleaved" and p > 1:
        a += ["--num-virtual-stages-per-pipeline-rank", str(layout.v)]
    if m.layers % p and (m.layers + 2) % p == 0:
        a += ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
        notes.append(f"{m.layers} layers over {p} stages: counting the embedding and the loss as one layer each gives "
                     f"{(m.layers + 2) // p} per stage, so the first and last stages hold one transformer layer fewer "
                     "(what Llama 3 405B and BLOOM did).")
    elif m.layers % p:
        split = _uneven_split(m.layers, p)
        if split is None:
            notes.append(f"{m.layers} layers do not split over {p} stages; Megatron needs layers divisible by the "
                         "pipeline size or an explicit first/last stage size.")
        else:
            a += ["--decoder-first-pipeline-num-layers", str(split[0]),
                  "--decoder-last-pipeline-num-layers", str(split[1])]
            notes.append(f"{m.layers} layers over {p} stages: first {split[0]}, last {split[1]}, the others "
                         f"{-(-m.layers // p)} each.")
    if layout.sequence_parallel and t > 1:
        a.append("--sequence-parallel")
    a += ["--num-layers", str(m.layers), "--hidden-size", str(m.hidden), "--ffn-hidden-size", str(m.ffn),
          "--num-attention-heads", str(m.heads)]
    if m.kv_heads < m.heads:
        a += ["--group-query-attention", "--num-query-groups", str(m.kv_heads)]
    a += ["--seq-length", str(m.seq), "--max-position-embeddings", str(m.seq)]
    if m.position == "rope":
        a += ["--position-embedding-type", "rope"]
    elif m.position == "learned":
        a += ["--position-embedding-type", "learned_absolute"]
    else:
        notes.append("ALiBi has no --position-embedding-type choice in Megatron-LM (BLOOM used the Megatron-DeepSpeed "
                     "fork's alibi option); the command keeps Megatron's default learned positions.")
    if m.swiglu:
        a.append("--swiglu")
    if not m.tied:
        a.append("--untie-embeddings-and-output-weights")
    if m.norm == "rmsnorm":
        a += ["--normalization", "RMSNorm"]
    if not m.bias:
        a.append("--disable-bias-linear")
    if m.embed_norm:
        notes.append("The layer norm after the embedding (BLOOM) has no Megatron-LM flag.")
    a += ["--micro-batch-size", str(layout.micro_batch_size), "--global-batch-size", str(layout.global_batch)]
    if layout.recompute == "full":
        a += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    elif layout.recompute == "selective":
        a += ["--recompute-granularity", "selective"]
    a += _sharding(layout, notes)
    a.append("--bf16" if layout.half == "bf16" else "--fp16")
    a += ["--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", str(m.vocab),
          "--train-iters", "100", "--lr", "1.0e-4"]
    notes.append(f"d = {layout.d} is what Megatron derives: world size {layout.n_gpus} / (t x p = {t * p}); it then "
                 f"runs {layout.grad_accum_steps} micro-batches per step (global batch / (micro-batch x d)).")
    notes.append("--mock-data with NullTokenizer makes this a runnable throughput test; swap in --data-path and your "
                 f"tokenizer to train. Megatron pads the vocabulary to a multiple of 128 x t = {128 * t}.")
    if t > 1 and "--use-megatron-fsdp" not in a:
        notes.append("Megatron asserts CUDA_DEVICE_MAX_CONNECTIONS=1 with tensor parallelism (before Blackwell).")
    return a, notes


def _sharding(layout: Layout, notes: list[str]) -> list[str]:
    z = layout.zero_stage
    if z == 0:
        out: list[str] = []
    elif z == 1:
        out = ["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]
    else:  # p = 1 here: core.planner.frameworks refuses Megatron-FSDP with pipeline parallelism
        strategy = "optim_grads" if z == 2 else "optim_grads_params"
        out = ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", strategy, "--ckpt-format", "fsdp_dtensor"]
        notes.append(f"ZeRO-{z} is Megatron-FSDP's {strategy} strategy; validate_args requires --ckpt-format "
                     "fsdp_dtensor with it.")
    if layout.offload == "optimizer":
        out += ["--optimizer-cpu-offload", "--use-precision-aware-optimizer"]
        notes.append("--optimizer-cpu-offload requires --use-precision-aware-optimizer (validate_args).")
    return out


def _shell(words: list[str], indent: str = "    ") -> str:
    """One flag (with its value) per line, joined with backslashes."""
    lines, i = [], 0
    while i < len(words):
        word = words[i]
        if word.startswith("--") and i + 1 < len(words) and not words[i + 1].startswith("--"):
            lines.append(f"{word} {_quote(words[i + 1])}")
            i += 2
        else:
            lines.append(_quote(word))
            i += 1
    return (" \\\n" + indent).join(lines)


def _quote(word: str) -> str:
    return word if word.startswith("$") else shlex.quote(word)


def megatron_export(layout: Layout) -> Export:
    refused = refusal(layout, "megatron")
    if refused:
        return refused
    words, launch_notes = launch(layout)
    args, notes = megatron_args(layout)
    env = "CUDA_DEVICE_MAX_CONNECTIONS=1 " if layout.t > 1 and "--use-megatron-fsdp" not in args else ""
    entry = confirmed()["megatron"]["entry"]
    head = (f"# Megatron-LM {layout.model.name}: t={layout.t} p={layout.p} d={layout.d} on {layout.n_gpus} GPUs, "
            f"{layout.schedule if layout.p > 1 else 'no pipeline'}\n")
    return Export(head + env + _shell(words + [entry] + args), tuple(launch_notes + notes))
