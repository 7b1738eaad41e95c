"""Every input's name, type, range, default and help text, in one place.

A `Spec` describes one input. The same spec is used three ways:
- the CLI parses a string strictly (`Spec.parse`, raises InputError -> exit code 2);
- a page reads the URL leniently (`parse_lenient`: bad values fall back to the default with a notice);
- the UI builds its widget from the spec's bounds, label and help.
Parameter sets are frozen dataclasses whose fields are checked against their specs, so a value that
reaches core is always in range and can key a cache.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from core.errors import InputError

MAX_TEXT = 200  # longest raw string a single value accepts (URL values, CLI options)
ITEM_CHARS = 12  # room per entry of a list ("1,024.125, "): a list's limit is max_items x ITEM_CHARS


@dataclass(frozen=True)
class Spec:
    """One input. `kind` is int, float, choice, bool, floats (a comma-separated list of floats) or choices (a
    comma-separated set of `choices`, kept in their order)."""

    key: str
    kind: str
    default: Any
    lo: float | None = None
    hi: float | None = None
    choices: tuple = ()
    label: str = ""
    help: str = ""
    unit: str = ""
    max_items: int = 0  # for kind == "floats"
    min_items: int = 0  # for kind == "floats": an empty list is refused when this is 1

    def describe_range(self) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(str(c) for c in self.choices)
        if self.kind == "bool":
            return "true or false"
        if self.kind == "floats":
            least = f"{self.min_items} to {self.max_items}" if self.min_items else f"up to {self.max_items}"
            return f"{least} comma-separated numbers in [{self.lo:g}, {self.hi:g}]"
        if self.kind == "choices":
            return "comma-separated, any of " + ", ".join(str(c) for c in self.choices) + (
                "" if self.min_items else " (or none)")
        return f"{_fmt(self.lo)} to {_fmt(self.hi)}"

    @property
    def max_chars(self) -> int:
        """The longest raw text this input accepts: MAX_TEXT, or for a list room for its max_items entries (512
        layers per stage are ~2,000 characters)."""
        return max(MAX_TEXT, self.max_items * ITEM_CHARS) if self.kind == "floats" else MAX_TEXT

    def parse(self, raw: Any) -> Any:
        """Turn a raw value (string from a URL/CLI, or a Python value) into a checked value."""
        if isinstance(raw, str):
            raw = raw.strip()
            if len(raw) > self.max_chars:
                raise InputError(f"{self.key}: value is too long ({len(raw):,} characters; at most "
                                 f"{self.max_chars:,})")
        try:
            value = _PARSERS[self.kind](self, raw)
        except InputError:
            raise
        except (TypeError, ValueError, OverflowError):
            raise InputError(f"{self.key}: {_show(raw)} is not valid; expected {self.describe_range()}") from None
        return value

    def check(self, value: Any) -> None:
        """Raise InputError unless `value` is a valid already-typed value."""
        self.parse(value)


def _fmt(x: float | None) -> str:
    if x is None:
        return "?"
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def _show(raw: Any) -> str:
    text = repr(raw)
    return text if len(text) <= 40 else text[:37] + "...'"


def _number(spec: Spec, raw: Any, integer: bool) -> float | int:
    if isinstance(raw, bool):
        raise ValueError
    if isinstance(raw, str):
        x = float(raw.replace("_", "")) if raw else float("nan")
    else:
        x = float(raw)
    if not math.isfinite(x):
        raise InputError(f"{spec.key}: must be a finite number, got {_show(raw)}")
    if integer:
        if not float(x).is_integer():
            raise InputError(f"{spec.key}: must be a whole number, got {_show(raw)}")
        x = int(x)
    if (spec.lo is not None and x < spec.lo) or (spec.hi is not None and x > spec.hi):
        raise InputError(f"{spec.key}: {_show(raw)} is out of range; allowed {spec.describe_range()}")
    return x


def _choice(spec: Spec, raw: Any) -> Any:
    if isinstance(raw, bool | np.bool_):  # a tri-state such as auto|true|false takes a plain boolean too
        raw = "true" if raw else "false"
    for c in spec.choices:
        if raw == c or (isinstance(raw, str) and raw.lower() == str(c).lower()):
            return c
    raise InputError(f"{spec.key}: {_show(raw)} is not allowed; choose {spec.describe_range()}")


def _bool(spec: Spec, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError


def _choices(spec: Spec, raw: Any) -> tuple[str, ...]:
    """A set of choices, from "a,b" or a sequence; repeats dropped, in the spec's order."""
    items = (raw.split(",") if raw else []) if isinstance(raw, str) else list(raw)
    picked = {_choice(spec, item.strip() if isinstance(item, str) else item) for item in items}
    if len(picked) < spec.min_items:
        raise InputError(f"{spec.key}: give at least {spec.min_items} of {', '.join(spec.choices)}")
    return tuple(c for c in spec.choices if c in picked)


def _floats(spec: Spec, raw: Any) -> tuple[float, ...]:
    if isinstance(raw, str):
        items = raw.split(",") if raw else []
    else:
        items = list(raw)
    if len(items) < spec.min_items:
        raise InputError(f"{spec.key}: give at least {spec.min_items} value(s)")
    if len(items) > spec.max_items:
        raise InputError(f"{spec.key}: at most {spec.max_items} values, got {len(items)}")
    inner = Spec(spec.key, "float", 1.0, spec.lo, spec.hi)
    return tuple(float(_number(inner, item.strip() if isinstance(item, str) else item, False)) for item in items)


_PARSERS = {
    "int": lambda spec, raw: _number(spec, raw, True),
    "float": lambda spec, raw: float(_number(spec, raw, False)),
    "choice": _choice,
    "bool": _bool,
    "floats": _floats,
    "choices": _choices,
}


def table(*specs: Spec) -> dict[str, Spec]:
    """A name -> spec mapping, refusing duplicate keys."""
    out: dict[str, Spec] = {}
    for s in specs:
        if s.key in out:
            raise ValueError(f"duplicate parameter key {s.key}")
        out[s.key] = s
    return out


def parse_strict(specs: Mapping[str, Spec], raw: Mapping[str, Any]) -> dict[str, Any]:
    """Parse every given key; unknown keys or bad values raise InputError (CLI use)."""
    unknown = sorted(set(raw) - set(specs))
    if unknown:
        raise InputError(f"unknown parameter(s): {', '.join(unknown)}")
    values = {k: s.default for k, s in specs.items()}
    for k, v in raw.items():
        values[k] = specs[k].parse(v)
    return values


def parse_lenient(specs: Mapping[str, Spec], raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Parse what can be parsed; every bad value falls back to its default with a notice (URL use).

    Repeated URL keys arrive as lists: the last one wins, as in a browser's URLSearchParams.get.
    """
    values = {k: s.default for k, s in specs.items()}
    notices: list[str] = []
    for k, v in raw.items():
        if k not in specs:
            continue
        if isinstance(v, list | tuple) and specs[k].kind not in ("floats", "choices"):
            v = v[-1] if v else ""
        try:
            values[k] = specs[k].parse(v)
        except InputError as exc:
            notices.append(f"{exc} - using the default ({specs[k].default!r}).")
    return values, notices


def check_dataclass(obj: Any, specs: Mapping[str, Spec]) -> None:
    """Validate each dataclass field that has a spec; used in __post_init__ of parameter sets."""
    for f in fields(obj):
        if f.name in specs:
            specs[f.name].check(getattr(obj, f.name))


def all_tables() -> dict[str, dict[str, Spec]]:
    """Every spec table in core.params.* as {"pipeline.PIPELINE": {...}}: for the docs and the fuzz tests.

    A table imported into another params module is listed once, under the module that defines it.
    """
    import importlib
    import pkgutil

    import core.params

    found: dict[int, str] = {}
    tables: dict[int, dict[str, Spec]] = {}
    for info in sorted(pkgutil.iter_modules(core.params.__path__, "core.params."), key=lambda i: i.name):
        module = importlib.import_module(info.name)
        short = info.name.removeprefix("core.params.")
        for name, obj in vars(module).items():
            if isinstance(obj, dict) and obj and all(isinstance(v, Spec) for v in obj.values()):
                if id(obj) not in found or name.lower() == short:
                    found[id(obj)] = f"{short}.{name}"
                    tables[id(obj)] = obj
    return {found[k]: tables[k] for k in sorted(found, key=lambda k: found[k])}
