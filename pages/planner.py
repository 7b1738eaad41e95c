"""Planner: every t x p x d layout of a model on a cluster, ranked by estimated step time, with why each loser
loses, the recommendation in plain words, and configs to paste. Inputs -> core.views.planner (cached in
ui.cache_planner) -> figures.

The body reads top to bottom: headline (numbers first) -> inputs -> summary and recommendation -> chart and
table -> exports.
"""

import streamlit as st

from core.errors import InputError
from core.params.pipeline import PIPELINE
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
from ui import cache_planner as cp
from ui import figures_planner as fp
from ui.layout import first_paint, is_presentation, page_header
from ui.links import copy_link_box, link_to_page
from ui.page_state import enter_page
from ui.url_state import sync_url
from ui.widgets import confirm, grid, peek, show_notices, spec_input

SPECS = {**PLAN, **VIEW}
EXPORTS = (("deepspeed", "DeepSpeed JSON", "ds_config.json", "json"),
           ("megatron", "Megatron-LM command", "megatron_pretrain.sh", "bash"),
           ("fsdp", "PyTorch script (FSDP2, pipelining)", "train_torch.py", "python"))

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
        extra = "".join(f" x {k}={best[k]}" for k in ("cp", "ep") if best[k] > 1)
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


def picked_exports(q: PlannerParams, view, pick: int) -> dict:
    """The exports of the candidate ranked `pick`; a rank beyond the feasible ones says so and shows rank 1."""
    if not view.feasible:
        return {}
    if pick == 1:
        return view.exports
    try:
        return cp.export_of(q, pick)
    except InputError:
        st.warning(f"There is no feasible candidate of rank {pick:,}: {min(view.feasible, cp.TOP_ROWS):,} are "
                   "kept. Showing rank 1.", icon=":material/info:")
        return view.exports


def export_tab(tab, kind: str, name: str, lang: str, art) -> None:
    if art.refused:
        tab.warning("Not exported: this layout is not one this framework runs exactly.\n\n"
                    + "\n".join(f"- {r}" for r in art.refused), icon=":material/block:")
        tab.markdown("\n".join(f"- {n}" for n in art.notes))
        return
    tab.download_button(f"Download {name}", data=art.text, file_name=name, on_click="ignore",
                        icon=":material/download:", key=f"download_{kind}")
    tab.code(art.text, language=lang)
    if art.setup:
        tab.caption("What the JSON cannot carry (the degrees DeepSpeed takes from code):")
        tab.code(art.setup, language="python")
    tab.markdown("\n".join(f"- {n}" for n in art.notes))


def exports_section(q: PlannerParams, view) -> int:
    """Downloads and the three framework configs of the picked row, opened on a framework that runs it."""
    st.subheader("Configs to paste")
    cols = st.columns([1, 1, 1])
    pick = spec_input(VIEW["pick"], container=cols[0])
    every = view.csv_rows == view.candidates
    cols[1].download_button("All candidates (CSV)" if every else f"First {view.csv_rows:,} candidates (CSV)",
                            data=lambda: cp.candidates_csv(q),
                            help=None if every else f"Of {view.candidates:,}, ranked; `python -m core plan --csv "
                                                    "--top 0` writes every one.",
                            file_name="planner_candidates.csv", mime="text/csv", on_click="ignore",
                            icon=":material/download:")
    cols[2].download_button("Recommendation (text)", data=view.recommendation.text(),
                            file_name="planner_recommendation.txt", mime="text/plain", on_click="ignore",
                            icon=":material/download:")
    exports = picked_exports(q, view, pick)
    if not exports:
        st.info("No feasible candidate to export: see above for why, and what to try.")
    labels = [e[1] for e in EXPORTS]
    runs = [label for (kind, label, _, _) in EXPORTS if kind in exports and not exports[kind].refused]
    tabs = st.tabs(labels, default=runs[0] if runs else labels[0])
    for tab, (kind, _, name, lang) in zip(tabs, EXPORTS, strict=True):
        if kind in exports:
            export_tab(tab, kind, name, lang, exports[kind])
    return pick


@st.fragment
def body() -> None:
    """Inputs and everything drawn from them, as a fragment: a widget step reruns this, not app.py."""
    v: dict = peek(SPECS)  # numbers first (ui.widgets.peek): the values the inputs below will return
    peeked = dict(v)
    q, view = headline(v)
    copy_link_box(v, SPECS, "planner")  # early: a link copied while the page reruns is already this view's
    first_paint()
    inputs(v, view)
    confirm(peeked, v)  # the numbers above came from peeked values: rerun once if a widget disagreed
    if view is None:
        st.stop()
    summary(view)
    shown = chart_and_table(q, view)
    shown["pick"] = exports_section(q, view)
    confirm({k: peeked[k] for k in VIEW}, shown, "view")


body()
