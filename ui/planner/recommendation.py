"""The Planner page's summary in words: what was searched, the search's notes (the work budget's narrowing first),
the recommendation with every assumption behind it, and links that open the best layout on the other pages.

Drawing only: the words are core's (core.views.planner.PlanView and its Recommendation).
"""

from __future__ import annotations

import streamlit as st

from core.params.pipeline import PIPELINE
from ui.planner import cache as cp
from ui.shared.links import link_to_page


def summary(view) -> None:
    """What was searched, the search's notes, the recommendation in words and links to the other pages."""
    rec, best = view.recommendation, view.best
    st.caption(f"{view.title}. {view.candidates:,} candidates, {view.feasible:,} feasible; "
               f"{view.simulations} pipeline simulations run for this plan (the others came from the cache).")
    if view.narrowed:  # the work budget narrowed the search: said first, as a warning
        st.warning(view.narrowed, icon=":material/filter_alt:")
    for note in view.notes:
        if note != view.narrowed:
            st.info(note, icon=":material/info:")
    with st.container(border=True):
        for title, items in rec.sections():
            if title in ("Assumptions", "Search notes"):
                continue
            st.markdown(f"**{title}**")
            st.markdown("\n".join(f"- {x}" for x in items))
        with st.expander("Every assumption behind these numbers"):
            st.markdown("\n".join(f"- {x}" for x in rec.assumptions))
    if best is not None:
        cols = st.columns(2)
        with cols[0]:
            link_to_page("pipeline", cp.pipeline_params(best), PIPELINE, label="Its schedule on the Pipeline page")
        with cols[1]:
            link_to_page("zero", cp.zero_params(best, view.zero_link_base), cp.ZERO_PAGE_SPECS,
                         label="Its memory on the ZeRO page")
