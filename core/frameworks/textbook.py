"""The textbook accounting: model states as the ZeRO paper counts them, activations as Korthikanti et al. count them.

Not a framework: the numbers the course teaches, kept exact so that the ZeRO paper's Table 1 and Korthikanti et al.'s
34 s b h + 5 a s^2 b per GPT layer come out to the byte. States: 2 + 2 + K bytes per parameter (16-bit weights and
gradients, K for the optimizer with its fp32 master copy), sharded stage by stage (Rajbhandari et al. 2019).
Activations (Korthikanti et al. 2022, section 4.1), op by op, 16-bit: the attention block keeps the QKV input 2,
Q and K 4, the softmax 2 a s, its dropout mask a s and output 2 a s, V 2, the projection input 2 and its dropout mask
1; the MLP its input 2, the GeLU input and the fc2 input 8 each (4h wide) and its dropout mask 1; the two layer
norms their inputs, 2 each: 34 s b h + 5 a s^2 b. The same count read for other blocks: K and V at the key/value
width (grouped-query attention), a gated MLP's gate, up, activation output and product (2 bytes each, f wide), no
dropout masks where the model has no dropout, a fused attention kernel keeps no s x s matrix, FP8 keeps the linear
layers' inputs in one byte (10 -> 8 replicated, 24 -> 19 split), and a mixture-of-experts layer keeps each token's
k routed copies (its experts' inputs) and what each routed and shared expert's MLP keeps. Nothing else: no norm
statistics, no workspaces, no allocator, no loss beyond the fp32 logits.
"""

from __future__ import annotations

from core.frameworks.records import FULL_ONLY, NONE_ONLY, NOT_FULL, Accounting, Arch, Buffers, Kept, Loss, StateBytes

STATES = StateBytes(param=2.0, grad=2.0, master=4.0, sharded_from=(("params", 3), ("grads", 2), ("optimizer", 1)),
                    source="Rajbhandari et al. 2019 (arXiv:1910.02054), section 3.1 and Table 1: 2 + 2 + K bytes per "
                           "parameter, K = 12 for mixed-precision Adam")

# Korthikanti et al. count 4 s b V bytes of fp32 logits on the last stage and nothing more for the loss.
LOSS = Loss(held=4.0, peak=4.0, source="Korthikanti et al. 2022 (arXiv:2205.05198), section 4.2: the output layer's "
                                       "fp32 logits for the cross-entropy, 4 s b V")


def block(a: Arch) -> tuple[Kept, ...]:
    """Korthikanti et al.'s tensors, read for this block (the module docstring)."""
    gemm_in = 1.0 if a.fp8 else 2.0
    kept = [Kept("layer input (norm input)", "h", 2.0, "rep", NOT_FULL),
            Kept("layer input (checkpoint)", "h", 2.0, "rep", FULL_ONLY),
            Kept("QKV input", "h", gemm_in, "rep", NOT_FULL),
            Kept("Q", "q", 2.0, "tp", NOT_FULL),
            Kept("K", "kv", 2.0, "tp", NOT_FULL),
            Kept("V", "kv", 2.0, "tp", NOT_FULL),
            Kept("projection input", "q", gemm_in, "tp", NOT_FULL)]
    if not a.flash:
        kept.append(Kept("softmax output", "scores", 2.0, "tp", NONE_ONLY))
        if a.dropout:
            kept += [Kept("attention dropout mask", "scores", 1.0, "tp", NONE_ONLY),
                     Kept("attention dropout output", "scores", 2.0, "tp", NONE_ONLY)]
    if not a.parallel:
        kept += [Kept("MLP norm input", "h", 2.0, "rep", NOT_FULL),
                 Kept("fc1 input", "h", gemm_in, "rep", NOT_FULL)]
    if a.dropout:
        kept += [Kept("attention output dropout mask", "h", 1.0, "rep", NOT_FULL)] if not a.parallel else []
        kept.append(Kept("MLP output dropout mask", "h", 1.0, "rep", NOT_FULL))
    if a.moe:  # each routed copy of a token is its expert's input, and each expert keeps what an MLP keeps
        kept.append(Kept("routed token copies (expert inputs)", "kh", gemm_in, "tp", NOT_FULL))
        kept += _mlp(a, "kf", "routed experts' ") + _mlp(a, "sf", "shared experts' ")
    else:
        kept += _mlp(a, "f", "")
    return tuple(kept)


def _mlp(a: Arch, width: str, who: str) -> list[Kept]:
    gemm_in = 1.0 if a.fp8 else 2.0
    if a.mlp == "swiglu":
        out = [Kept(f"{who}gate (activation input)", width, 2.0, "tp", NOT_FULL),
               Kept(f"{who}up", width, 2.0, "tp", NOT_FULL),
               Kept(f"{who}activation output", width, 2.0, "tp", NOT_FULL)]
    else:
        out = [Kept(f"{who}GeLU input", width, 2.0, "tp", NOT_FULL)]
    return out + [Kept(f"{who}fc2 input", width, gemm_in, "tp", NOT_FULL)]


def head(a: Arch) -> tuple[Kept, ...]:
    """The final norm's input and the output layer's input, 2 bytes each: Korthikanti et al.'s 4 s b h (/ t with
    sequence parallelism)."""
    return (Kept("final norm input", "h", 2.0, "rep"), Kept("output layer input", "h", 2.0, "rep"))


ACCOUNTING = Accounting(
    key="textbook", label="ZeRO paper and Korthikanti et al. (textbook)", version="2019 / 2022", states=STATES,
    block=block, head=head, loss=LOSS, buffers=Buffers(workspace=0.0),
    selective="the attention core's s x s matrices are recomputed (Korthikanti et al., section 5)")
