"""Seconds of one matrix multiplication, or one memory-bound kernel, on one GPU (vectorised over candidates).

A GEMM kernel writes its m x n output in tiles of tile_m x tile_n, one tile per streaming multiprocessor at a
time, so the tiles run in ceil(tiles / SMs) waves. A last, partly filled wave leaves SMs idle and a tile that
overhangs the matrix computes padding (wave and tile quantisation); each tile also pays a start-up and
write-back cost worth k0 elements of the inner dimension k, so a short k runs below peak. The roofline takes
the slower of that compute time and the time to move the operands through HBM:

    compute = 2 m n k batch / (peak x gemm_eff x filled x k / (k + k0))
    filled  = m n batch / (waves x SMs x tile_m x tile_n)
    memory  = (A + B + C bytes) / (bandwidth x mem_eff)
    time    = max(compute, memory)

Attention's per-head products (s x s x head_dim) are batched GEMMs with a short k: the roofline makes them
memory-bound on every current GPU, which is why an eager attention costs more than its FLOPs suggest.
"""

from __future__ import annotations

import numpy as np

from core.cost.rates import Rates


def gemm_time(r: Rates, m, n, k, batch=1.0, a_bytes=2.0, c_bytes=2.0, accumulate=False,
              linear: bool = False) -> np.ndarray:
    """Seconds of `batch` GEMMs (m x k) @ (k x n); c_bytes/accumulate describe the output C.

    accumulate: C += A B (the weight gradient accumulated into an fp32 main-grad buffer reads C too). linear: one
    of the layers' linear layers, at r.linear (the FP8 peak and the FP8 record's fractions under FP8 training);
    otherwise a 16-bit GEMM at the 16-bit peak.
    """
    m, n, k, batch = (np.asarray(x, dtype=float) for x in (m, n, k, batch))
    peak, eff, k0 = r.linear if linear else (r.peak, r.gemm_eff, r.gemm_k0)
    tiles = batch * np.ceil(m / r.tile_m) * np.ceil(n / r.tile_n)
    waves = np.ceil(tiles / r.sms)
    filled = m * n * batch / (waves * r.sms * r.tile_m * r.tile_n)
    rate = peak * eff * filled * k / (k + k0)
    compute = 2.0 * m * n * k * batch / rate
    moved = batch * (a_bytes * (m * k + k * n) + c_bytes * m * n * (2.0 if accumulate else 1.0))
    return np.maximum(compute, moved / (r.bandwidth * r.mem_eff))


def stream_time(r: Rates, nbytes) -> np.ndarray:
    """Seconds of memory-bound kernels that read and write `nbytes` in total."""
    return np.asarray(nbytes, dtype=float) / (r.bandwidth * r.mem_eff)


def flash_time(r: Rates, flops, keys=np.inf) -> np.ndarray:
    """Seconds of a fused (flash) attention kernel doing `flops` (already halved for causal masking) over `keys` key
    positions per query block: it runs at flash_eff x keys / (keys + flash_s0) of the 16-bit peak, the same
    fixed-cost-per-tile form as a GEMM's short inner dimension (each query tile's loop over keys has a start-up
    and write-back cost). FlashAttention-2's own causal benchmarks fit it to 1 % (A100 and H100, s = 512-16K)."""
    keys = np.asarray(keys, dtype=float)
    return np.asarray(flops, dtype=float) / (r.peak * r.flash_eff * keys / (keys + r.flash_s0))
