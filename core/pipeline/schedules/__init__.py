"""The schedules, one record each (`record.Entry`), registered by name. A schedule's file holds its generator and,
beside it, its record: closed form and conditions, derivation, published memory, the frameworks' names for it,
how the planner searches it. Everything else iterates REGISTRY.

    build("1f1b", p=4, m=8)            -> Schedule with each device's ordered ops
    REGISTRY["zb-h1"].summary          -> one line for menus and help
    register(entry) / unregister(name) -> a new schedule is a choice of the CLI, the pages and the planner at once

Registering also fills the live schedule names of core.params.pipeline (which sits below this package and so
cannot import it): the inputs' choices are always the registry's.
"""

from __future__ import annotations

from core.errors import InputError
from core.params.pipeline import DEFAULT_SCHEDULES, MAX_OPS, SCHEDULE_NAMES, SEARCH_SCHEDULES
from core.pipeline.schedules.bidirectional import DUALPIPE
from core.pipeline.schedules.controllable import V_HALF, V_MIN
from core.pipeline.schedules.dualpipe import DUALPIPEV
from core.pipeline.schedules.flush import GPIPE, ONE_F_ONE_B
from core.pipeline.schedules.interleaved import INTERLEAVED, LOOPED_BFS
from core.pipeline.schedules.ir import Schedule, repeat_iterations, with_recompute
from core.pipeline.schedules.pipedream import PIPEDREAM
from core.pipeline.schedules.record import Entry
from core.pipeline.schedules.zero_bubble import ZB_H1, ZB_H2, ZBV

REGISTRY: dict[str, Entry] = {}
_names: dict[str, tuple[str, ...]] = {"all": (), "searched": (), "default": ()}


def register(entry: Entry) -> None:
    """Add a schedule: from now on it is a choice everywhere (and planned, if it has a `search`)."""
    if not isinstance(entry, Entry) or entry.name in REGISTRY:
        raise ValueError(f"cannot register {getattr(entry, 'name', entry)!r}: not an Entry, or the name is taken")
    REGISTRY[entry.name] = entry
    _refresh()


def unregister(name: str) -> None:
    del REGISTRY[name]
    _refresh()


def _refresh() -> None:
    searched = sorted((e for e in REGISTRY.values() if e.search), key=lambda e: e.search.rank)
    _names.update({"all": tuple(REGISTRY), "searched": tuple(e.name for e in searched),
                   "default": tuple(e.name for e in searched if e.search.by_default)})


for _entry in (GPIPE, ONE_F_ONE_B, INTERLEAVED, LOOPED_BFS, ZB_H1, ZB_H2, ZBV, V_HALF, V_MIN, DUALPIPEV, DUALPIPE,
               PIPEDREAM):
    register(_entry)
SCHEDULE_NAMES.provide(lambda: _names["all"])
SEARCH_SCHEDULES.provide(lambda: _names["searched"])
DEFAULT_SCHEDULES.provide(lambda: _names["default"])


def chunks_per_device(name: str, v: int) -> int:
    return REGISTRY[name].chunks_per_device(v)


def stages_of(name: str, p: int, v: int) -> int:
    """Stages on one micro-batch's path: p x chunks, except DualPipe's two directions share p stages."""
    return REGISTRY[name].stages(p, v)


def estimated_ops(name: str, p: int, m: int, v: int, iterations: int = 1, recompute: bool = False) -> int:
    """Operation count before building anything, to refuse oversized requests up front."""
    per_mb_stage = 3 if REGISTRY[name].split_backward else 2
    return stages_of(name, p, v) * m * iterations * (per_mb_stage + int(recompute))


def build(name: str, p: int, m: int, v: int = 2, iterations: int = 1, recompute: bool = False) -> Schedule:
    """The named schedule for p devices and m micro-batches (per iteration), checked and capped."""
    if name not in REGISTRY:
        raise InputError(f"unknown schedule {name[:40]!r}; choose one of {', '.join(REGISTRY)}")
    for label, value in (("p", p), ("m", m), ("v", v), ("iterations", iterations)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"{label} must be a whole number >= 1, got {value!r}")
    entry = REGISTRY[name]
    if m < entry.min_m(p):
        raise InputError(f"{name} needs m >= {entry.min_m(p)} for p = {p}; got m = {m}")
    n = estimated_ops(name, p, m, v, iterations, recompute)
    if n > MAX_OPS:
        takes_v = entry.chunks == "v"  # name v only to a schedule that takes it (PipeDream, 1F1B do not)
        shape = f"p={p}, m={m}" + (f", v={v}" if takes_v else "") + f", iterations={iterations}"
        raise InputError(f"{name} with {shape} is {n:,} operations; the limit is {MAX_OPS:,} (lower m"
                         + (", v" if takes_v else "") + " or iterations)")
    s = entry.make(p, m, v, iterations) if entry.streams else repeat_iterations(entry.make(p, m, v), iterations)
    return with_recompute(s) if recompute else s
