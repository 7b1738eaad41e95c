"""Planner: every t x p x d layout of a model on a cluster, ranked by estimated step time, with why each loser
loses, the recommendation in plain words, and configs to paste. Inputs -> core (ui.cache_planner) -> figures."""

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
from ui import cache_planner as cp
from ui import figures_planner as fp
from ui.layout import first_paint, is_presentation, page_header
from ui.links import copy_link_box, link_to_page
from ui.url_state import sync_url
from ui.widgets import confirm, peek, show_notices, spec_input

SPECS = {**PLAN, **VIEW}
EXPORTS = (("deepspeed", "DeepSpeed JSON", "ds_config.json", "json"),
           ("megatron", "Megatron-LM command", "megatron_pretrain.sh", "bash"),
           ("fsdp", "PyTorch script (FSDP2, pipelining)", "train_torch.py", "python"))

page_header("planner")
show_notices(sync_url(SPECS))  # every key checked before any widget exists, shown ones or not


@st.fragment
def body() -> None:
    """Inputs and everything drawn from them, as a fragment: a widget step reruns this, not app.py."""
    # --- numbers first (ui.widgets.peek): the best layout, from the values the inputs below will return -------
    v: dict = peek(SPECS)
    peeked = dict(v)
    try:
        q = PlannerParams(**{k: x for k, x in v.items() if k in PLAN})
        view = cp.plan_view(q)
    except InputError as exc:
        view = None
        st.error(f"These inputs cannot be planned: {exc}", icon=":material/error:")
    else:
        rec = view.recommendation
        best = view.top_feasible.iloc[0] if view.feasible else None
        cols = st.columns(4)  # the headline stays in place when nothing fits (a slider moved below what fits)
        if best is not None:
            extra = "".join(f" x {k}={best[k]}" for k in ("cp", "ep") if best[k] > 1)
            cols[0].metric("Layout t x p x d", f"{best['t']} x {best['p']} x {best['d']}{extra}")
            cols[1].metric("Step time", f"{best['step_time_s']:,.2f} s")
            cols[2].metric("MFU", f"{best['mfu']:.1%}")
            cols[3].metric("Memory per GPU", fmt_bytes(best["memory_bytes"], digits=1),
                           help=f"of {fmt_bytes(view.usable_bytes, digits=1)} usable (GB = 1e9 bytes)")
            (st.success if rec.feasible else st.warning)(rec.headline)
        else:
            cols[0].metric("Layout t x p x d", "none fits")
            for col, label in zip(cols[1:], ("Step time", "MFU", "Memory per GPU"), strict=True):
                col.metric(label, "—")
            st.warning(rec.headline, icon=":material/block:")
    copy_link_box(v, SPECS, "planner")  # early: a link copied while the page reruns is already this view's
    first_paint()

    # --- inputs ----------------------------------------------------------------------------------------------
    first_row = ("model", "gpu", "gpus", "batch", "seq", "mb_sizes")
    for col, key in zip(st.columns([3, 3, 2, 2, 2, 2]), first_row, strict=True):
        v[key] = spec_input(PLAN[key], container=col)
    for col, key in zip(st.columns([3, 3, 6]), TARGET, strict=False):
        v[key] = spec_input(TARGET[key], container=col)
    custom = v["model"] == "custom"
    with st.expander("Custom model (the parameter count is derived when left at 0)" if custom else
                     "Model options (auto = the preset's own)", expanded=custom):
        cols = st.columns(5)
        for i, key in enumerate((*MODEL_KEYS, *ANY_MODEL_KEYS) if custom else ANY_MODEL_KEYS):
            v[key] = spec_input(PLAN[key], container=cols[i % 5])
    with st.expander("Custom GPU and server (0 = the H100 SXM's numbers)" if v["gpu"] == "custom" else
                     "GPU and server: override any of the preset's numbers (0 = the preset's)",
                     expanded=v["gpu"] == "custom"):
        cols = st.columns(5)
        for i, key in enumerate(GPU_KEYS):
            v[key] = spec_input(PLAN[key], container=cols[i % 5])
    with st.expander("Search space: pin any dimension to evaluate your own layout"):
        cols = st.columns(3)
        for i, key in enumerate(SEARCH):
            v[key] = spec_input(SEARCH[key], container=cols[i % 3])
    with st.expander("Training and step-time assumptions (each with its justification in the help)"):
        cols = st.columns(4)
        for i, key in enumerate(("precision", "optimizer", "k", *ASSUMPTIONS)):
            v[key] = spec_input(PLAN[key], container=cols[i % 4])

    confirm(peeked, v)  # the numbers above came from peeked values: rerun once if a widget disagreed
    if view is None:
        st.stop()

    # --- summary and recommendation --------------------------------------------------------------------------
    st.caption(f"{view.title}. {view.candidates:,} candidates, {view.feasible:,} feasible; "
               f"{view.simulations} pipeline simulations run for this plan (the others came from the cache).")
    for note in view.notes:
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
            link_to_page("pipeline", cp.pipeline_params(best), cp.PIPELINE, label="Its schedule on the Pipeline page")
        with cols[1]:
            link_to_page("zero", cp.zero_params(best, view.zero_link_base), cp.ZERO_PAGE_SPECS,
                         label="Its memory on the ZeRO page")

    # --- chart and table -------------------------------------------------------------------------------------
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

    # --- exports ---------------------------------------------------------------------------------------------
    st.subheader("Configs to paste")
    cols = st.columns([1, 1, 1])
    pick = spec_input(VIEW["pick"], container=cols[0])
    cols[1].download_button("All candidates (CSV)", data=lambda: cp.candidates_csv(q),
                            file_name="planner_candidates.csv", mime="text/csv", on_click="ignore",
                            icon=":material/download:")
    cols[2].download_button("Recommendation (text)", data=rec.text(), file_name="planner_recommendation.txt",
                            mime="text/plain", on_click="ignore", icon=":material/download:")
    exports = view.exports if pick == 1 else {}
    if view.feasible and pick > 1:
        try:
            exports = cp.export_of(q, pick)
        except InputError as exc:
            st.warning(str(exc))
    if not exports:
        st.info("No feasible candidate to export: see above for why, and what to try.")
    for tab, (kind, _, name, lang) in zip(st.tabs([e[1] for e in EXPORTS]), EXPORTS, strict=True):
        if kind in exports:
            art = exports[kind]
            if art.refused:
                tab.warning("Not exported: this layout is not one this framework runs exactly.\n\n"
                            + "\n".join(f"- {r}" for r in art.refused), icon=":material/block:")
                tab.markdown("\n".join(f"- {n}" for n in art.notes))
                continue
            tab.download_button(f"Download {name}", data=art.text, file_name=name, on_click="ignore",
                                icon=":material/download:", key=f"download_{kind}")
            tab.code(art.text, language=lang)
            if art.setup:
                tab.caption("What the JSON cannot carry (the degrees DeepSpeed takes from code):")
                tab.code(art.setup, language="python")
            tab.markdown("\n".join(f"- {n}" for n in art.notes))

    confirm({k: peeked[k] for k in VIEW}, {"y": metric, "feasible_only": only, "rows": rows, "pick": pick}, "view")


body()
