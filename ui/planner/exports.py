"""The Planner page's exports: the candidates' CSV, the recommendation as text, and the three framework configs
(DeepSpeed JSON, Megatron-LM command, PyTorch FSDP2 script) of the picked row, each in a tab, opened on a framework
that runs it.

Drawing only: the configs are core's (core.views.planner's exports, cached in ui.planner.cache).
"""

from __future__ import annotations

import streamlit as st

from core.errors import InputError
from core.params.planner import VIEW, PlannerParams
from ui.planner import cache as cp
from ui.shared.widgets import spec_input

EXPORTS = (("deepspeed", "DeepSpeed JSON", "ds_config.json", "json"),
           ("megatron", "Megatron-LM command", "megatron_pretrain.sh", "bash"),
           ("fsdp", "PyTorch script (FSDP2, pipelining)", "train_torch.py", "python"))


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
    """Downloads and the three framework configs of the picked row, opened on a framework that runs it; returns
    the picked rank (an input of the page's view, confirmed by the page)."""
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
