"""Pipeline page sections for memory: per-stage inputs and table, the memory/bubble frontier, compare at
equal memory, and where each closed form comes from. Kept out of pages/pipeline.py so the page stays thin.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from core.params.pipeline import PIPELINE
from core.params.pipeline_view import VIEW
from core.views.pipeline import (
    CONVENTION_WORDS,
    FRONTIER_OPS,
    Match,
    PipelineParams,
    PipelineView,
    equal_memory,
    explain,
    frontier,
    match_memory,
)
from core.views.work import frontier_work, match_work
from ui.pipeline import frontier_figure
from ui.pipeline.figures import modebar_config
from ui.shared.cache import cached
from ui.shared.widgets import spec_input, url_inputs

STAGE_KEYS = ["layers", "first_stage_layers", "last_stage_layers", "layers_per_stage", "embed_time", "head_time",
              "embed_memory", "head_memory", "first_stage", "last_stage", "stage_costs"]
_STEP = {"embed_time": 0.1, "head_time": 0.1, "embed_memory": 0.1, "head_memory": 0.1, "first_stage": 0.05,
         "last_stage": 0.05}


def stage_inputs() -> dict:
    """The per-stage inputs in one expander, open when the URL sets any of them."""
    with st.expander("Per-stage reality: layers, embedding, output layer",
                     expanded=any(k in st.query_params for k in STAGE_KEYS)):
        st.caption("Layers per stage as Megatron-LM splits them; the embedding (first stage) and the output "
                   "layer + loss (last stage) in layers' worth of time and of activations.")
        return url_inputs(PIPELINE, STAGE_KEYS, options={k: {"step": s} for k, s in _STEP.items()})


def view_toggles() -> dict:
    return {k: spec_input(VIEW[k]) for k in ("equal_mem", "frontier")}


@cached(max_entries=32, work=frontier_work)
def _frontier(params: PipelineParams) -> list[dict]:
    return frontier(params, max_ops=FRONTIER_OPS)


@cached(max_entries=128, work=match_work)
def _match(params: PipelineParams, name: str) -> Match:
    return match_memory(params, name)


def matched(params: PipelineParams, others: list[str]) -> tuple[dict[str, PipelineParams], list[dict], list[str]]:
    """core.views.pipeline.equal_memory with the cached matches: each compared schedule at the m (and v) holding
    the main schedule's activation memory."""
    return equal_memory(params, others, _match)


def equal_memory_notes(rows: list[dict], refused: list[str], target: float) -> None:
    st.caption(f"Equal memory: each schedule below gets the m (and v) at which it holds at most "
               f"{target:.4g} micro-batches' worth of L/p layers (this schedule's peak), for the same global "
               "batch, so its micro-batches are larger or smaller and its costs scale with them. Not modelled: "
               "a GPU's lower efficiency on smaller micro-batches.")
    if rows:
        st.dataframe(rows, hide_index=True)
    for line in refused:
        st.caption(line)


def frontier_section(params: PipelineParams, presentation: bool, img: str) -> None:
    st.subheader("Memory against bubble, every schedule")
    rows = _frontier(replace(params, iterations=1))
    st.plotly_chart(frontier_figure.frontier(rows, params.schedule, presentation=presentation),
                    config=modebar_config(f"frontier-p{params.p}-m{params.m}", img), key="frontier_chart")
    st.caption(f"Same p = {params.p}, m = {params.m}, v = {params.v} and costs for all. Stars: the frontier, where "
               "no other schedule holds less and idles less. Memory in micro-batches of one device's share of "
               "layers (1F1B's device 0 holds p); DualPipe devices also hold a second copy of the parameters.")
    for r in rows:
        if r["peak activation"] is None:
            st.caption(f"{r['schedule']}: {r['note']}")


def stage_section(view: PipelineView) -> None:
    if not view.stages:
        return
    st.markdown("**Per stage**")
    st.dataframe(list(view.stages), hide_index=True)
    st.caption("Time factor: x an equal stage (L/S layers). Activations: one micro-batch's, in micro-batches of "
               "L/p layers; the peak above weighs each stage by it.")
    if view.stage_hint:
        st.caption(f"Balance: {view.stage_hint}.")


def derivation(view: PipelineView) -> None:
    words = explain(view.params.schedule)
    if not words["derivation"]:
        return
    s = view.summary
    with st.expander("Where the closed form comes from"):
        st.markdown(words["derivation"])
        if s["formula_expression"]:
            st.markdown(f"`{s['formula_expression']}`: {CONVENTION_WORDS[s['formula_convention']]}; holds when "
                        f"{s['formula_conditions']}, with equal stages, no latency and no recompute.")
        elif words["conditions"]:
            st.markdown(f"Holds when {words['conditions']}, with equal stages, no latency and no recompute.")
