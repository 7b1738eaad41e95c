"""Page header, sidebar brand and presentation mode: the frame every page shares.

app.py calls sidebar_brand() and presentation_toggle() once (in the main script, so `present` stays in
the URL across page switches); a page calls page_header("pipeline") first. Figure builders may call
is_presentation() to pick larger fonts. The CSS is our own file (assets/presentation.css), never
built from user input.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import streamlit as st

from core.params import Spec, table
from ui.shared.links import PageEntry, find_page
from ui.shared.widgets import spec_input

APP_NAME = "Pipeline planner"
APP_TAGLINE = "How a large model is split across GPUs: pipeline schedules, ZeRO/FSDP memory, t x p x d layouts."
# The favicon is a file served by this server: a Material icon name would make every browser fetch its picture from
# fonts.gstatic.com (Streamlit 1.67's frontend), which a classroom without internet waits on (issue 23 item 4).
APP_ICON = str(Path(__file__).resolve().parents[2] / "assets" / "favicon.png")
PRESENTATION_CSS = Path(__file__).resolve().parents[2] / "assets" / "presentation.css"

# Inputs of the frame itself (not of any engine), in the same Spec form as core's tables.
LAYOUT = table(
    Spec("present", "bool", False, label="Presentation mode",
         help="Larger text and figures for a projector. Kept in the link, so a shared link opens in this mode."),
)


def sidebar_brand() -> None:
    """The project's name and one line about it, at the top of the sidebar."""
    st.sidebar.markdown(f"**{APP_NAME}**")
    st.sidebar.caption(APP_TAGLINE)


def presentation_toggle(container: Any = None) -> bool:
    """The `present` toggle (bound to the URL); when on, inject the presentation CSS. Returns the state."""
    on = spec_input(LAYOUT["present"], container=container if container is not None else st.sidebar)
    if on:
        st.html(PRESENTATION_CSS)
    return on


def is_presentation() -> bool:
    """Whether presentation mode is on (for figure builders that scale their fonts)."""
    return bool(st.session_state.get("present", False))


# How long a run waits after its headline numbers (see first_paint): a session's first run, and any later one.
# AppTest runs (tests, bench/bench_pages.py) set both to 0: no browser is painting.
FIRST_PAINT_S = 0.25
RERUN_PAINT_S = 0.04
_PAINTED = "_ui_first_paint_done"


def first_paint() -> None:
    """Once per session, right after the headline numbers: give the browser a moment to show them.

    Measured with bench/bench_browser.py: every widget, chart and table kind is a script the browser loads
    on first use, and React reveals a loaded element at most every 300 ms after the last placeholder it
    showed. When the page's widgets and its Plotly chart (a 4.7 MB script, over a second to evaluate on
    a small machine) arrive right behind the numbers, the numbers stay hidden until the chart's script
    has run. A quarter of a second first lets them be drawn.

    A slider step waits too, briefly: the new headline reaches the browser some 10 ms into the run and the
    new figures 40-90 ms later; arriving together, the browser re-renders the charts before it paints the
    number. With 40 ms between them the number shows first (bench/bench_browser.py, side by side with the
    previous version: Pipeline 0.25 -> 0.17 s, ZeRO 0.32 -> 0.22 s to the new number on a loaded machine);
    the charts follow as before, 40 ms later.
    """
    if st.session_state.get(_PAINTED):
        if RERUN_PAINT_S > 0:
            time.sleep(RERUN_PAINT_S)
        return
    st.session_state[_PAINTED] = True
    if FIRST_PAINT_S > 0:
        time.sleep(FIRST_PAINT_S)


def run_through_app() -> None:
    """Make sure the page runs inside app.py's navigation, even from a deep link on a fresh server.

    Streamlit keeps its older multipage mode (every file in pages/ is a page of its own) switched on
    while a pages/ folder exists and no session has called st.navigation yet. The first visitors of
    a shared link such as /zero?nd=1024 on a freshly started server would then get the page without
    app.py: no shared sidebar, no presentation mode, file names as navigation. A page that finds
    itself in that mode switches it off and reruns, so app.py runs and routes to the same URL.
    Relies on Streamlit 1.67's PagesManager (pinned in requirements.txt; tests/test_browser_deeplink.py
    fails if an upgrade changes this).
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def page_header(page: str | PageEntry) -> PageEntry:
    """Title and one-line description of a registered page."""
    run_through_app()
    entry = find_page(page)
    st.title(entry.title)
    st.caption(entry.description)
    return entry
