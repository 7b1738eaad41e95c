"""What the tool knows about one schedule, in one record: everything else reads it from the registry.

A schedule's file defines its generator and, beside it, its `Entry`: the closed-form bubble and when it holds,
where the form comes from (derivation), the memory its source publishes, the names PyTorch, Megatron-LM and
DeepSpeed give it, and how the planner searches it. `core.pipeline.schedules` registers the entries; the
formulas, the derivations, the input choices, the planner and the exports iterate them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from core.pipeline.schedules.ir import Schedule, loop_stage_map, v_stage_map


@dataclass(frozen=True)
class Case:
    """One configuration a closed form is evaluated at: costs per device share of the model."""

    p: int
    m: int
    v: int
    tf: float
    tb: float
    tw: float
    iterations: int

    @property
    def full(self) -> float:
        """One micro-batch's forward and whole backward on one device share."""
        return self.tf + self.tb + self.tw


def _holds(case: Case) -> str:
    return ""


@dataclass(frozen=True)
class ClosedForm:
    """A schedule's bubble as its source writes it, and when it holds (besides the shared assumptions of
    core.pipeline.formulas.applies: equal stages, no latency, no recompute)."""

    bubble: Callable[[Case], float]  # idle time per device, in the schedule's time units
    expression: str  # the formula as written in its source
    convention: str  # "makespan": idle within the makespan; "span": within each device's own span
    source: str
    conditions: str  # when it holds, in words
    fails: Callable[[Case], str] = _holds  # the values that break `conditions` ("m = 3 < p = 4"); "" when they hold


@dataclass(frozen=True)
class Engines:
    """What the frameworks call this order ("" where they have no such schedule). Which framework runs what is
    core.planner.frameworks' table; these are only the names."""

    torch: str = ""  # torch.distributed.pipelining class that runs it action for action ("": our action table)
    megatron: str = ""  # megatron.core.pipeline_parallel.schedules function
    deepspeed: str = ""  # deepspeed.runtime.pipe.schedule class


@dataclass(frozen=True)
class Search:
    """How the planner searches a schedule; a schedule without one is never planned."""

    rank: int  # place in the planner's list of schedules (its menu and its search order)
    by_default: bool = False  # searched when the schedule is left at "all"
    one_stage: bool = False  # at p = 1 it is plain gradient accumulation: a p = 1 layout may be listed as it


def _one(p):
    return 1


@dataclass(frozen=True)
class Entry:
    """One schedule. `chunks` per device: "1", "v" (any v >= 2 is the input's) or "2" (a V or two directions)."""

    name: str
    label: str  # as the README and the pages write it
    make: Callable[..., Schedule]  # make(p, m, v) -> Schedule; make(p, m, v, iterations) when `streams`
    summary: str  # one line for menus and help
    chunks: str
    split_backward: bool = False  # uses I/W (so t_w matters separately)
    min_m: Callable = _one  # least m for p devices (works on numbers and numpy arrays)
    bidirectional: bool = False  # two copies of the model, one per direction: its two chunks share stage numbers
    streams: bool = False  # iterations run as one stream without a flush: the generator takes `iterations`
    v_shape: bool = False  # device d holds stages d and 2p-1-d
    closed_form: ClosedForm | None = None
    no_form: str = ""  # why there is no closed form, when its source says more than that
    estimate: Callable[[int, int], float] | None = None  # its source's estimate of the idle share (no closed form)
    derivation: str = ""  # where the closed form (or the estimate, and the memory) comes from, in words
    peak_activation: Callable[[int], float] | None = None  # per device as its source states it, in micro-batches
    #                                                        of one device's share of layers (1F1B's device 0: p)
    engines: Engines = Engines()
    search: Search | None = None

    def chunks_per_device(self, v: int) -> int:
        return {"1": 1, "v": v, "2": 2}[self.chunks]

    def stages(self, p: int, v: int) -> int:
        """Stages on a micro-batch's path (what per-stage costs and layer splits are given for)."""
        return p if self.bidirectional else p * self.chunks_per_device(v)

    def stage_map(self, p: int, v: int) -> np.ndarray:
        """(device, chunk) -> stage for a one-way schedule: the V, or Megatron's loop."""
        return v_stage_map(p) if self.v_shape else loop_stage_map(p, self.chunks_per_device(v))
