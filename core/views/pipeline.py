"""What the Pipeline page shows, as plain data: the one place the page and its ui/ helpers reach core.pipeline.

The page's view model proper (PipelineView, made by `pipeline_view`) stays beside the simulator in
core.pipeline.view, the design card's "page view" of the pipeline domain; this module is the page's seam:
the view, its bounded timeline types, the schedule facts the inputs show (from the schedule registry), the
memory/bubble frontier and equal-memory matches, the derivations, and a timed action-table upload. ui/ imports
these names from here only, so the pipeline package can change its modules without touching a page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.errors import InputError
from core.params.pipeline import PIPELINE
from core.pipeline.compare import FRONTIER_OPS, Match, frontier, match_memory
from core.pipeline.derivations import CONVENTION_WORDS, explain
from core.pipeline.result import PipelineParams
from core.pipeline.schedules import REGISTRY
from core.pipeline.timeline_view import (
    BINS,
    FB,
    KIND_LABELS,
    KIND_TITLES,
    MAX_BARS,
    NUM_KINDS,
    Bars,
    Heat,
    TimelineView,
    cursor_time,
    step_cursor,
    timeline_view,
)
from core.pipeline.trace_import import simulate_actions
from core.pipeline.view import PipelineView, actions_csv, cli_command, nearest_runnable, pipeline_view, trace_json
from core.views.fallback import settled

__all__ = ["BINS", "CONVENTION_WORDS", "FB", "FRONTIER_OPS", "KIND_LABELS", "KIND_TITLES", "MAX_BARS",
           "NUM_KINDS", "Bars", "Heat", "Imported", "Match", "PipelineParams", "PipelineView", "TimelineView",
           "actions_csv", "checked_params", "cli_command", "cursor_time", "equal_memory", "explain", "frontier",
           "imported", "match_memory",
           "nearest_runnable", "pipeline_view", "schedule_summary", "step_cursor", "takes_v", "trace_json"]


def checked_params(values: dict) -> tuple[PipelineParams, list[str]]:
    """The page's inputs as PipelineParams whose stage split this schedule takes: an input the split refuses (a
    layers-per-stage list of the wrong length, first/last-stage layers without layers, ...) falls back to its
    default, with a notice naming it (core.views.fallback), and the rest is computed."""
    def make(v: dict) -> PipelineParams:
        params = PipelineParams(**v)
        params.stage_factors(), params.stage_memory()  # the split's refusals, before any simulation
        return params
    params, _, notices = settled(make, values, PIPELINE)
    return params, notices


def schedule_summary(name: str) -> str:
    """One line about a schedule, from its registry record (shown under the schedule picker)."""
    return REGISTRY[name].summary


def takes_v(name: str) -> bool:
    """Whether a schedule takes the chunks-per-device input v (its registry record says so)."""
    return REGISTRY[name].chunks == "v"


@dataclass(frozen=True)
class Imported:
    """An uploaded PyTorch action table, timed: its numbers and a bounded timeline to draw."""

    summary: dict
    timeline: TimelineView
    p: int
    m: int
    v: int


def imported(data: bytes, tf: float, tb: float, tw: float, tcomm: float) -> Imported:
    """core.pipeline.trace_import.simulate_actions with the page's costs, kept to what the page draws (`data`: the
    upload's bytes, checked against the upload limit and decoded by core)."""
    result = simulate_actions(data, tf, tb, tw, tcomm)
    s = result.schedule
    return Imported(result.summary(), timeline_view(result.timeline, MAX_BARS, BINS), s.p, s.m, s.v)


def equal_memory(params: PipelineParams, others: list[str], match: Callable[[PipelineParams, str], Match] = match_memory
                 ) -> tuple[dict[str, PipelineParams], list[dict], list[str]]:
    """Compare mode at equal memory: each other schedule at the m (and v) holding the main schedule's activation
    memory for the same global batch. (its parameters by name, the table's rows, why each refused one cannot).
    `match`: core.pipeline.compare.match_memory, or a cached wrapper of it."""
    chosen, rows, refused = {}, [], []
    try:
        match(params, params.schedule)  # the reference itself must run (its own refusal is shown elsewhere)
    except InputError:
        return chosen, rows, refused
    for name in others:
        try:
            mt = match(params, name)
        except InputError as exc:
            refused.append(f"{name}: {exc}")
            continue
        if mt.params is None:
            refused.append(f"{name}: {mt.note}")
            continue
        chosen[name] = mt.params
        rows.append({"schedule": name, "m": mt.params.m, "v": mt.params.v if takes_v(name) else None,
                     "micro-batch size (x this one's)": mt.scale, "activation memory": mt.memory})
    return chosen, rows, refused
