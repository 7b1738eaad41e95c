"""The numbers one GPU runs operations at: dense peaks, HBM bandwidth, SMs and the efficiency fractions.

The fractions come from the GPU family's calibration record for the precision trained in
(core.cost.calibration, assets/efficiency.json): fitted on a named calibration set by scripts/fit_efficiency.py,
or fixed from a named source. A GPU preset may carry its own gemm_eff / mem_eff, and the planner's `eff` /
`mem_eff` inputs override both (0 keeps the calibrated value).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.cost import calibration, releases
from core.model.config import GpuSpec


@dataclass(frozen=True)
class Rates:
    """Everything the operation timings need about the hardware, resolved to plain numbers (SI units).

    gemm_eff / gemm_k0 time the 16-bit GEMMs (attention products, the output layer); linear_eff / linear_k0 the
    layers' linear GEMMs at linear_peak: the same numbers in 16-bit training, the FP8 record's under FP8.
    """

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
    flash_s0: float = 0.0  # a flash kernel runs at keys / (keys + flash_s0) of flash_eff (core.cost.gemm.flash_time)
    linear_eff: float | None = None  # None: gemm_eff
    linear_k0: float | None = None  # None: gemm_k0
    calibration: str = ""  # the key of the record the fractions came from (and the FP8 one's, after a +)
    flash_kernel: str = "flash-attn-2"  # which fused attention kernel flash_eff is (calibration.FLASH_KERNELS)
    share: float = 1.0  # the training software's share of the calibrated fractions, already in them (compute_stack)
    release: str = ""  # the software release whose fitted kernels replace the records' (core.cost.releases)

    @property
    def linear(self) -> tuple[float, float, float]:
        """(peak, efficiency, k0) of the layers' linear GEMMs."""
        eff = self.gemm_eff if self.linear_eff is None else self.linear_eff
        return self.linear_peak, eff, self.gemm_k0 if self.linear_k0 is None else self.linear_k0

    @classmethod
    def of(cls, gpu: GpuSpec, eff: float = 0.0, mem_eff: float = 0.0, fp8: bool = False,
           flash_kernel: str = "flash-attn-2", share: float = 1.0, release: str = "") -> Rates:
        """The rates of `gpu`; eff / mem_eff > 0 override the GPU's (or the calibrated) fractions. fp8: the linear
        layers run at the FP8 tensor peak at the FP8 record's fraction (the attention core and the output layer
        stay 16-bit, as Transformer Engine recipes and DeepSeek-V3 do). flash_kernel: which fused attention kernel
        a flash model runs (FlashAttention-2, or the Triton kernel of flash-attn 1.0.x), each at its own rate.
        share: the training software's share of all those rates (core.cost.step_input.Assumptions.compute_share:
        1 for the software the calibration sets ran). release: the software release whose fitted kernels replace
        the records' (core.cost.releases; "" = the base records)."""
        base = calibration.for_family(gpu.calibration, "16-bit", release)
        fixed = calibration.fixed()
        gemm = eff or gpu.gemm_eff or base.gemm_eff
        linear = gpu.peak_flops_fp8 if fp8 and gpu.peak_flops_fp8 is not None else gpu.peak_flops
        low = calibration.for_family(gpu.calibration, "fp8", release) if linear != gpu.peak_flops else base
        return cls(peak=gpu.peak_flops, linear_peak=linear, bandwidth=gpu.mem_bytes_per_s, sms=gpu.sms,
                   gemm_eff=share * float(gemm), mem_eff=share * float(mem_eff or gpu.mem_eff or base.mem_eff),
                   gemm_k0=base.gemm_k0, tile_m=int(fixed["tile_m"]), tile_n=int(fixed["tile_n"]),
                   flash_eff=share * base.flash(flash_kernel), flash_causal_share=float(fixed["flash_causal_share"]),
                   flash_s0=float(fixed["flash_s0"]),
                   linear_eff=share * float(eff or (gemm if low is base else low.gemm_eff)), linear_k0=low.gemm_k0,
                   calibration=base.key + (f" + {low.key}" if low is not base else ""), flash_kernel=flash_kernel,
                   share=float(share), release=release)

    def _release(self) -> str:
        """What the release replaces in these records, in words ("" when it replaces nothing)."""
        keys = self.calibration.split(" + ")
        if not self.release or not any(k in releases.values(self.release) for k in keys):
            return ""
        return f"; timed as {releases.note(self.release)}"

    def _kernel(self, cal: calibration.Calibration) -> str:
        """The fused attention kernel the rate is for: the named one, or the release's where its fit replaced it."""
        replaced = releases.values(self.release).get(cal.key, {}) if self.release else {}
        field = calibration.FLASH_FIELD[self.flash_kernel]
        return f"release {self.release}'s fused attention" if field in replaced else self.flash_kernel

    def rows(self, gpu: GpuSpec | None = None) -> list[dict]:
        """The efficiency parameters as assumption rows (value, unit, source), for --explain and the page."""
        keys = self.calibration.split(" + ")
        cal, low = (releases.apply(calibration.record(k), self.release) if self.release else calibration.record(k)
                    for k in (keys[0], keys[-1]))
        meaning, sources = calibration.meaning(), calibration.fixed_sources()
        borrowed = f" ({gpu.calibration_note})" if gpu is not None and gpu.calibration_note else ""
        scaled = "" if self.share == 1.0 else f"; x {self.share:g}, the training software's share (compute_stack)"
        out = [
            {"key": "calibration", "label": "Calibration record", "value": self.calibration, "unit": "",
             "why": f"the {cal.family.upper()} family's fractions (assets/efficiency.json){borrowed}{self._release()}"},
            {"key": "gemm_eff", "label": "Large-GEMM fraction of peak", "value": self.gemm_eff, "unit": "",
             "why": f"{meaning['gemm_eff']}; {cal.source('gemm_eff')}{scaled}"},
            {"key": "mem_eff", "label": "Achieved fraction of memory bandwidth", "value": self.mem_eff, "unit": "",
             "why": f"{meaning['mem_eff']}; {cal.source('mem_eff')}{scaled}"},
            {"key": "gemm_k0", "label": "GEMM per-tile overhead k0", "value": self.gemm_k0, "unit": "elements of k",
             "why": f"{meaning['gemm_k0']}; {cal.source('gemm_k0')}"},
            {"key": "tile", "label": "GEMM output tile", "value": f"{self.tile_m} x {self.tile_n}", "unit": "",
             "why": f"{sources['tile_m']}; tiles run in waves of {self.sms} SMs (wave quantisation)"},
            {"key": "flash_eff", "label": f"Flash-attention fraction of peak ({self._kernel(cal)})",
             "value": self.flash_eff, "unit": "", "why": f"{meaning[calibration.FLASH_FIELD[self.flash_kernel]]}; "
                                                         f"{cal.source(calibration.FLASH_FIELD[self.flash_kernel])}{scaled}"},
            {"key": "flash_s0", "label": "Flash-attention per-tile overhead", "value": self.flash_s0, "unit": "keys",
             "why": sources["flash_s0"]},
        ]
        if len(keys) > 1:
            peak, eff, k0 = self.linear
            out += [
                {"key": "fp8_gemm_eff", "label": "FP8 GEMM fraction of the FP8 peak", "value": eff, "unit": "",
                 "why": f"the linear layers' GEMMs under FP8; {low.source('gemm_eff')}{scaled}"},
                {"key": "fp8_gemm_k0", "label": "FP8 GEMM per-tile overhead k0", "value": k0,
                 "unit": "elements of k", "why": f"{meaning['gemm_k0']}; {low.source('gemm_k0')}"},
            ]
        return out
