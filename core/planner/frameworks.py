"""What each training framework can run, as the planner asks it: the capability tables are each framework's own
(core.frameworks.<framework>.CAPABILITY, with where each rule is written); here they serve the search (a
`--framework` search holds only what that framework runs, and with `any` every row lists the frameworks that run it)
and the exporters (an export reproduces its row exactly, or refuses with the table's reasons).
"""

from __future__ import annotations

import numpy as np

from core.frameworks import CAPABILITIES
from core.frameworks.capability import Exclusion, Framework, Setting, join_names
from core.frameworks.deepspeed import CAPABILITY_VERSION as DEEPSPEED_VERSION
from core.frameworks.megatron import COMMIT as MEGATRON_COMMIT
from core.frameworks.megatron import RELEASE as MEGATRON_RELEASE
from core.frameworks.pytorch import TORCH_VERSION

__all__ = ["DEEPSPEED_VERSION", "MEGATRON_COMMIT", "MEGATRON_RELEASE", "TABLE", "TORCH_VERSION", "Exclusion",
           "Framework", "Setting", "framework", "moe_note", "which", "with_switch"]

TABLE: dict[str, Framework] = CAPABILITIES


def framework(key: str) -> Framework:
    return TABLE[key]


def with_switch(switch: str) -> frozenset[str]:
    """The frameworks (keys) that have a tuning switch (Framework.switches)."""
    return frozenset(k for k, f in TABLE.items() if switch in f.switches)


def moe_note(asked: tuple[str, ...]) -> str | None:
    """Who runs the MoE software a question assumes (Framework.moe_switches), or None when it asks for none."""
    if not asked:
        return None
    have = [f for f in TABLE.values() if set(asked) <= set(f.moe_switches)]
    return (f"{' and '.join(asked)} assumed: only {join_names([f.label for f in have]) or 'no framework'} runs "
            f"{'it' if len(asked) == 1 else 'them'} ({'; '.join(have[0].sources[k] for k in asked) if have else ''}); "
            "the other exports leave the all-to-all to their own dispatcher.")


def which(s: Setting) -> list[tuple[str, ...]]:
    """Per candidate of a setting of arrays, the frameworks (keys) that run it."""
    masks = {k: f.runs(s) for k, f in TABLE.items()}
    shape = np.broadcast(*masks.values()).shape if masks else (0,)
    code = np.zeros(shape, dtype=np.int64)  # bit k: framework k runs it
    for k, name in enumerate(TABLE):
        code |= np.broadcast_to(masks[name], shape).astype(np.int64) << k
    names = tuple(TABLE)
    sets = {c: tuple(n for k, n in enumerate(names) if c >> k & 1) for c in set(code.ravel().tolist())}
    return [sets[c] for c in code.ravel().tolist()]
