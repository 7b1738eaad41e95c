"""FSDP peak memory: fully sharded states plus whatever is unsharded at the worst moment (Zhao et al. 2023).

FSDP keeps each wrapped unit's parameters as one flat, sharded tensor. Before a unit runs, its shards are
all-gathered into the full 16-bit parameters; in the backward pass its full 16-bit gradients exist until
they are reduce-scattered. The root unit (everything no inner unit claims: embeddings, final norm) stays
gathered from the start of the forward to the end of the backward. With prefetching the next unit is
gathered while the current one computes. So

    peak = (P + G + K) Psi / N_d  +  P x root  +  max( unit x (P (1 + prefetch) + G),  G x root )

The wrap policy decides the unit size. Wrapping only the root makes the whole model one unit: the peak
then holds all of Psi unsharded (P + G bytes each), which is the "common mistake" the seed warns about.

Simplification: `min-params` groups consecutive blocks until a unit reaches the minimum, like a
hand-written policy; PyTorch's size_based_auto_wrap_policy walks the module tree instead and may wrap
smaller sub-modules (a large MLP linear) or the whole block list, depending on the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from core import validate
from core.errors import InputError
from core.memory.states import check_nd, check_psi, model_states
from core.params.memory import FSDP, WRAP_POLICIES


@dataclass(frozen=True)
class FsdpPeak:
    """Peak bytes per GPU by term, and the wrap that produced it."""

    sharded: float
    root_params: float
    unit_params: float  # gathered 16-bit parameters of the inner unit(s) at the worst moment (x2 with prefetch)
    unit_grads: float  # unsharded gradients at the worst moment (the unit's, or the root's)
    peak: float
    unit_size: float  # parameters in the largest non-root unit (the root's size for root-only)
    units: int


def units(psi, layers, block_params, policy: str = "block", min_params=None) -> tuple[float, float, int]:
    """(root parameters, parameters of the largest inner unit, number of inner units) for a wrap policy."""
    psi = float(check_psi(psi))
    layers = int(validate.number("layers", layers, FSDP["layers"].lo, FSDP["layers"].hi, integer=True))
    block = float(validate.number("block_params", block_params, 1, FSDP["block_params"].hi))
    policy = validate.choice("policy", policy, WRAP_POLICIES)
    if layers * block > psi:
        raise InputError(f"block_params: {layers} blocks x {block:g} exceed the {psi:g} parameters of the model")
    if policy == "root-only":
        return psi, 0.0, 0
    if policy == "block":
        return psi - layers * block, block, layers
    if min_params is None:
        raise InputError("min_params: the min-params wrap policy needs a minimum unit size")
    minimum = float(validate.number("min_params", min_params, 1, FSDP["min_params"].hi))
    per_unit = min(layers, max(1, int(np.ceil(minimum / block))))
    return psi - layers * block, per_unit * block, int(np.ceil(layers / per_unit))


def fsdp_peak(psi, nd, layers, block_params, policy: str = "block", min_params=None, prefetch: bool = True,
              k=12.0, param_bytes=2.0, grad_bytes=2.0) -> FsdpPeak:
    """Peak model-state bytes per GPU under FSDP full sharding for one wrap policy."""
    nd = check_nd(nd)
    root, unit, count = units(psi, layers, block_params, policy, min_params)
    sharded = float(model_states(psi, nd, 3, k, param_bytes, grad_bytes).total)
    gathered, grads = (float(x) for x in unsharded(root, unit, count, param_bytes, grad_bytes, prefetch)[1:])
    peak = sharded + float(param_bytes) * root + gathered + grads
    return FsdpPeak(sharded, float(param_bytes) * root, gathered, grads, peak, unit if count else root, count)


def unsharded(root, unit, count, param_bytes=2.0, grad_bytes=2.0, prefetch: bool = True):
    """(root parameters, gathered unit parameters, unsharded gradients) in bytes at the worst moment: the
    backward of the largest inner unit (plus the prefetched next one), or of the root. Arrays broadcast: the
    planner asks it for every ZeRO-3 candidate at once (core.memory.per_gpu)."""
    root, unit, count = np.asarray(root, dtype=float), np.asarray(unit, dtype=float), np.asarray(count)
    pb, gb = np.asarray(param_bytes, dtype=float), np.asarray(grad_bytes, dtype=float)
    inner = (unit * pb * (1 + (bool(prefetch) & (count > 1))), unit * gb)
    outer_grads = root * gb
    take_inner = inner[0] + inner[1] >= outer_grads
    return pb * root, np.where(take_inner, inner[0], 0.0), np.where(take_inner, inner[1], outer_grads)


def wrap_comparison(psi, nd, layers, block_params, min_params, prefetch: bool = True, k=12.0,
                    param_bytes=2.0, grad_bytes=2.0) -> pd.DataFrame:
    """One row per wrap policy, so the page can show how a root-only wrap blows up the peak."""
    rows = []
    for policy in WRAP_POLICIES:
        r = fsdp_peak(psi, nd, layers, block_params, policy, min_params, prefetch, k, param_bytes, grad_bytes)
        rows.append({"policy": policy, "units": r.units, "unit size [params]": r.unit_size,
                     "sharded states [bytes]": r.sharded, "root params [bytes]": r.root_params,
                     "gathered params [bytes]": r.unit_params, "unsharded grads [bytes]": r.unit_grads,
                     "peak [bytes]": r.peak})
    return pd.DataFrame(rows)
