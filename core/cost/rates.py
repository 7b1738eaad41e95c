"""The numbers one GPU runs operations at: dense peak, HBM bandwidth, SMs and the efficiency fractions.

The fractions come from assets/efficiency.json (fitted once, on a named calibration set, by
scripts/fit_efficiency.py; the fixed ones carry their published source there). A GPU preset may carry its own
gemm_eff / mem_eff, and the planner's `eff` / `mem_eff` inputs override both (0 keeps the calibrated value).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from core.model.config import GpuSpec
from core.params.catalog import document


@lru_cache(maxsize=1)
def calibration() -> dict[str, Any]:
    """assets/efficiency.json as read: 'fitted', 'fixed', their meanings and sources, the calibration record."""
    return document("efficiency.json")


@contextmanager
def fitted_values(**values: float) -> Iterator[None]:
    """Temporarily replace fitted parameters (gemm_eff, mem_eff, gemm_k0): the fit script tries candidates."""
    fitted = calibration()["fitted"]
    unknown = set(values) - set(fitted)
    if unknown:
        raise KeyError(f"not fitted parameters: {', '.join(sorted(unknown))}")
    saved = dict(fitted)
    fitted.update(values)
    try:
        yield
    finally:
        fitted.clear()
        fitted.update(saved)


@dataclass(frozen=True)
class Rates:
    """Everything the operation timings need about the hardware, resolved to plain numbers (SI units)."""

    peak: float  # dense 16-bit FLOP/s
    linear_peak: float  # what the layers' linear GEMMs run at: the 16-bit peak, or the FP8 peak under FP8 training
    bandwidth: float  # HBM bytes/s
    sms: int
    gemm_eff: float
    mem_eff: float
    gemm_k0: float
    tile_m: int
    tile_n: int
    flash_eff: float
    flash_causal_share: float

    @classmethod
    def of(cls, gpu: GpuSpec, eff: float = 0.0, mem_eff: float = 0.0, fp8: bool = False) -> Rates:
        """The rates of `gpu`; eff / mem_eff > 0 override the GPU's (or the calibrated) fractions. fp8: the linear
        layers run at the FP8 tensor peak (the attention core and the output layer stay 16-bit, as Transformer
        Engine recipes and DeepSeek-V3 do)."""
        cal = calibration()
        fitted, fixed = cal["fitted"], cal["fixed"]
        gemm = eff or gpu.gemm_eff or fitted["gemm_eff"]
        memory = mem_eff or gpu.mem_eff or fitted["mem_eff"]
        linear = gpu.peak_flops_fp8 if fp8 and gpu.peak_flops_fp8 is not None else gpu.peak_flops
        return cls(peak=gpu.peak_flops, linear_peak=linear, bandwidth=gpu.mem_bytes_per_s, sms=gpu.sms,
                   gemm_eff=float(gemm),
                   mem_eff=float(memory), gemm_k0=float(fitted["gemm_k0"]), tile_m=int(fixed["tile_m"]),
                   tile_n=int(fixed["tile_n"]), flash_eff=float(fixed["flash_eff"]),
                   flash_causal_share=float(fixed["flash_causal_share"]))

    def rows(self) -> list[dict]:
        """The efficiency parameters as assumption rows (value, unit, source), for --explain and the page."""
        cal = calibration()
        meaning, sources = cal["fitted_meaning"], cal["fixed_sources"]
        fitted_on = cal["calibration"].get("set", "")
        out = [
            {"key": "gemm_eff", "label": "Large-GEMM fraction of peak", "value": self.gemm_eff, "unit": "",
             "why": f"{meaning['gemm_eff']}; fitted on {fitted_on}"},
            {"key": "mem_eff", "label": "Achieved fraction of memory bandwidth", "value": self.mem_eff, "unit": "",
             "why": f"{meaning['mem_eff']}; fitted on {fitted_on}"},
            {"key": "gemm_k0", "label": "GEMM per-tile overhead k0", "value": self.gemm_k0, "unit": "elements of k",
             "why": f"{meaning['gemm_k0']}; fitted with the two above"},
            {"key": "tile", "label": "GEMM output tile", "value": f"{self.tile_m} x {self.tile_n}", "unit": "",
             "why": f"{sources['tile_m']}; tiles run in waves of {self.sms} SMs (wave quantisation)"},
            {"key": "flash_eff", "label": "Flash-attention fraction of peak", "value": self.flash_eff, "unit": "",
             "why": sources["flash_eff"]},
        ]
        return out
