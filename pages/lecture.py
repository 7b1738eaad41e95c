"""Lecture: the module's practice exercises, checkpoint quiz and active-recall questions, with numbers set by
sliders and answers computed live by core (core.views.lecture), revealed on demand. Layout only: the words are in
ui/lecture/text.py, the figures in ui/lecture/figures.py, the cached calls in ui/lecture/cache.py.

The body is one function per part of the lecture: exercises, quiz, recall."""

import pandas as pd
import streamlit as st

from core.params.lecture import ANSWERS, LECTURE, LECTURE_VIEW, PARTS
from ui.lecture import cache as cl
from ui.lecture import figures as fl
from ui.lecture import text as lt
from ui.shared.layout import page_header
from ui.shared.links import copy_link_box
from ui.shared.page_state import enter_page
from ui.shared.url_state import sync_url
from ui.shared.widgets import show_notices, spec_input

SPECS = {**LECTURE, **ANSWERS, **LECTURE_VIEW}
STEPS = {"e1_idle": 0.5, "e2_psi": 0.5, "e2_mem": 1.0, "e3_gb": 0.1, "r1_mem": 1.0}  # slider steps of the float inputs
BOXES = {"q_psi", "q_nd", "r1_psi", "r1_n", "r1_hidden", "r1_seq"}  # ranges too wide for a slider: number boxes

page_header("lecture")
enter_page("lecture", SPECS)
show_notices(sync_url(SPECS))  # every key checked before any widget exists
st.caption("Each question takes its numbers from the sliders next to it; the answer is computed when you reveal "
           "it. Presentation mode (in the sidebar) enlarges text and figures for a projector. Memory is in GB = 1e9 "
           "bytes throughout.")
values: dict = {}


def inputs(*keys: str) -> list:
    """One URL-bound input per key, side by side; returns their values in order."""
    cols = st.columns(len(keys))
    for col, key in zip(cols, keys, strict=True):
        opts = {} if key in BOXES else {"widget": "slider", **({"step": STEPS[key]} if key in STEPS else {})}
        values[key] = spec_input(LECTURE[key], container=col, **opts)
    return [values[k] for k in keys]


def answer(key: str, shown: bool):
    """The reveal expander of one question (bound to the URL); the container when it is open and on screen."""
    box = st.expander("Reveal the answer", key=key, bind="query-params", icon=":material/lightbulb:")
    values[key] = bool(box.open)
    return box if box.open and shown else None


def question(title, text, *keys: str) -> None:
    """Title, the question's own inputs (if any), then its text; title and text are plain, or functions of the
    inputs' values (the title is drawn above the inputs, once their values are known)."""
    head = st.empty()
    got = inputs(*keys) if keys else []
    head.subheader(title(*got) if callable(title) else title)
    st.markdown(text(*got) if callable(text) else text)


def exercises(show: bool) -> None:
    question("1. How many micro-batches for a small bubble?", lt.q_e1, "e1_p", "e1_idle")
    p, idle = values["e1_p"], values["e1_idle"]
    if box := answer("e1_ans", show):
        a = cl.microbatches(p, idle)
        box.markdown(lt.a_e1(a))
        box.plotly_chart(fl.bubble_vs_m(a), key="fig_e1")

    question("2. Which ZeRO stage can ever fit?", lt.q_e2, "e2_psi", "e2_mem")
    psi, mem = values["e2_psi"], values["e2_mem"]
    if box := answer("e2_ans", show):
        a = cl.zero_fit(psi, mem)
        box.markdown(lt.a_e2(a))
        box.plotly_chart(fl.zero_fit_curve(a), key="fig_e2")

    question("3. What is 1F1B's memory saving worth?", lt.q_e3, "e3_p", "e3_m", "e3_gb")
    p, m, gb = values["e3_p"], values["e3_m"], values["e3_gb"]
    if box := answer("e3_ans", show):
        a = cl.price_1f1b(p, m, gb)
        box.markdown(lt.a_e3(a))
        box.plotly_chart(fl.held_over_time(a), key="fig_e3")

    question("4. Converting between bubble definitions", lt.q_e4, "e4_p", "e4_m")
    p, m = values["e4_p"], values["e4_m"]
    if box := answer("e4_ans", show):
        a = cl.conventions(p, m)
        box.markdown(lt.a_e4(a))
        box.plotly_chart(fl.conventions_bars(a), key="fig_e4")


def quiz(show: bool) -> None:
    st.markdown("Five questions to check the module. The pipeline questions use these numbers:")
    qp, qm = inputs("q_p", "q_m")
    question("Q1. The forward phase", lt.QUIZ[0])
    if box := answer("q1_ans", show):
        box.markdown(lt.a_q1(cl.forward_slots(qp, qm)))
    question("Q2. More micro-batches", lt.QUIZ[1])
    if box := answer("q2_ans", show):
        box.markdown(lt.a_q2(cl.quiz_microbatches(qp, qm)))
    question("Q3. 1F1B", lt.QUIZ[2])
    if box := answer("q3_ans", show):
        box.markdown(lt.a_q3(cl.quiz_1f1b(qp, qm)))
    st.markdown("The ZeRO questions use this model and data-parallel degree:")
    qpsi, qnd = inputs("q_psi", "q_nd")
    question("Q4. What each ZeRO stage shards", lt.QUIZ[3])
    if box := answer("q4_ans", show):
        contents = cl.zero_stages(qpsi, qnd)
        box.markdown(lt.A_Q4)
        box.dataframe(pd.DataFrame(lt.a_q4(contents)), hide_index=True)
    question("Q5. The price of stage 3", lt.QUIZ[4])
    if box := answer("q5_ans", show):
        box.markdown(lt.a_q5(cl.zero_stages(qpsi, qnd)))


def recall(show: bool) -> None:
    st.markdown("Try each one before you reveal the worked answer.")
    question("R1. Per-GPU memory under ZeRO", lt.q_r1, "r1_psi", "r1_n")
    psi, n = values["r1_psi"], values["r1_n"]
    st.caption(lt.R1_SHAPE)
    shape = inputs("r1_mem", "r1_hidden", "r1_layers", "r1_seq", "r1_mb")
    if box := answer("r1_ans", show):
        box.markdown(lt.a_r1(cl.zero_stages(psi, n, "r1_psi", "r1_n"), cl.states_with_activations(psi, n, *shape)))
    question(lt.t_r2, lt.q_r2, "r2_p0", "r2_p1", "r2_m")
    p0, p1, m = values["r2_p0"], values["r2_p1"], values["r2_m"]
    if box := answer("r2_ans", show):
        box.markdown(lt.a_r2(cl.deeper_pipeline(p0, p1, m)))
    question("R3. Stage 2 against stage 3", lt.Q_R3)
    if box := answer("r3_ans", show):
        box.markdown(lt.a_q5(cl.zero_stages(psi, n, "r1_psi", "r1_n")))
    question("R4. FSDP did not speed anything up", lt.q_r4(n))
    if box := answer("r4_ans", show):
        box.markdown(lt.a_r4(cl.zero_stages(psi, n, "r1_psi", "r1_n")))
    question("R5. Why flat parameters", lt.Q_R5)
    if box := answer("r5_ans", show):
        box.markdown(lt.A_R5)
    question(lt.t_r6, lt.q_r6, "r6_p", "r6_m0", "r6_m1")
    p, m0, m1 = values["r6_p"], values["r6_m0"], values["r6_m1"]
    if box := answer("r6_ans", show):
        box.markdown(lt.a_r6(cl.more_microbatches(p, m0, m1)))


@st.fragment
def body() -> None:
    """Inputs and everything drawn from them, as a fragment: a widget step reruns this, not app.py."""
    values.clear()
    tabs = st.tabs(list(PARTS), key="part", bind="query-params")
    for tab, part in zip(tabs, (exercises, quiz, recall), strict=True):
        with tab:
            part(tab.open)
    copy_link_box(values | {"part": st.session_state.get("part", PARTS[0])}, SPECS, "lecture")


body()
