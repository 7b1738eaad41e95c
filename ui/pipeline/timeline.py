"""The words under the Pipeline page's Gantt: how a timeline too large to draw op by op is shown, and what each
device runs (and holds) at the time cursor's moment.

Drawing only: the bins and what runs when are the bounded views' (core.views.pipeline.TimelineView).
"""

from __future__ import annotations

import streamlit as st

from core.views.pipeline import BINS, PipelineView


def aggregated_note(drawn: list[PipelineView], bins: int) -> None:
    if any(v.timeline.aggregated for v in drawn):
        st.caption(f"Too many ops to draw one by one: each device lane holds one stripe per kind of op, and each "
                   f"pixel is a time bin ({bins if len(drawn) > 1 else BINS} per lane), darker the more of the bin "
                   "that kind takes. Hover for the shares.")


def moment_note(main: PipelineView | None, p: int, cursor: float, t: float) -> None:
    """At the cursor (not at the end), on a bar view of up to 16 devices: each device's op and what it holds."""
    if cursor < 100 and main is not None and main.timeline.bars is not None and p <= 16:
        held = main.timeline.held_at(t)
        running = main.timeline.running_at(t)
        st.caption(f"At t = {t:.4g}: " + " · ".join(
            f"device {d}: {running[d]}" + (f" (holds {held[d]:.3g})" if held is not None else "")
            for d in range(p)))
