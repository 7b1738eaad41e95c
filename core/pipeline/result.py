"""One call from a parameter set to everything the Pipeline page, the CLI and the planner show.

`PipelineParams` is the validated, hashable input (ranges in core/params/pipeline.py); `simulate`
returns a `PipelineResult` and caches by parameter set. The schedule's structure (generation and
dependency analysis) is cached separately, so changing only costs re-runs just the timing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from core.errors import InputError
from core.params import check_dataclass
from core.params.pipeline import MAX_OPS, PIPELINE
from core.pipeline import formulas, stages
from core.pipeline.ops_cache import OpsBoundedCache
from core.pipeline.schedules import REGISTRY, build
from core.pipeline.schedules.ir import Schedule
from core.pipeline.schedules.pipedream import weight_versions
from core.pipeline.simulate import Compiled, Costs, compile_schedule, run_timeline
from core.pipeline.timeline import Timeline


@dataclass(frozen=True)
class PipelineParams:
    schedule: str = "1f1b"
    p: int = 4
    m: int = 8
    v: int = 2
    tf: float = 1.0
    tb: float = 2.0
    tw: float = 0.0
    tcomm: float = 0.0
    iterations: int = 1
    recompute: bool = False
    first_stage: float = 1.0
    last_stage: float = 1.0
    stage_costs: tuple[float, ...] = field(default=())
    layers: int = 0
    first_stage_layers: int = 0
    last_stage_layers: int = 0
    layers_per_stage: tuple[float, ...] = field(default=())
    embed_time: float = 0.0
    head_time: float = 0.0
    embed_memory: float = 0.0
    head_memory: float = 0.0

    def __post_init__(self) -> None:
        check_dataclass(self, PIPELINE)

    @property
    def chunks(self) -> int:
        """Chunks per device the schedule actually uses (v only matters for interleaved/looped-bfs)."""
        return REGISTRY[self.schedule].chunks_per_device(self.v)

    @property
    def num_stages(self) -> int:
        """Stages on a micro-batch's path (p x chunks; DualPipe's two directions share p)."""
        return REGISTRY[self.schedule].stages(self.p, self.v)

    def layer_split(self) -> tuple[int, ...] | None:
        """Layers of every stage on a micro-batch's path, or None when stages are equal (no layers given).
        Raises InputError for a split this schedule cannot take (checked when simulating, not on creation,
        so a page can build parameters for several schedules and report each refusal)."""
        n = self.num_stages
        if self.layers_per_stage:
            return stages.check_split(self.layers_per_stage, n)
        if self.layers:
            if self.layers < n:
                fewer = "p or v" if REGISTRY[self.schedule].chunks == "v" else "p"
                raise InputError(f"{self.layers} layers cannot fill {n} stages (p x chunks); raise layers or lower "
                                 f"{fewer}", keys=("layers", "first_stage_layers", "last_stage_layers"))
            return stages.split_layers(self.layers, n, self.first_stage_layers, self.last_stage_layers)
        if self.first_stage_layers or self.last_stage_layers or self.embed_time or self.head_time \
                or self.embed_memory or self.head_memory:
            raise InputError("first/last-stage layers and the embedding and output-layer costs are counted in "
                             "layers: set layers (or layers-per-stage) too",
                             keys=("first_stage_layers", "last_stage_layers", "embed_time", "head_time",
                                   "embed_memory", "head_memory"))
        return None

    def stage_factors(self) -> tuple[float, ...]:
        """Time factor of every stage: the explicit list, else the layer split with the embedding and the
        output layer (core.pipeline.stages), times the first/last-stage factors."""
        n = self.num_stages
        if self.stage_costs:
            given = list(self.stage_costs[:n])
            return tuple(given + [1.0] * (n - len(given)))
        split = self.layer_split()
        f = list(stages.time_factors(split, self.embed_time, self.head_time)) if split else [1.0] * n
        f[0] *= self.first_stage
        f[-1] *= self.last_stage
        return tuple(f)

    def stage_memory(self) -> tuple[float, ...]:
        """One micro-batch's activations per stage (micro-batches of L/p layers); () when stages are equal."""
        split = self.layer_split()
        return stages.memory_weights(split, self.p, self.embed_memory, self.head_memory) if split else ()

    def costs(self) -> Costs:
        return Costs(self.tf, self.tb, self.tw, self.tcomm, self.stage_factors(), self.stage_memory())

    @property
    def uneven(self) -> bool:
        return any(abs(x - 1.0) > 1e-12 for x in self.stage_factors())


# Both caches are bounded by operations held (about 170 bytes each), not by entry count: the
# largest allowed configuration alone is 2^20 ops: it fits alone, or thousands of small ones fit.
CACHE_BUDGET_OPS = MAX_OPS
_structures: OpsBoundedCache[tuple[Schedule, Compiled]] = OpsBoundedCache(CACHE_BUDGET_OPS, lambda sc: sc[0].num_ops)
_results: OpsBoundedCache[PipelineResult] = OpsBoundedCache(CACHE_BUDGET_OPS, lambda r: r.timeline.num_ops)


def _structure(schedule: str, p: int, m: int, v: int, iterations: int, recompute: bool) -> tuple[Schedule, Compiled]:
    def make() -> tuple[Schedule, Compiled]:
        s = build(schedule, p, m, v, iterations, recompute)
        return s, compile_schedule(s)

    return _structures.get_or_make((schedule, p, m, v, iterations, recompute), make)


@dataclass(frozen=True, eq=False)
class PipelineResult:
    params: PipelineParams
    schedule: Schedule
    timeline: Timeline

    @cached_property
    def formula(self) -> tuple[formulas.Formula | None, str]:
        """The closed form for this configuration, or None and why it does not apply."""
        prm = self.params
        why = formulas.applies(prm.p, prm.tcomm, prm.recompute, prm.uneven)
        if why:
            return None, why
        return formulas.bubble_formula(prm.schedule, prm.p, prm.m, prm.chunks, prm.tf, prm.tb, prm.tw, prm.iterations)

    @cached_property
    def weight_versions(self) -> np.ndarray:
        return weight_versions(self.schedule)

    def simulated_in(self, convention: str) -> tuple[float, float, float]:
        """Simulated (bubble time, idle share, relative to ideal) in a formula's convention.

        "makespan" counts idle time within the whole timeline, "span" within each device's own first
        and last op (Zero Bubble paper). Shares use the busiest device's work as the ideal time.
        """
        tl = self.timeline
        t = tl.span_bubble_time if convention == "span" else tl.bubble_time
        ideal = float(tl.busy.max())
        return t, t / (t + ideal), t / ideal

    def summary(self) -> dict[str, Any]:
        """Plain JSON-ready numbers (the CLI's --json and the page's metrics)."""
        tl = self.timeline
        f, why = self.formula
        same = self.simulated_in(f.convention if f else "makespan")
        return {
            "schedule": self.params.schedule,
            "params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self.params).items()},
            "num_ops": tl.num_ops,
            "makespan": tl.makespan,
            "bubble_fraction": tl.bubble_fraction,
            "bubble_vs_ideal": tl.bubble_vs_ideal,
            "pipeline_efficiency": 1.0 - tl.bubble_fraction,
            "bubble_time": tl.bubble_time,
            "span_bubble_time": tl.span_bubble_time,
            "formula_bubble_fraction": None if f is None else f.fraction,
            "formula_bubble_vs_ideal": None if f is None else f.relative,
            "formula_pipeline_efficiency": None if f is None else 1.0 - f.fraction,
            "formula_bubble_time": None if f is None else f.bubble_time,
            "formula_expression": None if f is None else f.expression,
            "formula_convention": None if f is None else f.convention,
            "formula_conditions": None if f is None else f.conditions,
            "formula_note": why,
            "simulated_bubble_time_same_convention": same[0],
            "simulated_bubble_fraction_same_convention": same[1],
            "peak_inflight": tl.peak_inflight.tolist(),
            "peak_activation": tl.peak_activation.tolist(),
            "stage_layers": None if (split := self.params.layer_split()) is None else list(split),
            "stage_time_factors": list(self.params.stage_factors()),
            "stage_memory": tl.stage_memory.tolist(),
            "peak_pending_w": tl.peak_pending_w.tolist(),
            "weight_versions": self.weight_versions.tolist(),
            "busy": tl.busy.tolist(),
            "idle": tl.idle.tolist(),
        }


def simulate(params: PipelineParams) -> PipelineResult:
    """Build, check and time the schedule `params` describes (cached per parameter set)."""

    def make() -> PipelineResult:
        s, compiled = _structure(params.schedule, params.p, params.m, params.v, params.iterations, params.recompute)
        return PipelineResult(params, s, run_timeline(s, params.costs(), compiled))

    return _results.get_or_make(params, make)


def peak_inflight(schedule: str, p: int, m: int, v: int = 2) -> float:
    """Most micro-batches (full-stage units) any device holds under `schedule`: the memory model's input."""
    return float(simulate(PipelineParams(schedule=schedule, p=p, m=m, v=v)).timeline.peak_inflight.max())
