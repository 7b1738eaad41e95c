"""Activation bytes per GPU (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models"), kept apart from the model states because forgetting them is the classic way a
configuration that "fits" runs out of memory.

Per transformer layer and micro-batch, 16-bit activations, s x b x h elements per tensor:
    34 s b h + 5 a s^2 b        = 10 s b h (layer norms, dropout masks, block inputs: replicated under
                                  tensor parallelism) + 24 s b h (sharded by t) + 5 a s^2 b (attention
                                  scores, softmax, dropout: sharded by t).
Sequence parallelism shards the replicated 10 s b h too; selective recomputation drops the 5 a s^2 b
term; full recomputation keeps only the layer input, 2 s b h (divided by t with sequence parallelism).
How many micro-batches a stage holds at once comes from the pipeline simulator (`inflight`), not from a
formula: it depends on the schedule.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from core import validate
from core.params.memory import ACTIVATIONS, RECOMPUTE_MODES


def _spec_number(key: str, value) -> np.ndarray:
    spec = ACTIVATIONS[key]
    return validate.number(key, value, spec.lo, spec.hi, integer=spec.kind == "int")


def per_layer_bytes(seq, mb, hidden, heads, t=1, sequence_parallel=False, recompute="none") -> np.ndarray:
    """Activation bytes one transformer layer keeps for one micro-batch, on one tensor-parallel rank."""
    s, b, h = _spec_number("seq", seq), _spec_number("mb", mb), _spec_number("hidden", hidden)
    a, t = _spec_number("heads", heads), _spec_number("t", t)
    sp = np.asarray(sequence_parallel, dtype=bool)
    mode = validate.choice_codes("recompute", recompute, RECOMPUTE_MODES)
    sbh = s * b * h
    kept = np.where(sp, 10.0 / t, 10.0) + 24.0 / t + np.where(mode == 0, 5.0 * a * s / (h * t), 0.0)
    full = 2.0 / np.where(sp, t, 1.0)
    return sbh * np.where(mode == 2, full, kept)


def embedding_bytes(seq, mb, hidden, t=1, sequence_parallel=False) -> np.ndarray:
    """First stage, per micro-batch: the 1-byte dropout mask after the embeddings (s b h, / t with SP)."""
    sbh = _spec_number("seq", seq) * _spec_number("mb", mb) * _spec_number("hidden", hidden)
    return sbh / np.where(np.asarray(sequence_parallel, dtype=bool), _spec_number("t", t), 1.0)


def output_bytes(seq, mb, hidden, vocab, t=1, sequence_parallel=False) -> np.ndarray:
    """Last stage, per micro-batch: final layer-norm input and output-projection input (2 s b h each,
    / t with SP) and the 32-bit logits for the cross-entropy, 4 s b V / t (vocabulary-parallel).
    Zero when vocab = 0 (no output layer modelled)."""
    s, b, h = _spec_number("seq", seq), _spec_number("mb", mb), _spec_number("hidden", hidden)
    v, t = _spec_number("vocab", vocab), _spec_number("t", t)
    kept = 4.0 * s * b * h / np.where(np.asarray(sequence_parallel, dtype=bool), t, 1.0) + 4.0 * s * b * v / t
    return np.where(v > 0, kept, 0.0)


def layers_per_stage(layers, p) -> np.ndarray:
    """Layers on the most loaded stage, ceil(L / p)."""
    return np.ceil(_spec_number("layers", layers) / _spec_number("p", p))


def stage_bytes(seq, mb, hidden, heads, layers_on_stage, inflight, t=1, sequence_parallel=False,
                recompute="none", vocab=0, first=True, last=True) -> dict[str, np.ndarray]:
    """Peak activation bytes of one stage on one tensor-parallel rank, by term.

    layers: per-layer bytes x layers on the stage x micro-batches in flight; embedding (first stage) and
    output (last stage, when `vocab` > 0) also scale with `inflight`; recompute_buffer is the one layer
    of one micro-batch that recomputation rebuilds during the backward pass.
    """
    n_layers = validate.number("layers_on_stage", layers_on_stage, 0, ACTIVATIONS["layers"].hi)
    inflight = _spec_number("inflight", inflight)
    per_layer = per_layer_bytes(seq, mb, hidden, heads, t, sequence_parallel, recompute)
    none = per_layer_bytes(seq, mb, hidden, heads, t, sequence_parallel, "none")
    out = {
        "layers": per_layer * n_layers * inflight,
        "embedding": np.where(first, embedding_bytes(seq, mb, hidden, t, sequence_parallel) * inflight, 0.0),
        "output": np.where(last, output_bytes(seq, mb, hidden, vocab, t, sequence_parallel) * inflight, 0.0),
        "recompute_buffer": np.where(n_layers > 0, none - per_layer, 0.0),
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


def modes_table(seq, mb, hidden, heads, t=1) -> pd.DataFrame:
    """Per-layer bytes of every mode in Korthikanti et al.'s Table 2, for one (s, b, h, a, t)."""
    rows = []
    for name, sp, recompute, single in MODES:
        value = per_layer_bytes(seq, mb, hidden, heads, 1 if single else t, sp, recompute)
        rows.append({"mode": name, "t": 1 if single else int(t), "sequence_parallel": sp, "recompute": recompute,
                     "per layer [bytes]": float(value)})
    return pd.DataFrame(rows)


def report(seq, mb, hidden, heads, layers, p, inflight, t=1, sequence_parallel=False, recompute="none",
           vocab=0) -> dict:
    """Per-layer bytes, every mode for comparison, and the first and last stage's peak by term.

    With p = 1 the single stage carries both the embedding and the output terms. With p > 1 the last stage
    is evaluated with the same micro-batches in flight as the first: an upper bound (1F1B's last stage holds
    one), because the simulator reports the maximum over devices.
    """
    n = layers_per_stage(layers, p)
    common = (seq, mb, hidden, heads, n, inflight, t, sequence_parallel, recompute, vocab)
    single = int(_spec_number("p", p)) == 1
    first = stage_bytes(*common, first=True, last=single)
    last = None if single else stage_bytes(*common, first=False, last=True)

    def as_float(d):
        return {k: float(v) for k, v in d.items()}

    return {
        "per_layer": float(per_layer_bytes(seq, mb, hidden, heads, t, sequence_parallel, recompute)),
        "layers_per_stage": float(n),
        "inflight": float(_spec_number("inflight", inflight)),
        "modes": {r["mode"]: r["per layer [bytes]"] for r in modes_table(seq, mb, hidden, heads, t).to_dict("records")},
        "first_stage": as_float(first),
        "last_stage": None if last is None else as_float(last),
        "peak": float(max(first["total"], last["total"])) if last is not None else float(first["total"]),
    }
