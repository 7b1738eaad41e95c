"""The work one plan may do: candidates are counted before they are enumerated (core.planner.count), and a search
above the budget (core.params.planner.BUDGET, measured by bench/bench_budget.py) is narrowed the way an engineer
would narrow it, one step at a time until it fits, each step said in words:

1. offload only on the layouts whose model states do not fit without it (ZeRO-3, nothing offloaded): elsewhere
   offloading only adds host traffic;
2. coarser micro-batch sizes: the smallest, the largest and the powers of two between;
3. fewer expert-parallel degrees, then fewer context-parallel degrees: every other value of each, the smallest
   and the largest kept;
4. the smallest and the largest micro-batch size, then the smallest only, then ep and cp thinned once more.

A search still above the budget is refused with a message that says what to pin (the dimensions with the most
values first), so no request can enumerate millions of layouts on a shared server.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from core.errors import InputError
from core.params.planner import PlannerParams
from core.planner import grid, rank_memory
from core.planner.count import count


@dataclass(frozen=True)
class Context:
    """What the narrowing needs besides the question: the model, the server size, the bytes a GPU can hold."""

    model: object
    gpus_per_node: int
    usable: float  # bytes per GPU after the reserve and the headroom asked for
    bpp: object  # core.memory.states.BytesPerParam
    fp8: bool


@dataclass(frozen=True, eq=False)
class Search:
    """What a plan enumerates: the question (micro-batch sizes maybe coarser), the layout rows, where offload is
    searched (None: everywhere), how many candidates that is, how many the question asked for, and what was
    narrowed (in words, empty when nothing was)."""

    q: PlannerParams
    degrees: np.ndarray
    offload_where: np.ndarray | None
    count: int
    asked: int
    narrowed: tuple[str, ...] = ()

    def keeps(self, note: str) -> bool:
        """False for the search's own note on the cp or ep values when the narrowing thinned them (the notice says
        which are searched)."""
        said = {"cp": "Context parallelism: cp = ", "ep": "Expert parallelism: ep = "}
        return not any(note.startswith(said[k]) and any(n.startswith(f"{k} = ") for n in self.narrowed) for k in said)

    def notice(self, budget: int) -> str:
        """One paragraph for the result's notes: the budget, what the question asked, what was narrowed."""
        if not self.narrowed:
            return ""
        return (f"Search narrowed to stay within the work budget of {budget:,} candidates per plan (this question "
                f"asks for {self.asked:,}; {self.count:,} searched): " + "; ".join(self.narrowed) + ". Pin t, p, "
                "cp, ep or the micro-batch size to search the rest (the command line's --budget lifts the limit).")


def bounded(q: PlannerParams, degrees: np.ndarray, ctx: Context, budget: int) -> Search:
    """The search of `q` over `degrees`, narrowed until it holds at most `budget` candidates (0: no budget);
    InputError naming what to pin when even the narrowest search is above it."""
    n = count(q, degrees, ctx.model, ctx.gpus_per_node)
    s = Search(q, degrees, None, n, n)
    if not budget or n <= budget:
        return s
    for step in (_offload_where_needed, _coarser_sizes, _fewer("ep"), _fewer("cp"), _end_sizes, _one_size,
                 _fewer("ep"), _fewer("cp")):
        out = step(s, ctx)
        if out is None:
            continue
        q2, degrees2, where, said = out
        n = count(q2, degrees2, ctx.model, ctx.gpus_per_node, where)
        if n >= s.count:  # this step removes nothing here
            continue
        s = Search(q2, degrees2, where, n, s.asked, (*s.narrowed, said))
        if n <= budget:
            return s
    raise InputError(refusal(s, budget))


def refusal(s: Search, budget: int) -> str:
    """Why a search is refused, and which pins would bring it within the budget (most values first)."""
    values = {name: np.unique(s.degrees[:, j]).size for j, name in enumerate(("t", "p", "d", "cp", "ep"))}
    pins = [f"{k} ({v} values)" for k, v in sorted(values.items(), key=lambda kv: -kv[1]) if v > 1 and k != "d"]
    said = f" even narrowed ({'; '.join(s.narrowed)})" if s.narrowed else ""
    return (f"this search has {s.count:,} candidates{said}, above the work budget of {budget:,} per plan: pin "
            f"{', '.join(pins) or 'a search dimension'} (page: 'Search space'; command line: --fix t=8,p=16), or set "
            "zero, schedule or recompute to one value")


def _offload_where_needed(s: Search, ctx: Context):
    if len(s.q.searched("offload")) < 2 or s.offload_where is not None:
        return None
    need = needs_offload(s.q, s.degrees, ctx)
    said = (f"offload searched only on the {int(need.sum()):,} of {len(need):,} layouts whose model states do not "
            "fit under ZeRO-3 without it")
    return s.q, s.degrees, need, said


def needs_offload(q: PlannerParams, degrees: np.ndarray, ctx: Context) -> np.ndarray:
    """Per layout row: its model states and ZeRO-3's gathered layers, nothing offloaded, exceed the usable memory
    (core.memory.per_gpu through core.planner.rank_memory, as the plan itself computes them)."""
    one = replace(q, zero="3", offload="none", schedule="1f1b", recompute="full", sp="on", reshard="on",
                  tp_comm_overlap="off", framework="any", mb_sizes=q.mb_sizes[:1])
    c, _ = grid.grid(one, degrees, ctx.model, ctx.gpus_per_node)
    keys = rank_memory.accounting_keys(q.framework, c, q.memory_framework)
    st = rank_memory.states(ctx.model, ctx.bpp, c, keys, rank_memory.Options(ctx.fp8, ends_in_split=q.ends_in_split))
    fixed = st["states_on_gpu_bytes"] + st["zero3_working_bytes"] + st["buffer_bytes"]
    need = np.ones(len(degrees), dtype=bool)  # a layout the memory query did not reach keeps its offload
    need[c.layout] = False
    np.logical_or.at(need, c.layout, fixed > ctx.usable)
    return need


def _coarser_sizes(s: Search, ctx: Context):
    sizes = s.q.micro_batch_sizes
    lo, hi = min(sizes), max(sizes)
    kept = tuple(b for b in sizes if b in (lo, hi) or (b & (b - 1)) == 0)
    if len(kept) == len(sizes):
        return None
    said = f"micro-batch sizes {_list(kept)} (of {_list(sizes)})"
    return replace(s.q, mb_sizes=kept), s.degrees, s.offload_where, said


def _end_sizes(s: Search, ctx: Context):
    sizes = s.q.micro_batch_sizes
    if len(sizes) < 3:
        return None
    kept = (sizes[0], sizes[-1])
    return replace(s.q, mb_sizes=kept), s.degrees, s.offload_where, f"micro-batch sizes {_list(kept)} only"


def _one_size(s: Search, ctx: Context):
    sizes = s.q.micro_batch_sizes
    if len(sizes) < 2:
        return None
    return replace(s.q, mb_sizes=sizes[:1]), s.degrees, s.offload_where, f"micro-batch size {sizes[0]} only"


def _fewer(name: str):
    """Every other value of cp or ep (the smallest and the largest kept), when more than three are searched."""
    col = {"cp": 3, "ep": 4}[name]

    def step(s: Search, ctx: Context):
        values = np.unique(s.degrees[:, col]).tolist()
        if len(values) <= 3:
            return None
        kept = sorted(set(values[::2]) | {values[-1]})
        rows = np.isin(s.degrees[:, col], kept)
        where = None if s.offload_where is None else s.offload_where[rows]
        return s.q, s.degrees[rows], where, f"{name} = {_list(kept)} (of {_list(values)})"
    return step


def _list(values) -> str:
    return ", ".join(f"{v:,}" for v in values)
