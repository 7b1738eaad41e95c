"""Planner: every t x p x d layout of a model on a cluster, ranked by estimated step time, with why each loser
loses, the recommendation in plain words, and configs to paste. Inputs -> core.views.planner (cached in
ui.planner.cache) -> figures.

The body reads top to bottom: headline (numbers first) -> inputs -> check a run you have (a pasted config) ->
summary and recommendation -> chart and table -> exports.
"""

import streamlit as st

from core.errors import InputError
from core.params.planner import (
    ANY_MODEL_KEYS,
    ASSUMPTIONS,
    GPU_KEYS,
    MODEL_KEYS,
    PLAN,
    SEARCH,
    TARGET,
    VIEW,
    PlannerParams,
)
from core.units import fmt_bytes
from core.views.fallback import settled
from ui.planner import cache as cp
from ui.planner import figures as fp
from ui.planner.check import check_section
from ui.planner.exports import exports_section
from ui.planner.recommendation import summary
from ui.shared.layout import first_paint, is_presentation, page_header
from ui.shared.links import copy_link_box
from ui.shared.page_state import enter_page
from ui.shared.url_state import sync_url
from ui.shared.widgets import confirm, grid, peek, show_notices, spec_input

SPECS = {**PLAN, **VIEW}

page_header("planner")
enter_page("planner", SPECS)
show_notices(sync_url(SPECS))  # every key checked before any widget exists, shown ones or not


def headline(v: dict):
    """The best layout's numbers, drawn before any widget: (question, view or None)."""
    def planned(values: dict):
        q = PlannerParams(**values)
        return q, cp.plan_view(q)

    try:  # an input core refuses in combination (a precision the GPU lacks, ...) is named and left at its default
        (q, view), _, reset = settled(planned, {k: x for k, x in v.items() if k in PLAN}, PLAN)
    except InputError as exc:
        st.error(f"These inputs cannot be planned: {exc}", icon=":material/error:")
        return None, None
    show_notices(reset, title="Some inputs cannot be combined, so their defaults are used:")
    rec, best = view.recommendation, view.best
    cols = st.columns(4)  # the headline stays in place when nothing fits (a slider moved below what fits)
    if best is not None:
        extra = "".join(f" x {k}={best[k]}" for k in ("cp", "ep", "replicate") if best[k] > 1)
        cols[0].metric("Layout t x p x d", f"{best['t']} x {best['p']} x {best['d']}{extra}")
        cols[1].metric("Step time", f"{best['step_time_s']:,.2f} s")
        cols[2].metric("MFU", fp.mfu_text(best["mfu"]))
        cols[3].metric("Memory per GPU", fmt_bytes(best["memory_bytes"], digits=1),
                       help=f"of {fmt_bytes(view.usable_bytes, digits=1)} usable (GB = 1e9 bytes)")
        (st.success if rec.feasible else st.warning)(rec.headline)
    else:
        cols[0].metric("Layout t x p x d", "none fits")
        for col, label in zip(cols[1:], ("Step time", "MFU", "Memory per GPU"), strict=True):
            col.metric(label, "—")
        st.warning(rec.headline, icon=":material/block:")
    return q, view


def inputs(v: dict, view) -> None:
    """The question: model, GPU, cluster, batch, target; custom model and GPU; search pins; assumptions."""
    first_row = ("model", "gpu", "gpus", "batch", "seq", "mb_sizes")
    for col, key in zip(st.columns([3, 3, 2, 2, 2, 2]), first_row, strict=True):
        v[key] = spec_input(PLAN[key], container=col)
        if key == "seq" and v["seq"] == 0 and view is not None:
            col.caption(f"0: the model's own, **{view.seq:,}** tokens")
    for col, key in zip(st.columns([3, 3, 6]), TARGET, strict=False):
        v[key] = spec_input(TARGET[key], container=col)
    custom, custom_gpu = v["model"] == "custom", v["gpu"] == "custom"
    groups = [("Custom model (the parameter count is derived when left at 0)" if custom else
               "Model options (auto = the preset's own)", (*MODEL_KEYS, *ANY_MODEL_KEYS) if custom else ANY_MODEL_KEYS,
               custom, 4),
              ("Custom GPU and server (0 = the H100 SXM's numbers)" if custom_gpu else
               "GPU and server: override any of the preset's numbers (0 = the preset's)", GPU_KEYS, custom_gpu, 4),
              ("Search space: pin any dimension to evaluate your own layout", tuple(SEARCH), False, 3),
              ("Training and step-time assumptions (each with its justification in the help)",
               ("precision", "optimizer", "k", *ASSUMPTIONS), False, 3)]
    for title, keys, expanded, width in groups:
        with st.expander(title, expanded=expanded):
            grid(v, PLAN, keys, width)


def chart_and_table(q: PlannerParams, view) -> dict:
    """Step time (or MFU) against memory, the step-time breakdown, the ranked table; returns the view inputs."""
    metric = spec_input(VIEW["y"], widget="radio", horizontal=True)
    st.plotly_chart(cp.tradeoff_figure(q, metric, is_presentation()), key="planner_chart")
    st.plotly_chart(cp.breakdown_figure(q, is_presentation()), key="planner_breakdown")
    cols = st.columns([2, 2, 3])
    only = spec_input(VIEW["feasible_only"], container=cols[0])
    rows = spec_input(VIEW["rows"], container=cols[1])
    frame, config = fp.table(cp.table_rows(q, only, rows), view.gpu_mem_bytes)
    st.dataframe(frame, hide_index=True, column_config=config, key="planner_table")
    st.caption("Ranked: fastest feasible first, memory headroom breaks ties; infeasible candidates say why. "
               "Each row opens its schedule on the Pipeline page and its memory on the ZeRO page.")
    return {"y": metric, "feasible_only": only, "rows": rows}


@st.fragment
def body() -> None:
    """Inputs and everything drawn from them, as a fragment: a widget step reruns this, not app.py."""
    v: dict = peek(SPECS)  # numbers first (ui.shared.widgets.peek): the values the inputs below will return
    peeked = dict(v)
    q, view = headline(v)
    copy_link_box(v, SPECS, "planner")  # early: a link copied while the page reruns is already this view's
    first_paint()
    inputs(v, view)
    check_section()  # a config pasted or uploaded: its row, and links that open it here
    confirm(peeked, v)  # the numbers above came from peeked values: rerun once if a widget disagreed
    if view is None:
        st.stop()
    summary(view)
    shown = chart_and_table(q, view)
    shown["pick"] = exports_section(q, view)
    confirm({k: peeked[k] for k in VIEW}, shown, "view")


body()
