"""Every bad input named, the rest computed: a page builds its question from the URL's values, and when core
refuses a combination (a layer split that does not match the stages, a precision the GPU lacks, ...) the inputs
the refusal names fall back to their defaults, one notice each, and the page computes with the rest instead of
showing an error and no numbers.

    result, used, notices = settled(make, values, specs)

An input is named by the refusal's InputError.keys, or by the message itself when it starts with the input's name
("precision: ...", "layers-per-stage lists ..."). A refusal that names no input (or only inputs already at their
defaults) is raised as it is: the page shows it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from core.errors import InputError
from core.params import Spec

T = TypeVar("T")
MAX_RESETS = 8  # each reset restores at least one input: a page has few that interact


def named(exc: InputError, specs: Mapping[str, Spec]) -> tuple[str, ...]:
    """The inputs a refusal names: its keys, or the input its message starts with."""
    keys = tuple(k for k in exc.keys if k in specs)
    if keys:
        return keys
    head = str(exc).split(":", 1)[0].split(" ", 1)[0].strip().replace("-", "_")
    return (head,) if head in specs else ()


def settled(make: Callable[[dict[str, Any]], T], values: Mapping[str, Any],
            specs: Mapping[str, Spec]) -> tuple[T, dict[str, Any], list[str]]:
    """make(values), each input a refusal names reset to its default until it succeeds: (result, the values used,
    one notice per reset)."""
    used, notices = dict(values), []
    for _ in range(MAX_RESETS):
        try:
            return make(used), used, notices
        except InputError as exc:
            keys = [k for k in named(exc, specs) if k in used and used[k] != specs[k].default]
            if not keys:
                raise
            for k in keys:
                used[k] = specs[k].default
            defaults = ", ".join(f"{k} = {_shown(specs[k].default)}" for k in keys)
            notices.append(f"{exc} - computed with the default {defaults}.")
    return make(used), used, notices


def _shown(value: Any) -> str:
    if value in ((), None, ""):
        return "(none)"
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
