"""Does it fit, and the inverse questions: the smallest N_d that fits, the largest model that fits.

A GPU's usable memory is its size minus a reserve the user sets (communication buckets, CUDA context,
allocator fragmentation: none of it is model state or activations). Model states are
Psi (replicated + sharded / N_d) (core.memory.split_coefficients), so both inverse questions have closed
forms; the smallest N_d is then checked against model_states itself so that "fits" means the same
thing everywhere.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from core import validate
from core.errors import InputError
from core.memory.offload import placement, supported
from core.memory.states import (
    STAGE_KEYS,
    STAGE_LABELS,
    check_nd,
    check_psi,
    model_states,
    split_coefficients,
)
from core.params.memory import MAX_GPU_MEM_GB, MAX_GPUS, MAX_ND, MAX_PP, MAX_TP
from core.units import GB


def usable_bytes(gpu_mem_gb, reserve_gb=0.0, reserve_frac=0.0) -> np.ndarray:
    """Bytes left for model states and activations: gpu_mem x (1 - reserve_frac) - reserve (GB = 1e9)."""
    mem = validate.number("gpu_mem", gpu_mem_gb, 0.001, MAX_GPU_MEM_GB) * GB
    reserve = validate.number("reserve", reserve_gb, 0.0, MAX_GPU_MEM_GB) * GB
    frac = validate.number("reserve_frac", reserve_frac, 0.0, 0.9)
    usable = mem * (1.0 - frac) - reserve
    if (usable <= 0).any():
        raise InputError("reserve: leaves no usable GPU memory; make it smaller than the GPU memory")
    return usable


def check_gpu_count(t, p, nd, gpus) -> np.ndarray:
    """Total GPUs a t x p x N_d layout needs; InputError if it needs more than `gpus` (0 = no limit)."""
    t = validate.number("t", t, 1, MAX_TP, integer=True)
    p = validate.number("p", p, 1, MAX_PP, integer=True)
    nd = check_nd(nd)
    gpus = validate.number("gpus", gpus, 0, MAX_GPUS, integer=True)
    need = t * p * nd
    over = (gpus > 0) & (need > gpus)
    if over.any():
        need_bad, have = np.broadcast_arrays(need, gpus)
        raise InputError(f"nd: t x p x N_d = {need_bad[over].flat[0]:,.0f} GPUs exceeds the "
                         f"{have[over].flat[0]:,.0f} available", keys=("nd", "gpus"))
    return need


def fits(total_bytes, usable) -> np.ndarray:
    return np.asarray(total_bytes) <= np.asarray(usable)


def min_nd(psi, stage, usable, k=12.0, param_bytes=2.0, grad_bytes=2.0, other_bytes=0.0, sharded_from=()) -> np.ndarray:
    """Smallest whole N_d at which states + other_bytes fit in `usable`; inf where no N_d ever fits
    (the stage's replicated floor alone is too big), which is how ZeRO-1/2 fail for big models."""
    psi = check_psi(psi)
    other = validate.number("other_bytes", other_bytes, 0, 1e18)
    usable = np.asarray(usable, dtype=float)
    replicated, sharded = split_coefficients(stage, k, param_bytes, grad_bytes, sharded_from)
    room = usable - other - replicated * psi
    with np.errstate(divide="ignore", invalid="ignore"):
        guess = np.where(sharded * psi > 0, np.ceil(sharded * psi / room), 1.0)
    guess = np.where(room >= 0, np.maximum(guess, 1.0), np.inf)
    guess = np.where((room == 0) & (sharded * psi > 0), np.inf, guess)
    ok = np.isfinite(guess) & (guess <= MAX_ND)
    nd = np.where(ok, guess, 1.0)

    def fits_at(n):
        return model_states(psi, n, stage, k, param_bytes, grad_bytes, sharded_from).total + other <= usable

    nd = np.where(ok & ~fits_at(nd), nd + 1, nd)  # float rounding at the boundary, one step each way
    lower = np.maximum(nd - 1, 1)
    nd = np.where(ok & (nd > 1) & fits_at(lower), lower, nd)
    return np.where(ok, nd, guess)


def smallest_nd(psi, stage, gpu_mem_gb, reserve_gb=0.0, reserve_frac=0.0, k=12.0, param_bytes=2.0,
                grad_bytes=2.0, other_bytes=0.0) -> int | None:
    """Scalar form of min_nd for one configuration; None when no data-parallel degree fits."""
    usable = usable_bytes(gpu_mem_gb, reserve_gb, reserve_frac)
    value = float(min_nd(psi, stage, usable, k, param_bytes, grad_bytes, other_bytes))
    return int(value) if np.isfinite(value) else None


def largest_model(nd, stage, usable, k=12.0, param_bytes=2.0, grad_bytes=2.0, other_bytes=0.0) -> np.ndarray:
    """Most parameters whose states (+ other_bytes) fit in `usable` bytes per GPU, at a given N_d."""
    nd = check_nd(nd)
    other = validate.number("other_bytes", other_bytes, 0, 1e18)
    replicated, sharded = split_coefficients(stage, k, param_bytes, grad_bytes)
    per_param = replicated + sharded / nd
    room = np.maximum(np.asarray(usable, dtype=float) - other, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(per_param > 0, np.floor(room / per_param), np.inf)


def fit_table(psi, nd, gpu_mem_gb=80.0, reserve_gb=0.0, reserve_frac=0.0, offload: str = "none",
              activation_bytes=0.0, k=12.0, param_bytes=2.0, grad_bytes=2.0) -> pd.DataFrame:
    """One row per stage: states on the GPU, activations, total, usable memory, fits, headroom, and the
    smallest N_d that would fit. Offload applies where a stage supports it (offload.supported)."""
    usable = float(usable_bytes(gpu_mem_gb, reserve_gb, reserve_frac))
    act = float(validate.number("activation_bytes", activation_bytes, 0, 1e18))
    rows = []
    for s in range(4):
        mode = supported(offload, s)
        placed = placement(psi, nd, s, mode, k, param_bytes, grad_bytes)
        states = float(model_states(psi, nd, s, k, param_bytes, grad_bytes).total)
        gpu = float(placed.gpu_total)
        total = gpu + act
        need = float(min_nd(psi, s, usable, k, param_bytes, grad_bytes, act)) if mode == "none" else np.nan
        rows.append({
            "stage": s, "stage_label": STAGE_LABELS[s], "key": STAGE_KEYS[s], "offload": mode,
            "model states [bytes]": states, "states on GPU [bytes]": gpu,
            "states on CPU [bytes]": float(placed.cpu_total),
            "activations [bytes]": act, "total on GPU [bytes]": total, "usable [bytes]": usable,
            "fits": bool(total <= usable), "headroom [bytes]": usable - total, "smallest N_d that fits": need,
        })
    return pd.DataFrame(rows)


def together(states_bytes, activation_bytes, usable) -> dict:
    """Model states and activations side by side and summed: forgetting the second is the classic OOM."""
    states = float(validate.number("states_bytes", states_bytes, 0, 1e18))
    acts = float(validate.number("activation_bytes", activation_bytes, 0, 1e18))
    return {"states": states, "activations": acts, "total": states + acts, "usable": float(usable),
            "fits_states_only": states <= float(usable), "fits": states + acts <= float(usable)}
