"""The main schedule's bubble and memory on the Pipeline page: its closed form, the bubble simulated next to it
and where the form comes from, the activations held over time, per stage and per device.

Drawing only: every number is the schedule's bounded view (core.views.pipeline.PipelineView).
"""

from __future__ import annotations

import streamlit as st

from core.views.pipeline import PipelineParams, PipelineView
from ui.pipeline import figures as figs
from ui.pipeline.memory import derivation, stage_section
from ui.shared.tables import markdown_table


def closed_form_caption(main: PipelineView) -> None:
    s = main.summary
    if s["formula_expression"]:
        st.caption(f"Closed form: `{s['formula_expression']}` ({s['formula_convention']} convention). "
                   "Below: simulated next to it, in its convention.")
    else:
        st.caption(f"No closed form here: {main.formula_note}.")


def single_schedule(main: PipelineView, params: PipelineParams, cursor: float, t: float, img: str, present: bool,
                    veil: str) -> None:
    """One schedule: the bubble simulated and closed form, its derivation, memory over time, per stage / device."""
    st.subheader("Bubble: simulated and closed form")
    st.markdown(markdown_table(main.bubble_rows))
    if not main.summary["formula_expression"]:
        st.caption(f"No closed-form column: {main.formula_note}.")
    derivation(main)
    st.subheader("Activation memory")
    st.plotly_chart(figs.memory(main.timeline, t if cursor < 100 else None, presentation=present, veil=veil),
                    config=figs.modebar_config(f"memory-{params.schedule}-p{params.p}-m{params.m}", img),
                    key="memory")
    st.caption("Activations a device holds, in micro-batches of its share of layers (L/p; a V schedule's chunk "
               "counts 1/2): from the start of a forward until its backward (or weight-gradient W) is done."
               + ("" if main.timeline.memory.exact else " Many events: each step is the maximum within a bin."))
    stage_section(main)
    devices = st.expander("Per device", key="per_device", bind="query-params", on_change="rerun")
    if devices.open:  # drawn when opened: a table script the first view does not need
        devices.dataframe(main.per_device(), hide_index=True)
