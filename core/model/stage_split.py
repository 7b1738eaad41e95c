"""How many transformer layers each of the S = p x chunks stages on a micro-batch's path holds, for the step-time
and memory models alike.

Evenly, the fullest stage holds ceil(L / S) layers and the embedding and the output layer (with the loss and any
multi-token prediction depths) come on top of the first and last stages. Megatron-LM can instead count them as
layers of the split: --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split take one
layer slot each from the first and the last stage (megatron/core/transformer/transformer_block.py,
get_num_layers_to_build, at d98e8a6), and a --pipeline-model-parallel-layout such as Megatron-Bridge's DeepSeek-V3
'Et|(tt|)*30mL' also gives each multi-token prediction depth a slot of the last stage. `ends_in_split` is that:
slots = L + 2 + mtp, ceil(slots / S) per stage, the end stages holding what their slots leave. Without pipeline
parallelism (p = 1) there are no end stages to lighten.
"""

from __future__ import annotations

import numpy as np


def stage_layers(layers: int, p, chunks, mtp: int = 0, ends_in_split=False
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(layers of the fullest middle stage, of the first stage, of the last stage), per candidate. With two stages
    (no middle one) the first stage's count stands in for the middle's."""
    p, chunks = np.asarray(p, dtype=float), np.asarray(chunks, dtype=float)
    stages = p * chunks
    ends = np.asarray(ends_in_split, dtype=bool) & (p > 1)
    even = np.ceil(layers / stages)
    target = np.ceil((layers + 2.0 + mtp) / stages)  # slots per stage
    first = np.where(ends, np.clip(target - 1.0, 0.0, layers), even)
    last = np.clip(target - 1.0 - mtp, 0.0, layers - first)
    last = np.where(ends, np.where(stages > 2, last, layers - first), even)
    middle = np.ceil((layers - first - last) / np.maximum(stages - 2.0, 1.0))
    mid = np.where(ends, np.where(stages > 2, middle, first), even)
    return mid, first, last


def layout_string(layers: int, stages: int, mtp: int = 0) -> str | None:
    """Megatron-LM's --pipeline-model-parallel-layout for the ends-in-split placement over `stages` stages
    (E embedding, t layer, m prediction depth, L loss, | between stages, (...)*n repeats; megatron/core/transformer/
    pipeline_parallel_layer_layout.py), the middle stages' leftover layers on the first of them; None for one
    stage."""
    if stages < 2:
        return None
    _, first, last = (int(x) for x in stage_layers(layers, stages, 1, mtp, True))
    middle = stages - 2
    base, extra = divmod(layers - first - last, middle) if middle else (0, 0)
    groups = [(base + 1, extra), (base, middle - extra)]
    body = "".join(("t" * n + "|") if k == 1 else f"({'t' * n}|)*{k}" for n, k in groups if k)
    return "E" + "t" * first + "|" + body + "t" * last + "m" * mtp + "L"


def device_layers(layers: int, p, chunks, mtp: int = 0, ends_in_split=False, v_shape=False
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(transformer layers on the first device, on a middle device, on the last stage's device), per candidate:
    the first device runs the first stage and chunks - 1 middle ones, the last stage's device the last stage and
    chunks - 1 middle ones; a V-shaped schedule (`v_shape`, p > 1) puts the last stage on the first device, which
    then holds both end stages (its count is returned for both ends). Prediction depths are not counted (they are
    not transformer layers of the split: the caller adds them to the last stage)."""
    mid, first, last = stage_layers(layers, p, chunks, mtp, ends_in_split)
    chunks = np.asarray(chunks, dtype=float)
    p = np.asarray(p, dtype=float)
    one = p * chunks <= 1
    first_dev = np.where(one, float(layers), first + (chunks - 1) * mid)
    last_dev = np.where(one, float(layers), last + (chunks - 1) * mid)
    both = np.asarray(v_shape, dtype=bool) & (p > 1)
    together = first + last + np.maximum(chunks - 2, 0) * mid
    first_dev = np.where(both, together, first_dev)
    last_dev = np.where(both, together, last_dev)
    return first_dev, mid * chunks, last_dev


def recomputed(device_layers, chunks, count, recompute) -> np.ndarray:
    """Layers of a device its recompute mode re-runs: all of them, or under full recompute with `count` N > 0 the
    first N of each of its chunks (Megatron-LM's --recompute-method block --recompute-num-layers N)."""
    n = np.asarray(device_layers, dtype=float)
    count = np.asarray(count, dtype=float)
    partial = (np.asarray(recompute) == "full") & (count > 0)
    return np.where(partial, np.minimum(count * np.asarray(chunks, dtype=float), n), n)


def end_ratios(layers: int, mtp: int, p: int, chunks: int) -> tuple[float, float] | None:
    """(first, last) stage's layers over a middle stage's where the ends count in the split, rounded to 1/64 (a cache
    key of the in-flight counts that weigh each chunk by its layers); None where every stage holds the same."""
    mid, first, last = (float(x) for x in stage_layers(layers, p, chunks, mtp, True))
    if mid <= 0 or (first == mid and last == mid):
        return None
    return round(first / mid * 64) / 64, round(last / mid * 64) / 64
