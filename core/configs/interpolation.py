"""OmegaConf's `${a.b}` interpolations in a YAML config (NeMo, the NeMo launcher, LLM Foundry, torchtune, NeMo
Automodel), resolved within the file and never run: `${a.b}` from the root, `${.x}` from the same section, and the
launcher's `${multiply:...}` / `${sum:...}`. A reference to a value that is itself a reference, or to nothing, is
left as written (the reader then says the field is not a number). Bounded: every node visited counts against
MAX_NODES (YAML aliases can make a small file a huge tree) and an interpolated string against MAX_TEXT.
"""

from __future__ import annotations

import re

from core.errors import InputError

MAX_NODES = 100_000  # keys and items in a resolved config (the launcher's largest has ~400)
MAX_TEXT = 100_000  # characters of one interpolated string (a path or a run name is under 1,000)
_REF = re.compile(r"\$\{([^${}]*)\}")


def resolve(data: object) -> object:
    """A copy of `data` with its interpolations resolved (a mapping's references from its root)."""
    return _resolve(data, data if isinstance(data, dict) else {}, budget=[MAX_NODES])


def _resolve(node: object, root: dict, here: dict | None = None, depth: int = 0, budget: list[int] | None = None
             ) -> object:
    """Interpolations resolved, counting every node visited: YAML aliases can make a small file a huge tree."""
    budget = budget if budget is not None else [MAX_NODES]
    budget[0] -= 1
    if depth > 50 or budget[0] < 0:
        raise InputError("config: nested too deeply or too large (YAML aliases?); not a training config")
    if isinstance(node, dict):
        return {k: _resolve(v, root, node, depth + 1, budget) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve(v, root, here, depth + 1, budget) for v in node]
    if isinstance(node, str):
        if re.fullmatch(r"-?\d+(\.\d*)?e-?\d+", node.strip()):
            return float(node)  # YAML 1.1 reads 1e-5 as a string
        return _interpolate(node, root, here or root)
    return node


def _interpolate(text: str, root: dict, here: dict) -> object:
    for _ in range(20):
        m = _REF.search(text)
        if not m:
            return text
        value = _lookup(m.group(1).strip(), root, here)
        if value is None:
            return text
        if m.span() == (0, len(text)):
            return value
        text = text[:m.start()] + str(value) + text[m.end():]
        if len(text) > MAX_TEXT:
            raise InputError(f"config: an interpolated value longer than {MAX_TEXT:,} characters; not a training "
                             "config")
    return text


def _lookup(ref: str, root: dict, here: dict) -> object:
    if ref.startswith(("multiply:", "sum:")):
        op, _, args = ref.partition(":")
        try:
            nums = [float(a) for a in args.split(",")]
        except ValueError:
            return None
        out = 1.0 if op == "multiply" else 0.0
        for x in nums:
            out = out * x if op == "multiply" else out + x
        return int(out) if out.is_integer() else out
    node: object = here if ref.startswith(".") else root
    for part in ref.lstrip(".").removeprefix("training.").split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, int | float | bool) or (isinstance(node, str) and "${" not in node) else None
