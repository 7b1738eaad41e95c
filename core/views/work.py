"""How much work a page's core call is, counted before doing it: the concurrency limit (ui/shared/work_limit.py)
lets light work run at once and queues the heavy kind, so one student's large question cannot slow forty others.

Each count is what drives the call's time and memory: operations in a simulated timeline (core.pipeline.schedules
.estimated_ops), the frontier's schedules summed, and for the planner the cross product of its searched dimensions
(core.planner.grid.dimensions: the bound the grid's own docstring gives). The thresholds are measured on the 2-core
development machine, alone (bench/classroom.py measures the server under a class):
- a timeline of 98,304 operations is viewed in 0.07 s and one of 1,048,576 in 0.7 s with ~300 MB held while it runs,
  so HEAVY_OPS = 262,144 (core.pipeline.compare.FRONTIER_OPS, a quarter of the simulator's limit);
- a plan of 126,720 grid combinations (Mixtral 8x22B on 512 GPUs, four micro-batch sizes) takes 2.4 s and ~140 MB,
  one of 6,000 (the default question) 0.2-1.5 s, so HEAVY_CANDIDATES = 100,000.
Also `release_memory`, which the limiter calls once heavy work is done (core.runtime.release_freed_memory).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.errors import InputError
from core.params.pipeline import MAX_OPS
from core.params.planner import PlannerParams
from core.pipeline.compare import FRONTIER_OPS
from core.pipeline.result import PipelineParams
from core.pipeline.schedules import REGISTRY, estimated_ops
from core.planner import candidates, grid
from core.runtime import release_freed_memory

HEAVY_OPS = FRONTIER_OPS  # operations in one simulated timeline
HEAVY_FRONTIER_OPS = MAX_OPS  # operations of every schedule on the frontier together
HEAVY_CANDIDATES = 100_000  # grid combinations of one plan


@dataclass(frozen=True)
class Work:
    """What a call will compute, in words (shown while it runs), its size, whether it is the heavy kind, the lane it
    queues in ("heavy"; "plans": every plan, a second or two and 100 MB or more each, one at a time beside the heavy
    lane, so ten students planning at once finish one after another instead of all at the end; "": at once), and
    whether the memory it frees goes back to the system as soon as it is done (`release`: plans, which glibc would
    otherwise keep per thread; small simulations keep theirs for speed)."""

    what: str
    units: int
    heavy: bool
    release: bool = False
    lane_of_light: str = ""

    @property
    def lane(self) -> str:
        return "heavy" if self.heavy else self.lane_of_light


LIGHT = Work("", 0, False)  # a call whose size cannot be counted up front is refused by core quickly: not heavy


def pipeline_work(params: PipelineParams) -> Work:
    """One schedule's simulated timeline (the Pipeline page's view of it)."""
    n = estimated_ops(params.schedule, params.p, params.m, params.v, params.iterations, params.recompute)
    return Work(f"Simulating {params.schedule} at p = {params.p}, m = {params.m}: {n:,} operations", n,
                n > HEAVY_OPS)


def frontier_work(params: PipelineParams) -> Work:
    """Every schedule at these p, m, v (those over FRONTIER_OPS are left out, as the frontier does)."""
    sizes = [estimated_ops(name, params.p, params.m, params.v) for name in REGISTRY]
    n = sum(x for x in sizes if x <= FRONTIER_OPS)
    return Work(f"Simulating every schedule at p = {params.p}, m = {params.m}: {n:,} operations", n,
                n > HEAVY_FRONTIER_OPS)


def match_work(params: PipelineParams, name: str) -> Work:
    """Compare at equal memory: the named schedule's simulations are the size of its timeline at these p, m, v."""
    n = estimated_ops(name, params.p, params.m, params.v)
    return Work(f"Matching {name}'s memory to {params.schedule}'s at p = {params.p}, m = {params.m}", n,
                n > HEAVY_OPS)


def planner_work(q: PlannerParams) -> Work:
    """A plan: the cross product of the searched dimensions, which bounds the candidates it evaluates."""
    try:
        model = candidates.resolve(q)[0]
        degrees = candidates.degrees(q, model)[0]
    except InputError:
        return LIGHT
    dims = grid.dimensions(q, degrees)
    n = math.prod(len(dims[k]) for k in grid.BASE)
    return Work(f"Planning {q.model} on {q.gpus:,} GPUs: up to {n:,} candidate layouts", n, n > HEAVY_CANDIDATES,
                release=True, lane_of_light="plans")


def zero_work(*_args, **_kwargs) -> Work:
    """The ZeRO page's report (every stage side by side): milliseconds to a second, run at once (no lane)."""
    return Work("Counting the memory of every ZeRO stage", 1, False)


def release_memory() -> bool:
    """Give the memory freed by finished work back to the system (core.runtime.release_freed_memory)."""
    return release_freed_memory()
