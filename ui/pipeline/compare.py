"""The schedules the Pipeline page draws side by side: the view of each (the main one at the nearest m it accepts
when it refuses this one, the compared ones at equal memory when asked), their table and their peaks.

Drawing only: each view is ui.pipeline.cache's cached core call, the equal-memory match ui.pipeline.memory's.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from core.errors import InputError
from core.views.pipeline import PipelineParams, PipelineView
from ui.pipeline import cache
from ui.pipeline import figures as figs
from ui.pipeline.memory import equal_memory_notes, matched
from ui.shared.tables import markdown_table, percent

SHARES = ("idle share", "relative to ideal", "efficiency", "closed form idle share", "simulated, same convention")


def schedule_views(params: PipelineParams, others: list[str], equal: bool):
    """The bounded view of each schedule drawn, the ones that cannot run and why, and the main schedule's
    parameters (the nearest m it accepts when it refuses this one): (params, views, refused, matched rows,
    unmatched, bins)."""
    chosen, matched_rows, unmatched = matched(params, others) if equal else ({}, [], [])
    names = [params.schedule, *(o for o in others if not equal or o in chosen)]
    max_bars, bins = cache.budget(len(names))
    views, refused = {}, {}
    for name in names:
        try:
            views[name] = cache.view(chosen.get(name, replace(params, schedule=name)), max_bars, bins)
        except InputError as exc:
            refused[name] = str(exc)
    if params.schedule in refused:  # e.g. interleaved with m not a multiple of p: draw the nearest m that runs
        near = cache.nearest(params)
        try:
            views = {params.schedule: cache.view(near, max_bars, bins), **views} if near else views
        except InputError:
            near = None
        if near is None:
            st.error(f"{params.schedule}: {refused[params.schedule]}", icon=":material/block:")
        else:
            st.warning(f"{params.schedule}: {refused[params.schedule]}. Drawn below with m = {near.m}, the nearest m "
                       f"it accepts; the inputs and the link keep m = {params.m}.", icon=":material/info:")
            params = near
    return params, views, refused, matched_rows, unmatched, bins


def refused_notes(others: list[str], refused: dict[str, str]) -> None:
    for name in others:
        if name in refused:
            st.warning(f"{name} cannot run these inputs: {refused[name]}", icon=":material/info:")


def compare_table(drawn: list[PipelineView], main: PipelineView | None, equal: bool, rows: tuple) -> None:
    """Every drawn schedule's headline numbers in one table; at equal memory, the m (and v) each one got."""
    st.markdown(markdown_table([v.headline() for v in drawn], dict.fromkeys(SHARES, percent)))
    if equal and main is not None:
        equal_memory_notes(rows[0], rows[1], main.headline()["peak activation"])


def compare_peaks(views: dict[str, PipelineView], present: bool, img: str) -> None:
    st.subheader("Peak activation memory per device")
    st.plotly_chart(figs.peaks([(v.params.schedule, v.summary["peak_activation"]) for v in views.values()],
                               presentation=present),
                    config=figs.modebar_config(f"peaks-{'-'.join(views)}", img), key="peaks")
