"""Activation bytes per GPU: what each transformer layer keeps for its backward, for the micro-batches a stage holds,
plus the embedding's and the output layer's, as the chosen accounting counts them (core.frameworks).

The textbook accounting is Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
Models"), section 4.1, per layer and micro-batch, 16-bit, s x b x h elements per tensor:
    34 s b h + 5 a s^2 b        = 10 s b h (layer norms, dropout masks, block inputs: replicated under
                                  tensor parallelism) + 24 s b h (split by t) + 5 a s^2 b (attention
                                  scores, softmax, dropout: split by t).
Sequence parallelism shards the replicated 10 s b h too; selective recomputation drops the 5 a s^2 b
term; full recomputation keeps only the layer input, 2 s b h (divided by t with sequence parallelism).
Read for other blocks (core.frameworks.textbook): K and V at the key/value width, a gated MLP's four f-wide
tensors, no dropout masks without dropout, no scores with a fused attention kernel, FP8's one-byte linear inputs.
A framework's accounting lists the tensors its own code keeps instead (Megatron-Core with Transformer Engine,
torchtitan's PyTorch, a Hugging Face model under DeepSpeed: core.frameworks.*), and core.memory.saved turns any
such list into bytes, so the textbook is one list among them and every mode above falls out of it.

Context parallelism (degree c) gives each rank s / c tokens of every sequence and keeps only their keys and
values (Megatron-LM's context_parallel guide: "the activation memory footprint per GPU is also CP times
smaller"), so every token term is divided by c; ring attention's K/V buffers come on top
(core.memory.context_parallel). Context parallelism runs on fused (flash) attention kernels, which never store the
a s^2 scores: with c > 1 that term is absent whatever the recompute setting.
The end stages add their own: the embedding's dropout mask on the first, the final norm's tensors and the loss on the
last (core.frameworks: the logits a framework keeps from the forward to the backward, and the most its loss holds
at once for the micro-batch being computed). The step's peak is one moment: the layers held, the ends, and either
the one layer recomputation rebuilds in a backward or the loss of the micro-batch being computed, whichever is
larger (not both: they never run at once).
How many micro-batches a stage holds at once comes from the pipeline simulator (`inflight`), not from a
formula: it depends on the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from core import validate
from core.frameworks import accounting
from core.frameworks import loss as loss_of
from core.frameworks.records import Arch, Kept
from core.memory import saved
from core.params.memory import ACTIVATIONS, RECOMPUTE_MODES, RECOMPUTE_MODULES_DEFAULT


def _spec_number(key: str, value) -> np.ndarray:
    spec = ACTIVATIONS[key]
    return validate.number(key, value, spec.lo, spec.hi, integer=spec.kind == "int")


def per_layer_bytes(seq, micro_batch_size, hidden, heads, t=1, sequence_parallel=False, recompute="none", cp=1,
                    fp8=False, flash=False) -> np.ndarray:
    """Activation bytes one GPT layer keeps for one micro-batch, on one tensor-parallel rank (and one
    context-parallel rank: divided by cp), as Korthikanti et al. count them. flash: fused attention, which never
    stores the a s^2 scores. Other blocks and accountings: Shape(...).per_layer()."""
    return _per_layer(Shape(seq, micro_batch_size, hidden, heads, t, sequence_parallel, recompute, 0, cp, fp8, flash))


def _per_layer(a: Shape) -> np.ndarray:
    s, b = _spec_number("seq", a.seq), _spec_number("mb", a.micro_batch_size)
    t, cp = _spec_number("t", a.t), _spec_number("cp", a.cp)
    _spec_number("hidden", a.hidden), _spec_number("heads", a.heads)  # range checks: a bad value is named here
    validate.choice_codes("recompute", a.recompute, RECOMPUTE_MODES)
    return saved.layer_bytes(a.coefficients(), a.widths(), s, b, t, a.sequence_parallel, cp, a.recompute)


def _ends(a: Shape, kept: tuple[Kept, ...]) -> np.ndarray:
    """Bytes per micro-batch of end-stage tensors (never recomputed), on one rank."""
    coef = saved.coefficients(kept)
    return saved.layer_bytes(coef, a.widths(), _spec_number("seq", a.seq), _spec_number("mb", a.micro_batch_size),
                             _spec_number("t", a.t), a.sequence_parallel, _spec_number("cp", a.cp), "none")


def embedding_bytes(a: Shape) -> np.ndarray:
    """First stage, per micro-batch: the embedding's dropout mask (1 byte per hidden value, / t with SP, / cp),
    where the model has dropout."""
    return _ends(a, (Kept("embedding dropout mask", "h", 1.0, "rep"),)) if a.dropout else np.zeros(np.shape(a.t))


def output_bytes(a: Shape) -> np.ndarray:
    """Last stage, per micro-batch it holds: the final norm's tensors and the logits the accounting keeps from the
    forward to the backward (s b V / t per value, vocabulary-parallel). Zero when vocab = 0."""
    v = _spec_number("vocab", a.vocab)
    head = _ends(a, a.accounting_record().head(a.arch()))
    return np.where(v > 0, head + a.loss_record().held * _logit_elements(a), 0.0)


def loss_transient_bytes(a: Shape) -> np.ndarray:
    """What the loss of the micro-batch being computed holds beyond the kept logits, at its peak (0 without vocab)."""
    loss = a.loss_record()
    peak = np.where(np.asarray(a.t) > 1, loss.peak_parallel or loss.peak, loss.peak)
    return np.where(_spec_number("vocab", a.vocab) > 0, (peak - loss.held) * _logit_elements(a), 0.0)


def _logit_elements(a: Shape) -> np.ndarray:
    s, b = _spec_number("seq", a.seq), _spec_number("mb", a.micro_batch_size)
    return s * b * _spec_number("vocab", a.vocab) / _spec_number("t", a.t) / _spec_number("cp", a.cp)


def layers_per_stage(layers, p) -> np.ndarray:
    """Layers on the most loaded stage, ceil(L / p)."""
    return np.ceil(_spec_number("layers", layers) / _spec_number("p", p))


@dataclass(frozen=True)
class Shape:
    """What a layer's activations depend on (scalars or arrays that broadcast: the planner passes candidates): the
    sizes and layout, the block's architecture (scalars) and the accounting that counts it (core.frameworks)."""

    seq: object
    micro_batch_size: object
    hidden: object
    heads: object
    t: object = 1
    sequence_parallel: object = False
    recompute: object = "none"
    vocab: object = 0  # 0 leaves the output layer out
    cp: object = 1
    fp8: bool = False
    flash: bool = False
    parallel: bool = False  # a parallel attention + MLP block (GPT-J, GPT-NeoX, PaLM)
    attn_width: object = 0  # heads x head size; 0 = hidden (the head size is hidden / heads)
    kv_heads: int = 0  # 0: as many as heads
    ffn: int = 0  # 0: 4 h
    mlp: str = "gelu"
    norm: str = "layernorm"
    dropout: bool = True
    rope: bool = False
    accounting: str = "textbook"  # core.frameworks.KEYS
    compiled: bool = False  # torch.compile on the block (the PyTorch accounting's compiled block)
    repeat_kv: bool = False  # K and V widened to every query head before the attention (the PyTorch accounting)
    sac_attention: bool = True  # the per-op selective recompute saves the attention's output (PyTorch)
    routed: float = 0.0  # a MoE model's routed copies per token (top-k x capacity factor); 0: dense
    expert_ffn: float = 0.0
    shared_ffn: float = 0.0  # the shared experts' total inner width
    experts: float = 0.0
    moe_layer: bool = False  # evaluate the MoE layer (experts in place of the dense MLP)
    loss: str = "auto"  # the cross-entropy kernel (core.frameworks.loss)
    mla: tuple = ()  # multi-head latent attention: (kv_lora_rank, q_lora_rank, qk_head_dim, qk_rope_dim, v_head_dim)
    qk_norm: bool = False  # q and k normalised per head (Qwen3, OLMo 2; Megatron-LM --qk-layernorm)
    recompute_modules: tuple = RECOMPUTE_MODULES_DEFAULT  # what Megatron-LM's selective recompute re-runs

    def per_layer(self, recompute=None) -> np.ndarray:
        return _per_layer(self if recompute is None else replace(self, recompute=recompute))

    def arch(self) -> Arch:
        heads = int(self.heads)
        return Arch(norm=self.norm, mlp=self.mlp, dropout=bool(self.dropout), flash=bool(self.flash),
                    rope=bool(self.rope), parallel=bool(self.parallel),
                    gqa=bool(self.kv_heads) and int(self.kv_heads) < heads, fp8=bool(self.fp8),
                    compiled=bool(self.compiled), repeat_kv=bool(self.repeat_kv),
                    sac_attention=bool(self.sac_attention), moe=bool(self.moe_layer), mla=bool(self.mla),
                    q_lora=bool(self.mla) and bool(self.mla[1]), qk_norm=bool(self.qk_norm),
                    recompute_modules=tuple(self.recompute_modules))

    def accounting_record(self):
        return accounting(self.accounting)

    def loss_record(self):
        return loss_of(self.accounting, self.loss, bool(self.compiled))

    def coefficients(self) -> np.ndarray:
        return saved.block_coefficients(self.accounting_record().block, self.arch())

    def widths(self) -> saved.Widths:
        h, heads = float(self.hidden), float(self.heads)
        width = float(self.attn_width) or h
        kv = float(self.kv_heads) or heads
        return saved.Widths(hidden=h, q=width, kv_heads=kv, head_dim=width / heads, ffn=float(self.ffn) or 4 * h,
                            heads=heads, routed=float(self.routed), expert_ffn=float(self.expert_ffn),
                            shared_ffn=float(self.shared_ffn), experts=float(self.experts),
                            mla=tuple(float(x) for x in self.mla))


def stage_bytes(a: Shape, layers_on_stage, inflight, first=True, last=True, first_held=None, last_held=None,
                tail_layers=0, layer_bytes: tuple | None = None, backward_extra=0.0) -> dict[str, np.ndarray]:
    """Peak activation bytes of one stage (or one device's stages) on one tensor-parallel rank, by term.

    layers: per-layer bytes x layers x micro-batches in flight; embedding (first stage) and output (last stage,
    when `vocab` > 0) scale with the micro-batches that stage itself holds (`first_held`, `last_held`; default
    `inflight`: one stage per device), as do the last stage's `tail_layers` (multi-token prediction depths);
    recompute_buffer is the one layer of one micro-batch that recomputation rebuilds during the backward pass (plus
    `backward_extra`, what that layer's backward holds beside it: context parallelism's gathered K/V), and loss the
    last stage's loss at its peak beyond the kept logits: the step's peak holds the larger of the two
    (`transient`), never both. `layer_bytes`: (a.per_layer(), a.per_layer("none")) when the caller has them, and
    optionally third how many of the stage's layers the recompute mode applies to (default all); the others keep
    everything (Megatron-LM's block method: the first N layers of each stage recomputed).
    """
    n_layers = validate.number("layers_on_stage", layers_on_stage, 0, ACTIVATIONS["layers"].hi)
    inflight = _spec_number("inflight", inflight)
    first_held = inflight if first_held is None else _spec_number("inflight", first_held)
    last_held = inflight if last_held is None else _spec_number("inflight", last_held)
    per_layer, none, *counted = layer_bytes or (a.per_layer(), a.per_layer("none"))
    tail = np.where(last, tail_layers, 0)
    rec = np.minimum(counted[0], n_layers) if counted else n_layers
    out = {
        "layers": (per_layer * rec + none * (n_layers - rec)) * inflight + per_layer * tail * last_held,
        "embedding": np.where(first, embedding_bytes(a) * first_held, 0.0),
        "output": np.where(last, output_bytes(a) * last_held, 0.0),
        "recompute_buffer": np.where((rec > 0) | (tail > 0), none - per_layer + backward_extra, 0.0),
        "loss": np.where(last, loss_transient_bytes(a), 0.0),
    }
    out["transient"] = np.maximum(out["recompute_buffer"], out["loss"])
    out["total"] = out["layers"] + out["embedding"] + out["output"] + out["transient"]
    return out


MODES = (
    ("no parallelism", False, "none", True),
    ("tensor parallel", False, "none", False),
    ("tensor + sequence parallel", True, "none", False),
    ("tensor parallel + selective recompute", False, "selective", False),
    ("tensor + sequence parallel + selective recompute", True, "selective", False),
    ("full recompute", False, "full", False),
    ("full recompute + sequence parallel", True, "full", False),
)


def modes_table(seq, micro_batch_size, hidden, heads, t=1, cp=1, fp8=False, attn_width=0) -> pd.DataFrame:
    """Per-layer bytes of every mode in Korthikanti et al.'s Table 2, for one (s, b, h, a, t) (and c, FP8, the
    attention width heads x head size: 0 = h)."""
    rows = []
    for name, sp, recompute, single in MODES:
        value = _per_layer(Shape(seq, micro_batch_size, hidden, heads, 1 if single else t, sp, recompute, cp=cp,
                                 fp8=fp8, attn_width=attn_width))
        rows.append({"mode": name, "t": 1 if single else int(t), "sequence_parallel": sp, "recompute": recompute,
                     "per layer [bytes]": float(value)})
    return pd.DataFrame(rows)


def report(a: Shape, layers, p, inflight) -> dict:
    """Per-layer bytes, every mode for comparison, and the first and last stage's peak by term.

    With p = 1 the single stage carries both the embedding and the output terms. With p > 1 the last stage
    is evaluated with the same micro-batches in flight as the first: an upper bound (1F1B's last stage holds
    one), because the simulator reports the maximum over devices.
    """
    n = layers_per_stage(layers, p)
    single = int(_spec_number("p", p)) == 1
    first = stage_bytes(a, n, inflight, first=True, last=single)
    last = None if single else stage_bytes(a, n, inflight, first=False, last=True)

    def as_float(d):
        return {k: float(v) for k, v in d.items()}

    return {
        "per_layer": float(a.per_layer()),
        "layers_per_stage": float(n),
        "inflight": float(_spec_number("inflight", inflight)),
        "modes": {r["mode"]: r["per layer [bytes]"] for r in modes_table(
            a.seq, a.micro_batch_size, a.hidden, a.heads, a.t, a.cp, a.fp8, a.attn_width).to_dict("records")},
        "first_stage": as_float(first),
        "last_stage": None if last is None else as_float(last),
        "peak": float(max(first["total"], last["total"])) if last is not None else float(first["total"]),
    }
