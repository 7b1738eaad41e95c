"""The Pipeline page's own inputs that ui.widgets has no kind for: the compared schedules and the cursor.

- compare_input(): a multiselect bound to the repeated URL key `compare` (?compare=zb-h1&compare=zbv).
  Streamlit silently drops unknown options from a bound multiselect; we check each item with the
  COMPARE spec first (as ui.url_state does for single values), so a bad item is left out with a
  plain-text notice and the URL is repaired once.
- cursor_input(): the time-cursor slider (`cursor`, % of the makespan) with step buttons that move it
  to the previous / next moment something starts or ends (core.pipeline.timeline_view.step_cursor).
- share_link(): the page's URL with every input, the repeated `compare` key included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st
from streamlit.errors import StreamlitAPIException

from core.errors import InputError
from core.params.pipeline import PIPELINE
from core.params.pipeline_view import COMPARE, VIEW
from core.pipeline.timeline_view import TimelineView, step_cursor
from ui.links import copy_link_box
from ui.widgets import help_of, label_of, show_notices, spec_input

_NOTICES = "_pipeline_compare_notices"
_LAST_FIX = "_pipeline_compare_last_fix"


def check_compare_url() -> None:
    """Validate the repeated `compare` URL values before the widget exists; may st.rerun() once.

    Notices are kept in session state until compare_notices() takes them, so a later repair rerun
    of other keys (ui.url_state.sync_url) does not lose them: call this first, then sync_url.
    """
    key = COMPARE.key
    if key in st.session_state or key not in st.query_params:
        return
    raw = st.query_params.get_all(key)
    good: list[str] = []
    notices: list[str] = []
    for item in raw:
        if not item.strip():
            continue  # "?compare=" means none, as in Streamlit
        try:
            value = COMPARE.parse(item)
        except InputError as exc:
            notices.append(f"{exc} - left out.")
            continue
        if value not in good:
            good.append(value)
    if len(good) > COMPARE.max_items:
        notices.append(f"compare: at most {COMPARE.max_items} schedules - kept the first {COMPARE.max_items}.")
        good = good[:COMPARE.max_items]
    if raw == good:
        st.session_state.pop(_LAST_FIX, None)
        return
    if st.session_state.get(_LAST_FIX) == raw:  # the same values came back after a repair: do not loop
        return
    st.session_state[_LAST_FIX] = raw
    st.session_state.setdefault(_NOTICES, []).extend(notices)
    try:
        if good:
            st.query_params[key] = good
        else:
            del st.query_params[key]
    except (StreamlitAPIException, KeyError):  # bound already: the widget owns the value
        pass
    st.rerun()


def compare_notices() -> list[str]:
    """The notices of the last `compare` repair (once)."""
    return st.session_state.pop(_NOTICES, [])


def peek_compare() -> list[str]:
    """The schedules compare_input will return in this run, before it exists (see ui.widgets.peek)."""
    key = COMPARE.key
    raw = st.session_state[key] if key in st.session_state else st.query_params.get_all(key)
    out: list[str] = []
    for item in raw or []:
        try:
            out.append(COMPARE.parse(item))
        except InputError:
            continue
    return out[:COMPARE.max_items]


def compare_input(container: Any = None) -> list[str]:
    """The schedules to draw under the main one (checked values, in the order chosen)."""
    box = container if container is not None else st
    check_compare_url()
    show_notices(compare_notices(), box)
    chosen = box.multiselect(label_of(COMPARE), options=list(COMPARE.choices), default=[], key=COMPARE.key,
                             bind="query-params", help=help_of(COMPARE), max_selections=COMPARE.max_items,
                             placeholder="none: one schedule")
    return [COMPARE.parse(c) for c in chosen]


def _step(views: Sequence[TimelineView], direction: int) -> None:
    key = VIEW["cursor"].key
    st.session_state[key] = step_cursor(views, float(st.session_state.get(key, VIEW["cursor"].default)), direction)


def cursor_input(views: Sequence[TimelineView]) -> float:
    """Slider and step buttons for the time cursor; returns the cursor in percent of the shared time axis."""
    spec = VIEW["cursor"]
    back, forward, slider = st.columns([1, 1, 10], vertical_alignment="bottom")
    back.button("◀", key="cursor_back", on_click=_step, args=(views, -1), width="stretch",
                help="Move the cursor back to the previous moment an op starts or ends.")
    forward.button("▶", key="cursor_next", on_click=_step, args=(views, 1), width="stretch",
                   help="Move the cursor to the next moment an op starts or ends.")
    with slider:
        return spec_input(spec, widget="slider", step=0.1, format="%.1f")


def share_link(values: dict[str, Any], compare: Sequence[str]) -> str:
    """Show the link that reopens this view (engine inputs, view inputs and compared schedules); return it."""
    specs = {**PIPELINE, **VIEW}
    return copy_link_box({k: values[k] for k in specs if k in values}, specs, "pipeline",  # keys in table order
                         repeated=[(COMPARE.key, c) for c in compare])
