"""Pipeline page: who computes what when under a schedule, the bubble, and activation memory.

Inputs (sidebar, all in the URL) -> PipelineParams -> cached core.views.pipeline view (bounded) -> figures.
Compare mode (`compare` in the URL) stacks other schedules under this one on the same time axis.

The body reads top to bottom: the views of every drawn schedule -> headline (numbers first) -> sidebar inputs ->
timeline with its one time cursor -> the single schedule's bubble and memory, or the compared peaks -> frontier
-> text timeline and downloads -> upload.
"""

from dataclasses import replace

import streamlit as st

from core.errors import InputError
from core.params.pipeline import PIPELINE
from core.params.pipeline_view import COMPARE, VIEW
from core.views.pipeline import (
    BINS,
    PipelineParams,
    checked_params,
    cli_command,
    cursor_time,
    schedule_summary,
    takes_v,
)
from ui import cache_pipeline as cache
from ui import figures_pipeline as figs
from ui.inputs_pipeline import (
    apply_play_step,
    check_compare_url,
    compare_input,
    compare_notices,
    cursor_input,
    keep_playing,
    peek_compare,
    share_link,
)
from ui.layout import first_paint, is_presentation, page_header
from ui.page_state import enter_page
from ui.pipeline_memory import (
    STAGE_KEYS,
    derivation,
    equal_memory_notes,
    frontier_section,
    matched,
    stage_inputs,
    stage_section,
    view_toggles,
)
from ui.tables import markdown_table, percent
from ui.upload_pipeline import action_table_section
from ui.url_state import sync_url
from ui.widgets import confirm, peek, show_notices, spec_input, url_inputs

MAIN = ["schedule", "p", "m", "v", "tf", "tb", "tw", "tcomm", "iterations", "recompute"]
STEP = {"tf": 0.1, "tb": 0.1, "tw": 0.1, "tcomm": 0.1}


def pct(x: float) -> str:
    return f"{100 * x:.2f} %"


def num(x: float | None) -> str:
    return "—" if x is None else f"{x:.6g}"


page_header("pipeline")
enter_page("pipeline", {**PIPELINE, **VIEW, COMPARE.key: COMPARE})
present = is_presentation()
dark = getattr(st.context.theme, "type", None) == "dark"
veil = st.get_option(f"theme.{'dark' if dark else 'light'}.backgroundColor") or "#ffffff"

# The whole URL is checked before any widget exists (each check may rerun once, keeping its notices);
# what could not be used is said here, in plain text.
check_compare_url()
show_notices(sync_url({**PIPELINE, **VIEW}) + compare_notices())


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


def headline(main, params: PipelineParams) -> None:
    if main is None:
        return
    h = main.headline()
    cols = st.columns(5 if params.schedule == "pipedream" or params.iterations > 1 else 4)
    cols[0].metric("Makespan", num(h["makespan"]), help="Time from the first op to the last (time units).")
    cols[1].metric("Bubble: idle share", pct(h["idle share"]),
                   help="Idle time / (p x makespan): the idle share of the whole timeline, all devices.")
    cols[2].metric("Bubble: relative to ideal", pct(h["relative to ideal"]),
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
        chosen_names = [s for s in compare_input() if s != actual["schedule"]]
        actual |= view_toggles()
        actual["img"] = spec_input(VIEW["img"], widget="radio", horizontal=True)
    return actual, chosen_names


def timeline(drawn: list, params: PipelineParams, main, bins: int, img: str) -> tuple[float, float]:
    """The Gantt under one time cursor (slider, steps, Play) and what each device runs at that moment; returns
    (cursor in %, its time)."""
    st.subheader("Timeline")
    timelines = [v.timeline for v in drawn]
    cursor = cursor_input(timelines)
    t = cursor_time(timelines, cursor)
    title = [f"{v.params.schedule}: makespan {num(v.summary['makespan'])}, idle {pct(v.summary['bubble_fraction'])}"
             for v in drawn]
    fig = figs.gantt(list(zip(title, timelines, strict=True)), t if cursor < 100 else None, presentation=present,
                     veil=veil)
    config = figs.modebar_config(f"pipeline-{'-'.join(v.params.schedule for v in drawn)}-p{params.p}-m{params.m}",
                                 img)
    st.plotly_chart(fig, config=config, key="gantt")
    if any(tv.aggregated for tv in timelines):
        st.caption(f"Too many ops to draw one by one: each device lane holds one stripe per kind of op, and each "
                   f"pixel is a time bin ({bins if len(drawn) > 1 else BINS} per lane), darker the more of the bin "
                   "that kind takes. Hover for the shares.")
    if cursor < 100 and main is not None and main.timeline.bars is not None and params.p <= 16:
        held = main.timeline.held_at(t)
        running = main.timeline.running_at(t)
        st.caption(f"At t = {t:.4g}: " + " · ".join(
            f"device {d}: {running[d]}" + (f" (holds {held[d]:.3g})" if held is not None else "")
            for d in range(params.p)))
    return cursor, t


def single_schedule(main, params: PipelineParams, cursor: float, t: float, img: str) -> None:
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


def text_and_downloads(main, params: PipelineParams) -> None:
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


def drawings(views: dict, params: PipelineParams, equal: bool, rows: tuple, frontier: bool, img: str, bins: int):
    """Everything under the headline drawn from the views; returns (cursor %, drawn timelines)."""
    drawn, main = list(views.values()), views.get(params.schedule)
    if main is not None:
        s = main.summary
        if s["formula_expression"]:
            st.caption(f"Closed form: `{s['formula_expression']}` ({s['formula_convention']} convention). "
                       "Below: simulated next to it, in its convention.")
        else:
            st.caption(f"No closed form here: {main.formula_note}.")
    if len(drawn) > 1:
        shares = ("idle share", "relative to ideal", "efficiency", "closed form idle share",
                  "simulated, same convention")
        st.markdown(markdown_table([v.headline() for v in drawn], dict.fromkeys(shares, percent)))
        if equal and main is not None:
            equal_memory_notes(rows[0], rows[1], main.headline()["peak activation"])
    cursor, t = timeline(drawn, params, main, bins, img)
    if main is not None and len(drawn) == 1:
        single_schedule(main, params, cursor, t, img)
    elif len(drawn) > 1:
        st.subheader("Peak activation memory per device")
        st.plotly_chart(figs.peaks([(v.params.schedule, v.summary["peak_activation"]) for v in drawn],
                                   presentation=present),
                        config=figs.modebar_config(f"peaks-{'-'.join(views)}", img), key="peaks")
    if frontier:
        frontier_section(params, present, img)
    if main is not None:
        text_and_downloads(main, params)
    return cursor, [v.timeline for v in drawn]


@st.fragment
def body() -> None:
    """Inputs and everything drawn from them, as a fragment: a widget step reruns this, not app.py."""
    apply_play_step()  # Play's next cursor position, before anything reads the cursor
    # Numbers first (ui.widgets.peek): the headline is computed from the values the widgets will return
    # and drawn before the sidebar's widgets, so a shared link shows its numbers first.
    values = peek(PIPELINE, MAIN + STAGE_KEYS)
    view_values = peek(VIEW)
    others = [s for s in peek_compare() if s != values["schedule"]]
    equal = bool(others) and view_values["equal_mem"]
    checked, reset = checked_params(values)  # an input the stage split refuses is named and left at its default
    show_notices(reset, title="Some inputs cannot be combined, so their defaults are used:")
    params, views, refused, *rows, bins = schedule_views(checked, others, equal)
    headline(views.get(params.schedule), params)
    share_link({**values, **view_values}, others)  # early: a link copied while the page reruns is already this view's
    first_paint()
    actual, chosen_names = sidebar_inputs()
    for name in others:
        if name in refused:
            st.warning(f"{name} cannot run these inputs: {refused[name]}", icon=":material/info:")
    cursor, timelines = None, []
    if views:
        cursor, timelines = drawings(views, params, equal, tuple(rows), view_values["frontier"], actual["img"], bins)
        actual["cursor"] = cursor
    action_table_section(params, present, veil)
    # The numbers above were drawn from peeked values: if a widget disagreed, draw the page again (once).
    confirm({**values, **view_values, "compare": others}, {**actual, "compare": chosen_names})
    if cursor is not None:
        keep_playing(timelines, cursor)  # Play: wait one tick, then rerun with the cursor one step on


body()
