"""The Pipeline page's exports of the main schedule: the text timeline in the course's notation, the PyTorch action
CSV and the Chrome trace (made when clicked, by ui.pipeline.cache), and the same numbers' command line.
"""

from __future__ import annotations

import streamlit as st

from core.views.pipeline import PipelineParams, PipelineView, cli_command
from ui.pipeline import cache


def text_and_downloads(main: PipelineView, params: PipelineParams) -> None:
    text_box = st.expander("Text timeline (course notation)", key="text_timeline", bind="query-params",
                           on_change="rerun")
    if text_box.open and main.text:  # drawn when opened: st.code's script is 1.5 MB
        text_box.caption("digit = forward of micro-batch i (mod 10), lowercase = backward, capital = weight "
                         "gradient W, * = recompute, . = idle; one character per time unit.")
        text_box.code(main.text, language=None)
    elif text_box.open:
        text_box.text(main.text_note)
    st.subheader("Downloads")
    left, right = st.columns(2)
    stem = f"{params.schedule}-p{params.p}-m{params.m}"
    with left:
        if main.csv_note:
            st.caption(f"PyTorch action table: {main.csv_note}")
        else:
            st.download_button("PyTorch action CSV", data=lambda: cache.csv_file(params), file_name=f"{stem}.csv",
                               mime="text/csv", on_click="ignore", icon=":material/download:",
                               help="torch.distributed.pipelining actions, one row per rank (one iteration).")
    with right:
        if main.trace_note:
            st.caption(f"Chrome trace: {main.trace_note}")
        else:
            st.download_button("Chrome trace (JSON)", data=lambda: cache.trace_file(params),
                               file_name=f"{stem}.trace.json", mime="application/json", on_click="ignore",
                               icon=":material/download:", help="Open in chrome://tracing or ui.perfetto.dev.")
    st.caption(f"Same numbers on the command line: `{cli_command(params)}`")
