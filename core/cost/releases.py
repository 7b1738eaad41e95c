"""The software release a step is timed as: which kernels of the calibration records it replaces, and from which fit.

Kernels change between releases of the same stack (Transformer Engine's FP8 GEMMs and fused attention moved between
NeMo 24.07 and Megatron-Bridge 25.09), so one set of fractions fitted on a 2024 table times a 2026 run 10-15 % slow.
A release (assets/releases.json) is fitted on its own vendor table and replaces only the record fields its fit
identifies; a release without a table of its own times with the fit it `uses`, so its rows stay held out. The base
release is the one the records themselves were fitted on: it replaces nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from functools import lru_cache
from typing import Any

from core.params.catalog import document


def _document() -> dict[str, Any]:
    return document("releases.json")


def keys() -> tuple[str, ...]:
    """Every release, oldest first."""
    return tuple(_document()["releases"])


def base() -> str:
    return _document()["base"]


def entry(key: str) -> Mapping[str, Any]:
    found = _document()["releases"]
    if key not in found:
        raise KeyError(f"no release {key!r}; known: {', '.join(found)}")
    return found[key]


def fitted_by(key: str) -> str:
    """The release whose values time `key`: itself when it was fitted (or is the base), else the one it uses."""
    seen = [key]
    while "values" not in entry(seen[-1]):
        seen.append(entry(seen[-1])["uses"])
        if len(seen) > len(keys()):
            raise ValueError(f"release {key!r}: its 'uses' chain loops ({' -> '.join(seen)})")
    return seen[-1]


@lru_cache(maxsize=64)
def values(key: str) -> dict[str, dict[str, float]]:
    """{record key: {field: value}} that release `key` replaces (empty for the base)."""
    out: dict[str, dict[str, float]] = {}
    for name, value in entry(fitted_by(key))["values"].items():
        record, field = name.split(":")
        out.setdefault(record, {})[field] = float(value)
    return out


def measured(key: str) -> bool:
    """Whether release `key`'s values are a cited kernel measurement (its 'fit' a sentence), not a table fit."""
    found = entry(fitted_by(key))
    return bool(found["values"]) and isinstance(found.get("fit"), str)


def note(key: str) -> str:
    """Where release `key`'s replaced fractions come from, for --explain and the assumption rows."""
    source = fitted_by(key)
    fit = entry(source).get("fit")
    if measured(key):
        whose = "its own values" if source == key else f"{source}'s values"
        return f"release {key}: {whose}, {fit}"
    how = fit["set"] if isinstance(fit, Mapping) else str(fit)
    own = "its own table" if source == key else f"{source}'s fit (no table of its own is fitted)"
    return f"release {key}: {own}: {how}"


def timing_note(key: str, family: str) -> str:
    """One line for an export or a row: which release's kernels its step time assumes, for this GPU family."""
    label = entry(key)["label"]
    if fitted_by(key) == base():
        return (f"Timed as release {key} ({label}) with the base calibration records"
                + (", fitted on its own tables." if key == base() else f" ({base()}'s): it has no table fitted."))
    if not any(k.startswith(f"{family}-") for k in values(key)):
        return (f"Timed as release {key} ({label}); it has no fit for the {family.upper()} family, so the base "
                f"calibration records ({base()}'s) time it.")
    source = fitted_by(key)
    fields = ", ".join(f"{record} {field} {value:g}" for record, changed in values(key).items()
                       for field, value in changed.items())
    if measured(key):
        return (f"Timed as release {key} ({label}): {fields}, a kernel measurement (not fitted; "
                f"assets/releases.json says which); the other kernels are the base records' ({base()}'s).")
    fitted = "its own table" if source == key else f"{source}'s table (it has none of its own fitted)"
    return f"Timed as release {key} ({label}): {fields}, fitted on {fitted}; other software runs other kernels."


def apply(record, key: str):
    """Calibration `record` as release `key` runs it: the fields its fit replaces, each saying so."""
    changed = values(key).get(record.key, {})
    if not changed:
        return record
    fits = dict(record.fits) | {f: f"release {fitted_by(key)}'s table ({entry(fitted_by(key))['tables']})"
                                for f in changed}
    return replace(record, **changed, fitted=tuple(f for f in record.fitted if f not in changed),
                   fits=tuple(sorted(fits.items())))


def rows(key: str) -> list[str]:
    """The validation rows release `key`'s own fit saw (none for a release that uses another's)."""
    fit = entry(key).get("fit")
    return list(fit["rows"]) if isinstance(fit, Mapping) else []


@contextmanager
def trial(key: str, **changed: float) -> Iterator[None]:
    """Temporarily give release `key` other values ("record:field" names; the fit script tries candidates)."""
    stored = entry(key)["values"]
    saved = dict(stored)
    stored.update(changed)
    values.cache_clear()
    try:
        yield
    finally:
        stored.clear()
        stored.update(saved)
        values.cache_clear()
