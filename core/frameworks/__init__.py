"""Training frameworks, one module each: what it can run (CAPABILITY: schedules, ZeRO stages, parallelisms,
recompute and offload, with where each rule is written) and how its code stores model states, what its transformer
layer keeps for the backward, how it computes the loss and which buffers it holds (ACCOUNTING), every rule with its
source; plus the textbook accounting (the ZeRO paper and Korthikanti et al.) the course teaches. Adding a framework
is adding its module here (and its name to core.params.planner.FRAMEWORK_NAMES).

    accounting("megatron").states.grad  # 4.0: Megatron-LM keeps fp32 gradients under bf16
    CAPABILITIES["torch"].hybrid  # (2, 3): FSDP2 shards within a group and replicates across groups

May import: core.params and the top-level basics (plain data: core.memory and core.planner interpret it).
"""

from __future__ import annotations

from dataclasses import replace

from core.frameworks import deepspeed, megatron, pytorch, textbook
from core.frameworks.capability import Framework
from core.frameworks.records import Accounting, Loss
from core.params.catalog import ASSETS, document
from core.params.memory import LOSS_CHUNKS
from core.params.planner import FRAMEWORK_NAMES


def _fitted(acc: Accounting) -> Accounting:
    """An accounting with its allocator reserve as scripts/fit_memory.py fitted it (assets/memory_fits.json)."""
    fits = document("memory_fits.json")["fits"] if (ASSETS / "memory_fits.json").exists() else {}
    return replace(acc, reserve=float(fits.get(acc.key, {}).get("reserve", acc.reserve)))


ACCOUNTINGS: dict[str, Accounting] = {m.ACCOUNTING.key: _fitted(m.ACCOUNTING)
                                      for m in (textbook, megatron, deepspeed, pytorch)}
KEYS = tuple(ACCOUNTINGS)
FRAMEWORKS = KEYS[1:]  # the planner's --framework names (core.params.planner.FRAMEWORK_NAMES)
# Which accounting a row of an `any` plan is counted in: the first of these that runs it (Megatron-LM's, whose runs
# the step time is calibrated on; PyTorch's, which runs every schedule and ZeRO stage with pipelining; DeepSpeed's).
PREFERENCE = ("megatron", "torch", "deepspeed")
CAPABILITIES: dict[str, Framework] = {m.CAPABILITY.key: m.CAPABILITY for m in (megatron, deepspeed, pytorch)}
assert tuple(CAPABILITIES) == FRAMEWORK_NAMES


def accounting(key: str) -> Accounting:
    return ACCOUNTINGS[key]


# Loss kernels other than a framework's own upcast path, in bytes per logit (core.frameworks.records.Loss). Measured on
# this machine with torch 2.13 (tests/engines): torch.compile's cross-entropy keeps the bf16 logits and per-row
# statistics, and its backward writes the bf16 gradient in one fused kernel; Transformer Engine's and Liger's fused
# kernels write the gradient into the bf16 logits in place (TE cross_entropy.py: ctx.save_for_backward(_input)).
KERNELS = {
    "compiled": Loss(held=2.0, peak=4.0, source="torch.compile of F.cross_entropy(logits.float(), labels): saves the "
                                                "bf16 logits and per-row max / log-sum-exp; the backward is one fused "
                                                "kernel with a bf16 gradient"),
    "fused": Loss(held=2.0, peak=2.0, source="Transformer Engine parallel_cross_entropy / Liger fused cross-entropy: "
                                             "the gradient is written into the bf16 logits in place"),
    # F.cross_entropy on the 16-bit logits with no fp32 copy (NeMo Automodel's MaskedCrossEntropy(fp32_upcast=False)):
    # measured on this machine with torch 2.13 (saved_tensors_hooks): log_softmax's bf16 output is the one tensor kept
    "bf16": Loss(held=4.0, peak=6.0, source="F.cross_entropy(bf16 logits): log_softmax's bf16 output saved (2 bytes "
                                            "per logit, measured) beside the bf16 logits the caller keeps; the "
                                            "backward's bf16 gradient beside both"),
    # Megatron-LM's --cross-entropy-loss-fusion, impl native (its default; 'te' is refused at d98e8a6): the pieces of
    # core/fusions/fused_cross_entropy.py run under jit_fuser, torch.compile since torch 2.2 (core/jit.py), whose
    # functional graphs return the fp32 copy and exp_logits as separate buffers where the unfused path exponentiates
    # in place, and write the fp32 gradient beside the saved softmax before its bf16 cast. Megatron-LM's own CI pair
    # measures it: gpt3_mcore_te_tp2_pp2_cross_entropy_loss_fusion against gpt3_mcore_te_tp2_pp2, 3.96 bytes per
    # logit apart (docs/memory.md).
    "native": Loss(held=4.0, peak=10.0, source="Megatron-LM fused_vocab_parallel_cross_entropy (jit_fuser = "
                                               "torch.compile): the fp32 softmax kept, the fp32 copy beside it in the "
                                               "forward and the fp32 gradient beside it in the backward, then bf16"),
}


def loss(key: str, kernel: str = "auto", compiled: bool = False) -> Loss:
    """The loss a row's accounting holds: its own (upcast) path, or the named kernel; auto = the framework's current
    default (PyTorch compiles the loss with the model when torch.compile is on: torchtitan since April 2025)."""
    if kernel == "chunked" and key != "textbook":
        return _chunked(loss(key, "auto", compiled))
    if kernel == "auto":
        kernel = "compiled" if (compiled and key == "torch") else "upcast"
    return ACCOUNTINGS[key].loss if kernel in ("upcast", "chunked") or key == "textbook" else KERNELS[kernel]


def _chunked(inner: Loss) -> Loss:
    """torchtitan's ChunkedLossWrapper (components/loss.py): the decoder's output is detached and split into
    LOSS_CHUNKS pieces along the tokens; each piece runs the output layer, the loss and their backward before the
    next, so nothing is kept from the forward to the backward and the most alive at once is one piece's peak."""
    parallel = inner.peak_parallel or inner.peak
    return Loss(held=0.0, peak=inner.peak / LOSS_CHUNKS, peak_parallel=parallel / LOSS_CHUNKS,
                source=f"torchtitan ChunkedLossWrapper, {LOSS_CHUNKS} chunks, each: {inner.source}")
