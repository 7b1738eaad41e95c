"""Pipeline page: who computes what when under a schedule, the bubble, and activation memory.

Inputs (sidebar, all in the URL) -> PipelineParams -> cached core.views.pipeline view (bounded) -> figures.
Compare mode (`compare` in the URL) stacks other schedules under this one on the same time axis.

The body reads top to bottom: the views of every drawn schedule -> headline (numbers first) -> sidebar inputs ->
timeline with its one time cursor -> the single schedule's bubble and memory, or the compared peaks -> frontier
-> text timeline and downloads -> upload.
"""

import streamlit as st

from core.params.pipeline import PIPELINE
from core.params.pipeline_view import COMPARE, VIEW
from core.views.pipeline import PipelineParams, checked_params, cursor_time, schedule_summary, takes_v
from ui.pipeline import bubble, compare, inputs
from ui.pipeline import figures as figs
from ui.pipeline import timeline as notes
from ui.pipeline.exports import text_and_downloads
from ui.pipeline.memory import STAGE_KEYS, frontier_section, stage_inputs, view_toggles
from ui.pipeline.upload import action_table_section
from ui.shared.layout import first_paint, is_presentation, page_header
from ui.shared.page_state import enter_page
from ui.shared.tables import percent
from ui.shared.url_state import sync_url
from ui.shared.widgets import confirm, peek, show_notices, spec_input, url_inputs

MAIN = ["schedule", "p", "m", "v", "tf", "tb", "tw", "tcomm", "iterations", "recompute"]
STEP = {"tf": 0.1, "tb": 0.1, "tw": 0.1, "tcomm": 0.1}


def num(x: float | None) -> str:
    return "—" if x is None else f"{x:.6g}"


page_header("pipeline")
enter_page("pipeline", {**PIPELINE, **VIEW, COMPARE.key: COMPARE})
present = is_presentation()
dark = getattr(st.context.theme, "type", None) == "dark"
veil = st.get_option(f"theme.{'dark' if dark else 'light'}.backgroundColor") or "#ffffff"

# The whole URL is checked before any widget exists (each check may rerun once, keeping its notices);
# what could not be used is said here, in plain text.
inputs.check_compare_url()
show_notices(sync_url({**PIPELINE, **VIEW}) + inputs.compare_notices())


def headline(main, params: PipelineParams) -> None:
    if main is None:
        return
    h = main.headline()
    cols = st.columns(5 if params.schedule == "pipedream" or params.iterations > 1 else 4)
    cols[0].metric("Makespan", num(h["makespan"]), help="Time from the first op to the last (time units).")
    cols[1].metric("Bubble: idle share", percent(h["idle share"]),
                   help="Idle time / (p x makespan): the idle share of the whole timeline, all devices.")
    cols[2].metric("Bubble: relative to ideal", percent(h["relative to ideal"]),
                   help="Idle time / busy time (the (p-1)/m convention of the Megatron-LM paper).")
    cols[3].metric("Peak activation", num(h["peak activation"]),
                   help="Most activations one device holds at once, in micro-batches of one device's share of "
                        "layers (L/p): 1F1B's device 0 holds p, a V schedule's half-device chunk counts 1/2.")
    if len(cols) > 4:
        cols[4].metric("Weight versions", f"{h['weight versions']}",
                       help="Most weight versions one device stores at once (PipeDream stashes stale weights).")


def sidebar_inputs() -> tuple[dict, list[str]]:
    """Schedule and costs, per-stage reality, compare; returns (values, compared schedules)."""
    with st.sidebar:
        st.header("Schedule and costs")
        actual = url_inputs(PIPELINE, ["schedule"])
        st.caption(schedule_summary(actual["schedule"]))
        options = {k: {"step": s} for k, s in STEP.items()} | {"v": {"disabled": not takes_v(actual["schedule"])}}
        actual |= url_inputs(PIPELINE, MAIN[1:], options=options)
        actual |= stage_inputs()
        st.header("Compare")
        chosen_names = [s for s in inputs.compare_input() if s != actual["schedule"]]
        actual |= view_toggles()
        actual["img"] = spec_input(VIEW["img"], widget="radio", horizontal=True)
    return actual, chosen_names


def timeline(drawn: list, params: PipelineParams, main, bins: int, img: str) -> tuple[float, float]:
    """The Gantt under one time cursor (slider, steps, Play) and what each device runs at that moment; returns
    (cursor in %, its time)."""
    st.subheader("Timeline")
    timelines = [v.timeline for v in drawn]
    cursor = inputs.cursor_input(timelines)
    t = cursor_time(timelines, cursor)
    title = [f"{v.params.schedule}: makespan {num(v.summary['makespan'])}, idle {percent(v.summary['bubble_fraction'])}"
             for v in drawn]
    fig = figs.gantt(list(zip(title, timelines, strict=True)), t if cursor < 100 else None, presentation=present,
                     veil=veil)
    config = figs.modebar_config(f"pipeline-{'-'.join(v.params.schedule for v in drawn)}-p{params.p}-m{params.m}",
                                 img)
    st.plotly_chart(fig, config=config, key="gantt")
    notes.aggregated_note(drawn, bins)
    notes.moment_note(main, params.p, cursor, t)
    return cursor, t


def drawings(views: dict, params: PipelineParams, equal: bool, rows: tuple, frontier: bool, img: str, bins: int):
    """Everything under the headline drawn from the views; returns (cursor %, drawn timelines)."""
    drawn, main = list(views.values()), views.get(params.schedule)
    if main is not None:
        bubble.closed_form_caption(main)
    if len(drawn) > 1:
        compare.compare_table(drawn, main, equal, rows)
    cursor, t = timeline(drawn, params, main, bins, img)
    if main is not None and len(drawn) == 1:
        bubble.single_schedule(main, params, cursor, t, img, present, veil)
    elif len(drawn) > 1:
        compare.compare_peaks(views, present, img)
    if frontier:
        frontier_section(params, present, img)
    if main is not None:
        text_and_downloads(main, params)
    return cursor, [v.timeline for v in drawn]


@st.fragment
def body() -> None:
    """Inputs and everything drawn from them, as a fragment: a widget step reruns this, not app.py."""
    inputs.apply_play_step()  # Play's next cursor position, before anything reads the cursor
    # Numbers first (ui.shared.widgets.peek): the headline is computed from the values the widgets will return
    # and drawn before the sidebar's widgets, so a shared link shows its numbers first.
    values = peek(PIPELINE, MAIN + STAGE_KEYS)
    view_values = peek(VIEW)
    others = [s for s in inputs.peek_compare() if s != values["schedule"]]
    equal = bool(others) and view_values["equal_mem"]
    checked, reset = checked_params(values)  # an input the stage split refuses is named and left at its default
    show_notices(reset, title="Some inputs cannot be combined, so their defaults are used:")
    params, views, refused, *rows, bins = compare.schedule_views(checked, others, equal)
    headline(views.get(params.schedule), params)
    inputs.share_link({**values, **view_values}, others)  # early: a link copied during a rerun is this view's
    first_paint()
    actual, chosen_names = sidebar_inputs()
    compare.refused_notes(others, refused)
    cursor, timelines = None, []
    if views:
        cursor, timelines = drawings(views, params, equal, tuple(rows), view_values["frontier"], actual["img"], bins)
        actual["cursor"] = cursor
    action_table_section(params, present, veil)
    # The numbers above were drawn from peeked values: if a widget disagreed, draw the page again (once).
    confirm({**values, **view_values, "compare": others}, {**actual, "compare": chosen_names})
    if cursor is not None:
        inputs.keep_playing(timelines, cursor)  # Play: wait one tick, then rerun with the cursor one step on


body()
