"""Words follow numbers (issue 23 item 3): every generated lecture sentence with a direction (falls / rises, fewer /
more, drop, saving, overstates) takes its verb from the numbers it prints, handles equal values and n = 1, and
prints a number with the same rounding as the figure beside it. Each sentence's sliders are swept both ways and to
their edges, through core.views.lecture (the numbers) and ui.lecture.text (the words), as the page calls them.
"""

from __future__ import annotations

import itertools
import re

import pytest

from core.params.lecture import LECTURE
from core.views import lecture
from ui.lecture import figures as fl
from ui.lecture import text as lt

NUM = r"\**([\d,]+(?:\.\d+)?)\**"


def number(text: str) -> float:
    return float(text.replace(",", ""))


def check_move(sentence: str, subject: str) -> None:
    """'<subject> falls from A% to B%' needs B < A, 'rises' B > A, 'stays at A%' one number; no 'from A to A'."""
    got = re.search(rf"{subject} (falls|rises) from {NUM} ?%? to {NUM} ?%?", sentence)
    if got:
        verb, a, b = got.group(1), number(got.group(2)), number(got.group(3))
        assert a != b and (b < a if verb == "falls" else b > a), sentence
    else:
        assert re.search(rf"{subject} stays at {NUM}", sentence), sentence


def no_echo(text: str) -> None:
    """No 'from X to X' anywhere: a change between two numbers that print the same is not a change."""
    for got in re.finditer(r"from \**([\d.,]+ ?(?:%|GB)?)\**[^.]{0,20}? to \**([\d.,]+ ?(?:%|GB)?)\**", text):
        assert got.group(1).strip() != got.group(2).strip(), text


M_EDGES = (1, 2, 8, 64, 200)


@pytest.mark.parametrize("m0,m1", [(a, b) for a, b in itertools.product(M_EDGES, M_EDGES)])
def test_r6_the_bubble_moves_the_way_m_does(m0, m1):
    p = 4
    a = lecture.more_microbatches(p, m0, m1)
    text, question, title = lt.a_r6(a), lt.q_r6(p, m0, m1), lt.t_r6(p, m0, m1)
    check_move(text, "The bubble")
    no_echo(text)
    if m1 > m0:
        assert "raises" in question and "fewer" not in title.lower() and "same" not in title.lower()
        assert f"now holds **{a.held_after:g}** micro-batches instead of {a.held_before:g}" in text
        assert a.held_after > a.held_before
    elif m1 < m0:
        assert "lowers" in question and title == "R6. Fewer micro-batches"
        assert "now holds only" in text and a.held_after < a.held_before
    else:
        assert "keeps its micro-batch count at" in question and title == "R6. The same micro-batches"
        assert "stays at" in text and "Nothing moves" in text


@pytest.mark.parametrize("p0,p1", list(itertools.product((2, 4, 8), (2, 4, 8))))
def test_r2_a_deeper_or_shallower_pipeline_says_which(p0, p1):
    a = lecture.deeper_pipeline(p0, p1, 8)
    text, question, title = lt.a_r2(a), lt.q_r2(p0, p1, 8), lt.t_r2(p0, p1, 8)
    check_move(text, "the bubble")
    no_echo(text)
    if p1 > p0:
        assert "stretched" in question and "deeper" in title and "fewer layers" in text
    elif p1 < p0:
        assert "cut down" in question and "shallower" in title and "more layers" in text
    else:
        assert "keeps" in question and "same" in title.lower() and "Nothing else changes" in text
        assert "fewer layers" not in text and "more layers" not in text


@pytest.mark.parametrize("p,m", [(4, 1), (4, 2), (4, 4), (4, 5), (4, 16), (2, 1), (32, 256)])
def test_e3_a_saving_only_where_there_is_one(p, m):
    a = lecture.price_1f1b(p, m, 1.0)
    text = lt.a_e3(a)
    got = re.search(r"a saving of ([\d.]+) GB", text)
    if a.gpipe.held_stage0 > a.one_f_one_b.held_stage0:
        assert got and number(got.group(1)) == pytest.approx(a.saving_gb) and a.saving_gb > 0
        assert "1F1B buys memory, not speed" in text
    else:
        assert not got and "the same on stage 0" in text and "buys nothing" in text


@pytest.mark.parametrize("n", [1, 2, 16, 1 << 20])
def test_n_gpus_read_right_at_one_and_many(n):
    stages = lecture.zero_stages(13.0, n, "r1_psi", "r1_n")
    with_acts = lecture.states_with_activations(13.0, n, 80.0, 5120, 40, 2048, 1)
    r1, q1, r4, q5 = lt.a_r1(stages, with_acts), lt.q_r1(13.0, n), lt.a_r4(stages), lt.a_q5(stages)
    one = n == 1
    assert ("N = 1 GPU**" in q1) == one and ("GPUs**" in q1) == (not one)
    assert ("no other rank to split with" in r1) == one
    assert ("on N = 1 GPU," in r4) == one and ("model states drop from" in r4) == (not one)
    assert (f"N_d = {n:,} rank " in q5) == one and (f"N_d = {n:,} ranks " in q5) == (not one)
    no_echo(r4)
    if not one:
        got = re.search(rf"model states drop from {NUM} GB\** \(DDP\) to {NUM} GB", r4)
        assert got and number(got.group(1)) > number(got.group(2))
    # R1's verdicts say what the numbers say
    assert ("still fits with its activations" in r1) == with_acts.fits[1]["none"]
    assert ("Stage 3 leaves room" in r1) == with_acts.fits[3]["none"]


@pytest.mark.parametrize("psi,layers", [(13.0, 40), (1500.0, 1024), (0.5, 1)])
def test_r1_verdicts_at_the_extremes(psi, layers):
    w = lecture.states_with_activations(psi, 16, 80.0, 5120, layers, 2048, 1)
    text = lt.a_r1(lecture.zero_stages(psi, 16, "r1_psi", "r1_n"), w)
    if not w.fits[3]["none"]:
        assert "Stage 3 leaves room" not in text
        assert ("Stage 3 fits only with" in text) == any(w.fits[3].values())
    if w.states[1] > w.usable:
        assert "too large already without them" in text


@pytest.mark.parametrize("p,m", [(2, 1), (4, 8), (64, 1), (2, 1024)])
def test_e4_overstatement_is_the_printed_gap(p, m):
    a = lecture.convert_conventions(p, m)
    text = lt.a_e4(a)
    got = re.search(r"overstates it by ([\d.]+)%", text)
    assert got and number(got.group(1)) == pytest.approx(100 * a.overstatement, abs=0.05) and a.overstatement > 0


@pytest.mark.parametrize("psi,mem", [(70.0, 80.0), (2000.0, 8.0), (0.5, 256.0), (7.5, 16.0)])
def test_e2_numbers_in_the_text_are_the_figures_numbers(psi, mem):
    a = lecture.zero_fit(psi, mem)
    text = lt.a_e2(a)
    legend = " ".join(t.name for t in fl.zero_fit_curve(a).data)
    for s in (1, 2):
        if a.floor[s] > 0:
            printed = f"{a.floor[s] / 1e9:,.2f} GB"
            assert printed in text and f"floor {printed}" in legend  # one rounding on both
    assert f"{a.usable / 1e9:,.2f} GB" in legend


def test_every_lecture_input_on_these_sentences_is_swept_to_its_edges():
    # the sweeps above reach each slider's ends (or the largest a test can simulate quickly)
    assert LECTURE["r6_m0"].lo == 1 and LECTURE["r2_p0"].lo == 2 and LECTURE["r1_n"].lo == 1
    assert LECTURE["e3_m"].lo == 1 and LECTURE["e4_p"].lo == 2 and LECTURE["r1_n"].hi == 1 << 20
