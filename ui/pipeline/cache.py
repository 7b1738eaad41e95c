"""Cached core calls of the Pipeline page.

What is cached is the bounded PipelineView (a few hundred KB at most), never the timeline: the
largest timeline has a million ops, and st.cache_data would pickle and copy it on every hit.
core.pipeline.result keeps its own small cache of full results, which the on-demand exports reuse.
"""

from __future__ import annotations

from core.views.pipeline import (
    BINS,
    MAX_BARS,
    PipelineParams,
    PipelineView,
    actions_csv,
    nearest_runnable,
    pipeline_view,
    trace_json,
)
from core.views.work import pipeline_work
from ui.shared.cache import cached

MIN_COMPARE_BINS = 150  # per schedule in compare mode: the figure's total size stays bounded
MIN_COMPARE_BARS = 600


def budget(views: int) -> tuple[int, int]:
    """(max_bars, bins) per view when `views` timelines share one figure (payload stays ~1 MB)."""
    n = max(1, views)
    return max(MIN_COMPARE_BARS, MAX_BARS // n), max(MIN_COMPARE_BINS, BINS // n)


@cached(max_entries=48, max_size="64MB", work=lambda params, *_, **__: pipeline_work(params))
def view(params: PipelineParams, max_bars: int = MAX_BARS, bins: int = BINS) -> PipelineView:
    """Cached core.pipeline.view.pipeline_view (raises InputError: st.cache_data does not cache it)."""
    return pipeline_view(params, max_bars, bins)


@cached(max_entries=64)
def nearest(params: PipelineParams) -> PipelineParams | None:
    """Cached core.pipeline.view.nearest_runnable: the closest m the schedule accepts."""
    return nearest_runnable(params)


def csv_file(params: PipelineParams) -> str:
    """Made when the download button is clicked (not cached: core.pipeline.result caches the simulation)."""
    return actions_csv(params)


def trace_file(params: PipelineParams) -> str:
    return trace_json(params)
