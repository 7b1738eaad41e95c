"""The course module's pipeline numbers (seed 000, steps 1-3), reproduced by the simulator."""

import pytest

from core.pipeline.formulas import gpipe_bubble_share, min_microbatches
from core.pipeline.render import text_timeline
from core.pipeline.result import PipelineParams, simulate

SEED_GPIPE_4_4 = """\
  stage 0: 0123.........aabbccdd
  stage 1: .0123......aabbccdd..
  stage 2: ..0123...aabbccdd....
  stage 3: ...0123aabbccdd......"""

SEED_GPIPE_4_8 = """\
  stage 0: 01234567.........aabbccddeeffgghh
  stage 1: .01234567......aabbccddeeffgghh..
  stage 2: ..01234567...aabbccddeeffgghh....
  stage 3: ...01234567aabbccddeeffgghh......"""

SEED_1F1B_4_8 = """\
  stage 0: 0123......aa4bb5cc6dd7ee.ff.gg.hh
  stage 1: .012....aa3bb4cc5dd6ee7ff.gg.hh..
  stage 2: ..01..aa2bb3cc4dd5ee6ff7gg.hh....
  stage 3: ...0aa1bb2cc3dd4ee5ff6gg7hh......"""


def run(schedule, p, m, tf=1.0, tb=2.0):
    return simulate(PipelineParams(schedule=schedule, p=p, m=m, tf=tf, tb=tb)).timeline


def test_84_combinations_match_the_closed_form_for_gpipe_and_1f1b():
    checked, worst = 0, 0.0
    for schedule in ("gpipe", "1f1b"):
        for p in (2, 4, 8, 16):
            for m in (1, 4, 8, 16, 32, 64, 128):
                for tf, tb in ((1, 2), (1, 1), (2, 3)):
                    sim = run(schedule, p, m, tf, tb).bubble_fraction
                    worst = max(worst, abs(sim - gpipe_bubble_share(p, m)))
                    checked += 1
    assert checked == 2 * 84
    assert worst < 1e-12


@pytest.mark.parametrize("schedule,p,m,expected,makespan,idle", [
    ("gpipe", 4, 4, SEED_GPIPE_4_4, 21, 0.4286),
    ("gpipe", 4, 8, SEED_GPIPE_4_8, 33, 0.2727),
    ("1f1b", 4, 8, SEED_1F1B_4_8, 33, 0.2727),
])
def test_text_timelines_match_the_seed_character_for_character(schedule, p, m, expected, makespan, idle):
    tl = run(schedule, p, m)
    assert text_timeline(tl) == expected
    assert tl.makespan == makespan
    assert round(tl.bubble_fraction, 4) == idle


def test_seed_step2_table_rows():
    # p, m, formula (p-1)/(m+p-1), (p-1)/m as printed in the seed
    rows = [(4, 1, 0.75, 3.0), (4, 4, 0.4286, 0.75), (4, 16, 0.1579, 0.1875), (4, 64, 0.0448, 0.0469),
            (8, 1, 0.875, 7.0), (8, 4, 0.6364, 1.75), (8, 16, 0.3043, 0.4375), (8, 64, 0.0986, 0.1094)]
    for p, m, share, relative in rows:
        tl = run("gpipe", p, m)
        assert round(tl.bubble_fraction, 4) == share
        assert round(tl.bubble_vs_ideal, 4) == relative


@pytest.mark.parametrize("p", [4, 8])
@pytest.mark.parametrize("m", [8, 16, 32, 64])
def test_1f1b_same_bubble_as_gpipe_but_holds_min_p_m(p, m):
    g, o = run("gpipe", p, m), run("1f1b", p, m)
    assert g.bubble_fraction == pytest.approx(o.bubble_fraction, abs=1e-15)
    assert g.peak_inflight.max() == m
    assert o.peak_inflight.max() == min(p, m)


def test_1f1b_holds_min_p_m_when_m_is_small():
    assert run("1f1b", 8, 3).peak_inflight.max() == 3


@pytest.mark.parametrize("p,expected", [(4, 58), (8, 134), (16, 286)])
def test_smallest_m_for_under_5_percent_idle(p, expected):
    assert min_microbatches(p, 0.05) == expected
    assert run("1f1b", p, expected).bubble_fraction < 0.05  # and the simulator agrees on both sides
    assert run("1f1b", p, expected - 1).bubble_fraction >= 0.05


def test_practice_exercise_at_most_10_percent_at_p8():
    m = min_microbatches(8, 0.10, strict=False)  # 7/70 is exactly 10 %
    assert m == 63
    assert run("gpipe", 8, m).bubble_fraction == pytest.approx(0.10, abs=1e-15)
    assert run("gpipe", 8, m - 1).bubble_fraction > 0.10
