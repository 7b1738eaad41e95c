"""The Lecture page through AppTest, and the answers core.views.lecture computes for it.

Expected numbers are the course material's (seed 000 practice and quiz, seed 002 active recall, and
REFERENCES.md): 7/70 = 10 % idle at p = 8, m = 63; ZeRO-3 fits 70B on 80 GB from N_d = 14, ZeRO-2 never;
GPipe holds 16 micro-batches against 1F1B's 4 at p = 4, m = 16; (p-1)/m = 0.1875 is a 15.79 % idle share.
"""

import base64
import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.errors import InputError
from core.memory import states as memory
from core.params.lecture import LECTURE
from core.views import lecture
from tests.conftest import ROOT, shared_link

PAGE = str(ROOT / "pages" / "lecture.py")
TIMEOUT = 30


def run(query=None):
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.query_params.update(query or {})
    at.run()
    assert not at.exception, at.exception
    return at


def text(at):
    return "\n".join(md.value for md in at.markdown)


def answers(at):
    """Markdown that only a revealed answer writes (questions and captions excluded)."""
    return [md.value for md in at.markdown if md.value.startswith("**") or md.value.startswith("The fill")
            or md.value.startswith("Plain data") or md.value.startswith("Each stage") or md.value.startswith("It ")
            or md.value.startswith("FSDP shards") or md.value.startswith("Collectives")]


def figure(at, key):
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.key == key)
    for trace in spec["data"]:
        for axis in ("x", "y"):
            value = trace.get(axis)
            if isinstance(value, dict) and "bdata" in value:
                trace[axis] = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).tolist()
    return spec


# --- core.views.lecture: the answers themselves -------------------------------------------------------------------

def test_exercise_answers_match_the_course_material():
    a = lecture.microbatches_for_idle(8, 10)
    assert (a.m, a.verified) == (63, True)
    assert a.simulated_at_m == pytest.approx(0.1) and a.simulated_before == pytest.approx(7 / 69)
    assert [lecture.microbatches_for_idle(p, 5).m for p in (4, 8, 16)] == [57, 133, 285]  # "at most" 5 %
    f = lecture.zero_fit(70, 80)
    assert f.smallest_nd == {0: None, 1: None, 2: None, 3: 14}
    assert f.floor[2] == pytest.approx(140e9) and f.states_at[3] == pytest.approx(80e9)
    assert f.states_before == pytest.approx(16 * 70e9 / 13)
    o = lecture.price_1f1b(4, 16, 1.0)
    assert (o.gpipe.held_gb, o.one_f_one_b.held_gb, o.saving_gb) == (16, 4, 12)
    assert o.gpipe.bubble == pytest.approx(3 / 19) and o.one_f_one_b.bubble == pytest.approx(3 / 19)
    assert o.one_f_one_b.curve_held.max() == 4 and o.gpipe.curve_held.max() == 16
    c = lecture.convert_conventions(4, 16)
    assert (c.relative, c.share) == (pytest.approx(0.1875), pytest.approx(3 / 19))
    assert c.simulated_share == pytest.approx(3 / 19)


def test_quiz_and_recall_answers():
    s = lecture.forward_slots(4, 8)
    assert (s.slots, s.first_exit, s.makespan_slots) == (11, 4, 11)  # m + p - 1 forward slots
    q = lecture.quiz_microbatches(4, 8)
    assert (q.bubble_before, q.bubble_after) == (pytest.approx(3 / 11), pytest.approx(3 / 19))
    z = lecture.zero_stages(7.5, 64)
    assert [r["total"] for r in z.rows] == pytest.approx([120e9, 31.40625e9, 16.640625e9, 1.875e9])
    assert [r["sharded"] for r in z.rows] == [[], ["optimizer"], ["grads", "optimizer"],
                                              ["params", "grads", "optimizer"]]
    assert [v["volume [x Psi]"] for v in z.volumes] == [2, 2, 2, 3] and z.stage3_over_dp == 1.5
    r1 = lecture.zero_stages(13, 16, "r1_psi", "r1_n")
    assert (r1.rows[1]["total"], r1.rows[3]["total"]) == (pytest.approx(61.75e9), pytest.approx(13e9))
    r2 = lecture.deeper_pipeline(4, 8, 8)
    assert (r2.bubble_before, r2.bubble_after) == (pytest.approx(3 / 11), pytest.approx(7 / 15))
    assert (r2.boundaries_before, r2.boundaries_after) == (3, 7)
    r6 = lecture.more_microbatches(4, 8, 64)
    assert r6.bubble_after == pytest.approx(3 / 67) and (r6.held_before, r6.held_after) == (8, 64)
    assert memory.max_reduction() == {0: 1.0, 1: 4.0, 2: 8.0, 3: float("inf")}


def test_answers_beyond_the_simulator_say_so_and_bad_inputs_are_refused():
    a = lecture.microbatches_for_idle(64, 0.5)  # m = 12,537 > 1,024 micro-batches
    assert a.m == 12537 and a.simulated_at_m is None and a.verified is None
    with pytest.raises(InputError, match="e1_p"):
        lecture.microbatches_for_idle(65, 10)
    with pytest.raises(InputError, match="e2_mem"):
        lecture.zero_fit(70, 1e9)
    assert LECTURE["q_m"].hi * 2 <= lecture.M_MAX  # the quiz simulates 2m


# --- the page ----------------------------------------------------------------------------------------------

def test_default_view_shows_questions_with_the_seed_numbers_and_no_answers():
    at = run()
    body = text(at)
    assert "**p = 8** stages" in body and "**10 % or less**" in body
    assert "**70 billion**" in body and "**80 GB**" in body
    assert "At **p = 4** and **m = 16**" in body and "**1 GB**" in body
    assert answers(at) == [] and not at.get("plotly_chart")  # nothing revealed, nothing computed
    assert at.slider(key="e1_p").value == 8 and at.slider(key="e1_idle").value == 10.0
    assert at.query_params == {}
    assert shared_link(at) == "/lecture"


def test_revealed_exercises_show_live_answers_and_figures():
    at = run({"e1_ans": "true", "e2_ans": "true", "e3_ans": "true", "e4_ans": "true"})
    body = text(at)
    assert "**m = 63.**" in body and "The simulator agrees: it measures 10.00% idle at m = 63" in body
    assert "**ZeRO-3 fits from N_d = 14**" in body and "**ZeRO-2 never fits.**" in body
    assert "140.00 GB" in body
    assert "**GPipe: 16 GB. 1F1B: 4 GB**" in body and "15.79% for GPipe and 15.79% for 1F1B" in body
    assert "**15.79% of the timeline.**" in body and "0.1875" in body
    assert {c.key for c in at.get("plotly_chart")} == {"fig_e1", "fig_e2", "fig_e3", "fig_e4"}
    curve = figure(at, "fig_e1")
    answer_line = next(t for t in curve["data"] if t.get("text") == ["", " m = 63"])
    assert answer_line["x"] == [63, 63]


def test_sliders_change_the_question_and_the_answer():
    at = run({"e1_ans": "true", "e2_ans": "true"})
    at.slider(key="e1_p").set_value(4).run()
    at.slider(key="e1_idle").set_value(5.0).run()
    body = text(at)
    assert "**p = 4** stages" in body and "**m = 57.**" in body  # 3/60 = 5 % exactly
    at.slider(key="e2_mem").set_value(160.0).run()
    body = text(at)
    assert "**ZeRO-3 fits from N_d = 7**" in body and "**ZeRO-2 fits from N_d = 49**" in body
    at.slider(key="e3_gb").set_value(2.5).run()
    assert "one stage take **2.5 GB**" in text(at)


def test_quiz_answers_cite_live_numbers():
    query = {"part": "Quiz", **{f"q{i}_ans": "true" for i in range(1, 6)}}
    at = run(query)
    body = text(at)
    assert "**m + p - 1 slots: 11 at p = 4, m = 8.**" in body
    assert "**27.27% idle with m = 8, 15.79% with m = 16**" in body
    assert "stage 0 holds **4** micro-batches under 1F1B against **8** under GPipe" in body
    assert "**2 Psi**" in body and "**3 Psi, 1.5 times**" in body
    assert "each rank sends 29.53 GB per step" in body and "44.30 GB under ZeRO-3" in body  # 2 and 3 x 63/64 Psi
    table = next(d.value for d in at.dataframe)
    assert table["total per GPU"].tolist() == ["120.00 GB", "31.41 GB", "16.64 GB", "1.88 GB"]
    at.slider(key="q_m").set_value(16).run()
    assert "**m + p - 1 slots: 19 at p = 4, m = 16.**" in text(at)


def test_recall_answers():
    at = run({"part": "Recall", **{f"r{i}_ans": "true" for i in range(1, 7)}})
    body = text(at)
    assert "**Stage 1: 61.75 GB. Stage 3: 13.00 GB.**" in body
    assert "**still too large once activations are added**" in body  # seed 002, computed with activations on
    assert "**46.67% idle, against 27.27% before**" in body and "7 stage boundaries instead of 3" in body
    assert "**208.00 GB** (DDP) to **13.00 GB**" in body
    assert "**The bubble falls from 27.27% to 4.48%**" in body and "**64** micro-batches instead of 8" in body


def test_closed_tab_computes_no_answer():
    at = run({"q1_ans": "true"})  # quiz answer open, but the Exercises tab is on screen
    assert "m + p - 1 slots" not in text(at)
    assert at.query_params == {"q1_ans": "true"}  # the reveal state is kept in the link


def test_url_seeds_the_sliders_and_bad_values_fall_back():
    at = run({"e1_p": "16", "e1_idle": "5", "e3_m": "32"})
    assert (at.slider(key="e1_p").value, at.slider(key="e1_idle").value, at.slider(key="e3_m").value) == (16, 5.0, 32)
    assert "**p = 16** stages" in text(at)
    at = run({"e1_p": "999", "part": "bogus", "e1_ans": "maybe", "q_psi": "<i>x</i>"})
    assert at.warning[0].value.startswith("Some values in this link could not be used")
    assert len(at.text) == 4 and all("using the default" in t.value for t in at.text)
    assert at.slider(key="e1_p").value == 8 and answers(at) == []
    assert at.query_params == {}
    assert "<i>" not in text(at)


def test_r4_asks_about_the_gpu_count_its_answer_uses():
    # issue 11: R4 asked about "an 8-GPU job" while its answer computed with R1's N = 16
    at = run({"part": "Recall", "r1_n": "32"})
    r4 = next(m.value for m in at.markdown if m.value.startswith("A team moved"))
    assert "a 32-GPU job" in r4 and "8-GPU" not in r4
