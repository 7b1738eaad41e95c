"""Range checks for numbers and numpy arrays entering core.

The planner passes whole arrays of candidates, so the checks are vectorised and report the first bad
value; the message names the input and the allowed range, like the Spec tables do for scalars.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core.errors import InputError


def _fmt(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def number(name: str, value, lo: float, hi: float, integer: bool = False) -> np.ndarray:
    """`value` as a float64 array after checking it is finite, in [lo, hi] and whole if `integer`."""
    if isinstance(value, bool | np.bool_) or value is None:
        raise InputError(f"{name}: expected a number from {_fmt(lo)} to {_fmt(hi)}, got {value!r}")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{name}: expected a number from {_fmt(lo)} to {_fmt(hi)}, got {_short(value)}") from None
    if arr.size == 0:
        raise InputError(f"{name}: no values given")
    finite = np.isfinite(arr)
    if not finite.all():
        raise InputError(f"{name}: must be a finite number, got {arr[~finite].flat[0]}")
    if integer and not (arr == np.floor(arr)).all():
        bad = arr[arr != np.floor(arr)].flat[0]
        raise InputError(f"{name}: must be a whole number, got {bad:g}")
    low, high = arr.min(), arr.max()
    if low < lo or high > hi:
        bad = low if low < lo else high
        raise InputError(f"{name}: {bad:g} is out of range; allowed {_fmt(lo)} to {_fmt(hi)}")
    return arr


def choice(name: str, value, options: Sequence[str]) -> str:
    """One of `options` (case-insensitive), returned in its canonical spelling."""
    if isinstance(value, str):
        for option in options:
            if value.lower() == option:
                return option
    raise InputError(f"{name}: {_short(value)} is not allowed; choose one of {', '.join(options)}")


def choice_codes(name: str, value, options: Sequence[str]) -> np.ndarray:
    """A name or an array of names/integer codes -> integer codes into `options` (for vectorised callers)."""
    if isinstance(value, str):
        return np.asarray(options.index(choice(name, value, options)))
    arr = np.asarray(value)
    if arr.dtype.kind in "US":
        lookup = {o: i for i, o in enumerate(options)}
        codes = np.full(arr.shape, -1, dtype=np.int64)
        for i, o in enumerate(options if arr.dtype.kind == "U" else ()):  # as written: one comparison per option
            codes[arr == o] = i
        rest = codes < 0
        if not rest.any():
            return codes
        try:
            codes[rest] = [lookup[str(s).lower()] for s in arr[rest].tolist()]
            return codes
        except KeyError as exc:
            raise InputError(f"{name}: {exc.args[0]!r} is not allowed; choose one of {', '.join(options)}") from None
    return number(name, arr, 0, len(options) - 1, integer=True).astype(np.int64)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
