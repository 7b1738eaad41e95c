"""Divisors of a GPU count or an expert count: every split the planner enumerates is one of them."""

from __future__ import annotations

import math

import numpy as np


def divisors(n: int) -> list[int]:
    """All k with n % k == 0, ascending (pairs up to sqrt(n): G = 16,384 takes 128 trial divisions, not 16,384)."""
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return sorted(set(small + [n // k for k in small]))


def chunk_slots(layers: int, p, v):
    """The most chunks p x v a model of `layers` layers fills: the layers, or layers + 2 when Megatron-LM counts the
    embedding and the loss as one layer each and p x v divides that (--account-for-embedding-in-pipeline-split,
    --account-for-loss-in-pipeline-split; megatron/core/transformer/transformer_block.py get_num_layers_to_build)."""
    slots = np.asarray(p) * np.asarray(v)
    return np.where((layers + 2) % np.maximum(slots, 1) == 0, layers + 2, layers)
