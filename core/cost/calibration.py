"""A GPU family's calibration for one precision: the efficiency fractions the per-operation time model runs at.

One record per GPU family and precision (assets/efficiency.json, section `calibrations`): A100 16-bit, H100 16-bit,
H100 FP8. Each is fitted by scripts/fit_efficiency.py on its own named calibration set of published runs (never on
a held-out row) or, where the runs cannot identify a value, fixed from a named source; the record keeps which is
which. A GPU preset names the family whose record it uses (assets/gpus.json `calibration`) and says why when it
borrows another GPU's; a custom GPU borrows the H100's unless told otherwise. core.cost.rates.Rates is built from
the record, so every number a time uses can be traced to its row in the file.

An FP8 record describes only the linear layers' GEMMs (the attention core, the output layer and the memory-bound
kernels stay 16-bit, as in Transformer Engine recipes): its fields fall back to the family's 16-bit record.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from core.cost import releases
from core.params.catalog import calibration_families, document
from core.params.planner import FLASH_KERNELS

PRECISIONS = ("16-bit", "fp8")
DEFAULT_FAMILY = "h100"  # what a custom GPU borrows (its default numbers are the H100 SXM's)
FITTABLE = ("gemm_eff", "mem_eff", "gemm_k0", "flash_eff", "triton_flash_eff")
FLASH_FIELD = {"flash-attn-2": "flash_eff", "triton": "triton_flash_eff"}  # each FLASH_KERNELS entry's record field
if tuple(FLASH_FIELD) != FLASH_KERNELS:  # one list of kernels: core.params.planner declares them
    raise ImportError("core.cost.calibration.FLASH_FIELD must name every FLASH_KERNELS entry, in order")


@dataclass(frozen=True)
class Calibration:
    """The efficiency of one GPU family at one precision, with where each number comes from."""

    key: str  # "a100-16bit", "h100-16bit", "h100-fp8"
    family: str  # "a100", "h100"
    precision: str  # "16-bit" (fp16 and bf16) or "fp8"
    gemm_eff: float  # share of this precision's dense peak a large, well-shaped GEMM sustains
    mem_eff: float  # share of HBM bandwidth memory-bound kernels sustain
    gemm_k0: float  # a GEMM tile's fixed cost in elements of its inner dimension k: rate x k / (k + k0)
    flash_eff: float  # share of the 16-bit peak a fused (flash) attention kernel sustains (FlashAttention-2)
    triton_flash_eff: float  # the same for the Triton FlashAttention of flash-attn 1.0.x (llm-foundry's 'triton')
    fitted: tuple[str, ...]  # which were fitted on the calibration set (the others: `sources` or `fits`)
    calibration_set: str  # the named set of published runs the fit saw
    rows: tuple[str, ...]  # its row keys (assets/validation.json)
    sources: tuple[tuple[str, str], ...]  # (parameter, source) for every value not fitted, and the set's sources
    fits: tuple[tuple[str, str], ...] = ()  # (parameter, its own calibration set) for values another fit makes

    def source(self, name: str) -> str:
        """Where `name`'s value comes from: the fit and its set, or its published source."""
        if name in self.fitted:
            return f"fitted on {self.calibration_set}"
        if name in dict(self.fits):
            return f"fitted on {dict(self.fits)[name]}"
        return dict(self.sources).get(name, "")

    def flash(self, kernel: str) -> float:
        """The share of the 16-bit peak the named fused attention kernel (FLASH_KERNELS) sustains."""
        if kernel not in FLASH_KERNELS:
            raise KeyError(f"no flash kernel {kernel!r}; known: {', '.join(FLASH_KERNELS)}")
        return float(getattr(self, FLASH_FIELD[kernel]))


def _document() -> dict[str, Any]:
    return document("efficiency.json")


@lru_cache(maxsize=16)
def record(key: str) -> Calibration:
    """The calibration record `key` of assets/efficiency.json (an FP8 record completed from its 16-bit base)."""
    sections = _document()["calibrations"]
    if key not in sections:
        raise KeyError(f"no calibration {key!r}; the file has {', '.join(sections)}")
    entry = sections[key]
    values = dict(entry["values"])
    if "base" in entry:  # FP8: what the record does not give is the family's 16-bit value
        base = record(entry["base"])
        values = {**{k: getattr(base, k) for k in FITTABLE}, **values}
    return Calibration(
        key=key, family=entry["family"], precision=entry["precision"],
        **{k: float(values[k]) for k in FITTABLE},
        fitted=tuple(entry.get("fitted", ())), calibration_set=entry.get("set", ""),
        rows=tuple(entry.get("rows", ())), sources=tuple(sorted(entry.get("sources", {}).items())),
        fits=tuple(sorted((k, v["set"]) for k, v in entry.get("fits", {}).items())))


def entry(key: str) -> dict[str, Any]:
    """Record `key` as loaded from the file (the fit script updates it in place before fitting the next)."""
    return _document()["calibrations"][key]


def keys() -> tuple[str, ...]:
    return tuple(_document()["calibrations"])




def for_family(family: str, precision: str, release: str = "") -> Calibration:
    """The record of `family` at `precision` ("fp16" and "bf16" are "16-bit"); FP8 without its own FP8 record uses
    the family's 16-bit one (an FP8 GEMM then sustains the 16-bit fraction of the FP8 peak: an assumption).
    release: the software release (core.cost.releases) whose fitted kernels replace the record's; "" = the base."""
    wanted = "fp8" if precision == "fp8" else "16-bit"
    found = {(e["family"], e["precision"]): k for k, e in _document()["calibrations"].items()}
    key = found.get((family, wanted)) or found.get((family, "16-bit"))
    if key is None:
        raise KeyError(f"no calibration for GPU family {family!r}; the file has {', '.join(calibration_families())}")
    return releases.apply(record(key), release) if release else record(key)


def fixed() -> Mapping[str, Any]:
    """Values every record shares, taken from sources: the GEMM tile and the causal share of flash attention."""
    return _document()["fixed"]


def meaning() -> Mapping[str, str]:
    return _document()["meaning"]


@contextmanager
def trial(key: str, **values: float) -> Iterator[None]:
    """Temporarily give record `key` other values (the fit script tries candidates); restores the file's."""
    entry = _document()["calibrations"][key]
    unknown = set(values) - set(FITTABLE)
    if unknown:
        raise KeyError(f"not calibration parameters: {', '.join(sorted(unknown))}")
    saved = dict(entry["values"])
    entry["values"].update(values)
    record.cache_clear()
    try:
        yield
    finally:
        entry["values"].clear()
        entry["values"].update(saved)
        record.cache_clear()



def fixed_sources() -> Mapping[str, str]:
    return _document()["fixed_sources"]


def measurements() -> Mapping[str, Any]:
    """The kernel measurements by shape that fix what the calibration runs cannot identify."""
    return _document()["measurements"]


def document_copy() -> dict[str, Any]:
    """The loaded file itself (the fit script updates it in place); clear record's cache after changing it."""
    return _document()
