"""The Pipeline page's own inputs that ui.shared.widgets has no kind for: the compared schedules and the cursor.

- compare_input(): a multiselect bound to the repeated URL key `compare` (?compare=zb-h1&compare=zbv).
  Streamlit silently drops unknown options from a bound multiselect; we check each item with the
  COMPARE spec first (as ui.shared.url_state does for single values), so a bad item is left out with a
  plain-text notice and the URL is repaired once.
- cursor_input(): the time cursor, one state for everything that moves it: the slider (`cursor`, % of the
  makespan), step buttons to the previous / next moment something starts or ends
  (core.views.pipeline.step_cursor), and Play / Pause, which step the same slider forward on the server
  (`keep_playing`, at the end of a run), so after a pause the slider, the Gantt's veil and the memory at that
  moment all show the same time.
- share_link(): the page's URL with every input, the repeated `compare` key included.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import streamlit as st
from streamlit.errors import StreamlitAPIException

from core.errors import InputError
from core.params.pipeline import PIPELINE
from core.params.pipeline_view import COMPARE, VIEW
from core.views.pipeline import TimelineView, step_cursor
from ui.shared.links import copy_link_box
from ui.shared.widgets import help_of, label_of, show_notices, spec_input

_NOTICES = "_pipeline_compare_notices"
_LAST_FIX = "_pipeline_compare_last_fix"


def check_compare_url() -> None:
    """Validate the repeated `compare` URL values before the widget exists; may st.rerun() once.

    Notices are kept in session state until compare_notices() takes them, so a later repair rerun
    of other keys (ui.shared.url_state.sync_url) does not lose them: call this first, then sync_url.
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
    """The schedules compare_input will return in this run, before it exists (see ui.shared.widgets.peek)."""
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


_PLAYING = "_pipeline_playing"
_NEXT = "_pipeline_cursor_next"  # the cursor Play moves to, applied before the slider exists in the next run
PLAY_TICK_S = 0.25  # seconds a Play step stays on screen (0 in AppTest runs)
PLAY_STEPS = 150  # at most this many steps from start to end: the smallest step is 1 / PLAY_STEPS of the axis


def _step(views: Sequence[TimelineView], direction: int) -> None:
    key = VIEW["cursor"].key
    st.session_state[key] = step_cursor(views, float(st.session_state.get(key, VIEW["cursor"].default)), direction)


def _toggle_play() -> None:
    key = VIEW["cursor"].key
    playing = not st.session_state.get(_PLAYING, False)
    st.session_state[_PLAYING] = playing
    if playing and float(st.session_state.get(key, VIEW["cursor"].default)) >= 100.0:
        st.session_state[key] = 0.0  # Play at the end starts again from the beginning


def apply_play_step() -> None:
    """Before anything reads the cursor in a run: the position the last Play step chose (see keep_playing); at the
    end of the axis Play stops here, so the button drawn in this run already says Play."""
    key = VIEW["cursor"].key
    if _NEXT in st.session_state:
        st.session_state[key] = st.session_state.pop(_NEXT)
    if is_playing() and float(st.session_state.get(key, VIEW["cursor"].default)) >= 100.0:
        st.session_state[_PLAYING] = False


def is_playing() -> bool:
    return bool(st.session_state.get(_PLAYING, False))


def cursor_input(views: Sequence[TimelineView]) -> float:
    """Step buttons, Play / Pause and the slider of the time cursor; returns the cursor in percent of the axis."""
    spec = VIEW["cursor"]
    back, forward, play, slider = st.columns([1, 1, 2, 10], vertical_alignment="bottom")
    back.button("◀", key="cursor_back", on_click=_step, args=(views, -1), width="stretch",
                help="Move the cursor back to the previous moment an op starts or ends.")
    forward.button("▶", key="cursor_next", on_click=_step, args=(views, 1), width="stretch",
                   help="Move the cursor to the next moment an op starts or ends.")
    play.button("❚❚ Pause" if is_playing() else "▶ Play", key="cursor_play", on_click=_toggle_play, width="stretch",
                help="Move the cursor through the schedule step by step (the slider, the Gantt and the memory "
                     "follow it); Pause leaves all three where they are.")
    with slider:
        return spec_input(spec, widget="slider", step=0.1, format="%.1f")


def keep_playing(views: Sequence[TimelineView], cursor: float) -> None:
    """At the end of a run while playing: wait one tick, then rerun with the cursor one step on (the next moment
    something starts or ends, at least 1 / PLAY_STEPS of the axis); stop at the end."""
    if not is_playing():
        return
    step = step_cursor(views, cursor, 1)
    st.session_state[_NEXT] = min(100.0, max(step, round(cursor + 100.0 / PLAY_STEPS, 4)))
    if PLAY_TICK_S > 0:
        time.sleep(PLAY_TICK_S)
    try:
        st.rerun(scope="fragment")  # the page's body only (ui.shared.widgets' fragment), not app.py
    except StreamlitAPIException:  # this run was a full one (the page just loaded): rerun it all
        st.rerun()


def share_link(values: dict[str, Any], compare: Sequence[str]) -> str:
    """Show the link that reopens this view (engine inputs, view inputs and compared schedules); return it."""
    specs = {**PIPELINE, **VIEW}
    return copy_link_box({k: values[k] for k in specs if k in values}, specs, "pipeline",  # keys in table order
                         repeated=[(COMPARE.key, c) for c in compare])
