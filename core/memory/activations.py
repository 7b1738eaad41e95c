"""Activation bytes per GPU (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models"), kept apart from the model states because forgetting them is the classic way a
configuration that "fits" runs out of memory.

Per transformer layer and micro-batch, 16-bit activations, s x b x h elements per tensor:
    34 s b h + 5 a s^2 b        = 10 s b h (layer norms, dropout masks, block inputs: replicated under
                                  tensor parallelism) + 24 s b h (sharded by t) + 5 a s^2 b (attention
                                  scores, softmax, dropout: sharded by t).
Sequence parallelism shards the replicated 10 s b h too; selective recomputation drops the 5 a s^2 b
term; full recomputation keeps only the layer input, 2 s b h (divided by t with sequence parallelism).

Context parallelism (degree c) gives each rank s / c tokens of every sequence and keeps only their keys and
values (Megatron-LM's context_parallel guide: "the activation memory footprint per GPU is also CP times
smaller"), so every s b h term is divided by c; ring attention's K/V buffers come on top
(core.memory.context_parallel). Context parallelism runs on fused (flash) attention kernels (Transformer
Engine in Megatron-LM, SDPA's flash/efficient kernels in PyTorch), which never store the a s^2 scores: with
c > 1 the 5 a s^2 b term is absent whatever the recompute setting, as under selective recompute; so is it for a
model trained with flash attention (`flash`), whose one layer rebuilt by recomputation has no scores either.
FP8 (Transformer Engine) saves the inputs of the four linear layers in one byte: the QKV and first-MLP inputs
(2 s b h each, replicated), the attention projection input (2 s b h) and the second-MLP input (8 s b h), so
10 -> 8 replicated and 24 -> 19 sharded.
A head size decoupled from hidden / heads (Qwen3, Gemma: attention width w = heads x head size, not h) scales the
sharded terms that hold attention-width tensors: Q, K, V and the attention projection's input (2 s b w each, 8 of
the 24; 7 of the 19 in FP8), so 24 -> 16 + 8 w / h (19 -> 12 + 7 w / h). As in Korthikanti et al., K and V are
counted at the query width (grouped-query attention's smaller K/V are not credited).
A parallel block (GPT-J, GPT-NeoX, PaLM: attention and MLP read one normed input, one residual add) keeps one
norm input (2), one input shared by QKV and the first MLP layer (2, 1 in FP8) and one dropout mask (1): 10 -> 5
replicated (8 -> 4 in FP8); the sharded terms are the same.
How many micro-batches a stage holds at once comes from the pipeline simulator (`inflight`), not from a
formula: it depends on the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from core import validate
from core.params.memory import ACTIVATIONS, RECOMPUTE_MODES


def _spec_number(key: str, value) -> np.ndarray:
    spec = ACTIVATIONS[key]
    return validate.number(key, value, spec.lo, spec.hi, integer=spec.kind == "int")


REPLICATED = (10.0, 8.0)  # s b h coefficients without / with FP8 activations (the module docstring's terms)
REPLICATED_PARALLEL = (5.0, 4.0)  # a parallel attention + MLP block's
SHARDED = (24.0, 19.0)
ATTENTION_WIDTH = (8.0, 7.0)  # of SHARDED: Q, K, V and the attention projection input, in units of s b w


def _cp_fp8(cp, fp8) -> tuple[np.ndarray, np.ndarray]:
    return _spec_number("cp", cp), np.asarray(fp8, dtype=bool)


def per_layer_bytes(seq, micro_batch_size, hidden, heads, t=1, sequence_parallel=False, recompute="none", cp=1,
                    fp8=False, flash=False) -> np.ndarray:
    """Activation bytes one transformer layer keeps for one micro-batch, on one tensor-parallel rank (and one
    context-parallel rank: divided by cp). flash: fused attention, which never stores the a s^2 scores. A parallel
    attention + MLP block: Shape(..., parallel=True).per_layer()."""
    return _per_layer(Shape(seq, micro_batch_size, hidden, heads, t, sequence_parallel, recompute, 0, cp, fp8, flash))


def _per_layer(a: Shape) -> np.ndarray:
    s, b, h = _spec_number("seq", a.seq), _spec_number("mb", a.micro_batch_size), _spec_number("hidden", a.hidden)
    heads, t = _spec_number("heads", a.heads), _spec_number("t", a.t)
    cp, fp8 = _cp_fp8(a.cp, a.fp8)
    sp = np.asarray(a.sequence_parallel, dtype=bool)
    mode = validate.choice_codes("recompute", a.recompute, RECOMPUTE_MODES)
    sbh = s * b * h
    replicated = np.where(fp8, *(REPLICATED_PARALLEL if a.parallel else REPLICATED)[::-1])
    width = np.asarray(a.attn_width, dtype=float)
    ratio = np.where(width > 0, width / h, 1.0)  # 1 unless the head size is decoupled
    wide = np.where(fp8, ATTENTION_WIDTH[1], ATTENTION_WIDTH[0])
    sharded = np.where(fp8, SHARDED[1], SHARDED[0]) - wide + wide * ratio
    scores = (mode == 0) & (cp == 1) & ~np.asarray(a.flash, dtype=bool)  # a s^2: unfused attention only, never CP
    kept = np.where(sp, replicated / t, replicated) + sharded / t + np.where(scores, 5.0 * heads * s / (h * t), 0.0)
    full = 2.0 / np.where(sp, t, 1.0)
    return sbh * np.where(mode == 2, full, kept) / cp


def embedding_bytes(seq, micro_batch_size, hidden, t=1, sequence_parallel=False, cp=1) -> np.ndarray:
    """First stage, per micro-batch: the 1-byte dropout mask after the embeddings (s b h, / t with SP, / cp)."""
    sbh = _spec_number("seq", seq) * _spec_number("mb", micro_batch_size) * _spec_number("hidden", hidden)
    return sbh / np.where(np.asarray(sequence_parallel, dtype=bool), _spec_number("t", t), 1.0) / _spec_number("cp", cp)


def output_bytes(seq, micro_batch_size, hidden, vocab, t=1, sequence_parallel=False, cp=1) -> np.ndarray:
    """Last stage, per micro-batch: final layer-norm input and output-projection input (2 s b h each,
    / t with SP) and the 32-bit logits for the cross-entropy, 4 s b V / t (vocabulary-parallel).
    Zero when vocab = 0 (no output layer modelled)."""
    s, b, h = _spec_number("seq", seq), _spec_number("mb", micro_batch_size), _spec_number("hidden", hidden)
    v, t = _spec_number("vocab", vocab), _spec_number("t", t)
    kept = 4.0 * s * b * h / np.where(np.asarray(sequence_parallel, dtype=bool), t, 1.0) + 4.0 * s * b * v / t
    return np.where(v > 0, kept, 0.0) / _spec_number("cp", cp)


def layers_per_stage(layers, p) -> np.ndarray:
    """Layers on the most loaded stage, ceil(L / p)."""
    return np.ceil(_spec_number("layers", layers) / _spec_number("p", p))


@dataclass(frozen=True)
class Shape:
    """What a layer's activations depend on (scalars or arrays that broadcast: the planner passes candidates)."""

    seq: object
    micro_batch_size: object
    hidden: object
    heads: object
    t: object = 1
    sequence_parallel: object = False
    recompute: object = "none"
    vocab: object = 0  # 0 leaves the output layer out
    cp: object = 1
    fp8: object = False
    flash: object = False
    parallel: bool = False  # a parallel attention + MLP block (GPT-J, GPT-NeoX, PaLM)
    attn_width: object = 0  # heads x head size; 0 = hidden (the head size is hidden / heads)

    def per_layer(self, recompute=None) -> np.ndarray:
        return _per_layer(self if recompute is None else replace(self, recompute=recompute))


def stage_bytes(a: Shape, layers_on_stage, inflight, first=True, last=True, first_held=None, last_held=None,
                tail_layers=0, layer_bytes: tuple | None = None) -> dict[str, np.ndarray]:
    """Peak activation bytes of one stage (or one device's stages) on one tensor-parallel rank, by term.

    layers: per-layer bytes x layers x micro-batches in flight; embedding (first stage) and output (last stage,
    when `vocab` > 0) scale with the micro-batches that stage itself holds (`first_held`, `last_held`; default
    `inflight`: one stage per device), as do the last stage's `tail_layers` (multi-token prediction depths);
    recompute_buffer is the one layer of one micro-batch that recomputation rebuilds during the backward pass.
    `layer_bytes`: (a.per_layer(), a.per_layer("none")) when the caller has them (several stages of one shape).
    """
    n_layers = validate.number("layers_on_stage", layers_on_stage, 0, ACTIVATIONS["layers"].hi)
    inflight = _spec_number("inflight", inflight)
    first_held = inflight if first_held is None else _spec_number("inflight", first_held)
    last_held = inflight if last_held is None else _spec_number("inflight", last_held)
    per_layer, none = layer_bytes or (a.per_layer(), a.per_layer("none"))
    b, h, t, sp, cp = a.micro_batch_size, a.hidden, a.t, a.sequence_parallel, a.cp
    out = {
        "layers": per_layer * (n_layers * inflight + np.where(last, tail_layers, 0) * last_held),
        "embedding": np.where(first, embedding_bytes(a.seq, b, h, t, sp, cp) * first_held, 0.0),
        "output": np.where(last, output_bytes(a.seq, b, h, a.vocab, t, sp, cp) * last_held, 0.0),
        "recompute_buffer": np.where((n_layers > 0) | (np.where(last, tail_layers, 0) > 0), none - per_layer, 0.0),
    }
    out["total"] = out["layers"] + out["embedding"] + out["output"] + out["recompute_buffer"]
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
