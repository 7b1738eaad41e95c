"""V-Half, V-Min and DualPipe against their published memory and bubble figures; one activation unit for all.

Sources:
- Qi et al. 2024, "Pipeline Parallelism with Controllable Memory" (arXiv 2405.15362). Peak activation in
  micro-batches, from the authors' table (HF space sail/pipeline-parallelism-with-controllable-memory):
  1F1B p, V-Min (p+4)//3, V-Half (p+2)//2, V-ZB p; bubble rate (sail-sg/zero-bubble-pipeline-parallelism
  README): 1F1B B = (p-1)/(m+p-1), V-Half B/2, V-Min 2B/3 plus an O(n) overhead, when T_F = T_B = T_W.
- Their reference implementation (zbv_greedy.py, commit 064369d of that repository), run with unit costs:
  "bubble rate" 1 - m(F+B+W)/longest stage span = 0.0813 (V-Half) and 0.1233 (V-Min) at p = 8, m = 32;
  0.0965 and 0.1332 at p = 16, m = 64; 0.2000 and 0.3890 at p = 8, m = 32 with F, B, W = 1, 2, 1.
- deepseek-ai/DualPipe README: DualPipe and DualPipeV bubble (PP/2-1)(F&B+B-3W), activation PP+1 per
  device (1F1B: PP), parameters 2x; DualPipe on PP devices, DualPipeV on PP/2.
"""

import csv
import io

import numpy as np
import pytest

from core.errors import InputError
from core.pipeline.formulas import controllable_estimate, gpipe_bubble_share, published_peak_activation
from core.pipeline.result import PipelineParams, simulate
from core.pipeline.schedules import build
from core.pipeline.trace_export import pytorch_actions_csv

EQUAL = {"tf": 1.0, "tb": 1.0, "tw": 1.0}


def run(schedule, p, m, **costs):
    return simulate(PipelineParams(schedule=schedule, p=p, m=m, **(costs or EQUAL)))


def peak(schedule, p, m, **costs):
    return max(run(schedule, p, m, **costs).summary()["peak_activation"])


def test_must_show_v_half_and_v_min_memory_against_1f1b_at_p8_m32():
    base = peak("1f1b", 8, 32)
    half, vmin = peak("v-half", 8, 32), peak("v-min", 8, 32)
    assert base == 8  # 1F1B's device 0 holds p micro-batches: the unit's anchor
    assert half == 5 and half <= 0.65 * base  # (p+2)//2
    assert vmin == 4 and vmin <= 0.5 * base  # (p+4)//3
    # the bubbles paid for it (idle share of the makespan): 1F1B B = 7/39 = 0.1795
    assert run("1f1b", 8, 32).timeline.bubble_fraction == pytest.approx(7 / 39)
    assert run("v-half", 8, 32).timeline.bubble_fraction == pytest.approx(0.0813, abs=5e-5)
    assert run("v-min", 8, 32).timeline.bubble_fraction == pytest.approx(0.1233, abs=5e-5)


@pytest.mark.parametrize("schedule", ["1f1b", "zb-h1", "zb-h2", "zbv", "v-half", "v-min", "dualpipe", "dualpipev"])
def test_peak_activation_is_the_published_one_for_p_up_to_16(schedule):
    for p in range(1, 17):
        for m in (2 * p, 3 * p + 2, 4 * p):
            try:
                got = peak(schedule, p, m)
            except InputError:
                assert schedule == "dualpipe" and (p % 2 or m % 2)  # DualPipe needs even p and m
                continue
            assert got == published_peak_activation(schedule, p), (p, m)


@pytest.mark.parametrize("p,m,costs,half,vmin", [
    (8, 32, (1, 1, 1), 0.0813, 0.1233),
    (16, 64, (1, 1, 1), 0.0965, 0.1332),
    (4, 16, (1, 1, 1), 0.0495, 0.1028),
    (8, 32, (1, 2, 1), 0.2000, 0.3890),
])
def test_v_half_v_min_bubble_equals_the_reference_implementation(p, m, costs, half, vmin):
    f, b, w = costs
    for schedule, expected in (("v-half", half), ("v-min", vmin)):
        r = run(schedule, p, m, tf=2.0 * f, tb=2.0 * b, tw=2.0 * w)  # their costs are per chunk (half a device)
        tl = r.timeline
        ideal = m * 2 * (f + b + w)
        assert tl.span_bubble_time / (tl.span_bubble_time + ideal) == pytest.approx(expected, abs=5e-5)


@pytest.mark.parametrize("schedule", ["v-half", "v-min"])
@pytest.mark.parametrize("p,m", [(1, 21), (2, 25), (3, 40), (4, 33), (6, 61), (8, 49), (9, 100), (12, 97), (16, 300),
                                 (32, 200)])
def test_periodic_shortcut_is_the_full_greedy_op_for_op(schedule, p, m):
    """Past 4p+16 micro-batches the order is built from the greedy of 4p+16 with whole periods inserted in
    its steady middle; it must equal the full greedy squeeze (in development: 2,100 settings, p <= 64, m <= 1024)."""
    from core.pipeline.schedules.controllable import _base_m, _greedy_times, _periodic_times

    assert m > _base_m(p)
    fast = _periodic_times(schedule, p, m)
    assert fast is not None  # the steady middle was found: no fall-back to the full build
    full = _greedy_times(schedule, p, m)
    assert len(fast) == len(full) == 4
    for got, want in zip(fast, full, strict=True):
        np.testing.assert_array_equal(got, want)


def test_v_half_and_v_min_near_the_papers_estimates():
    for p, m in ((8, 32), (16, 64), (16, 128)):
        b = gpipe_bubble_share(p, m)
        half = run("v-half", p, m).timeline.bubble_fraction
        vmin = run("v-min", p, m).timeline.bubble_fraction
        assert controllable_estimate("v-half", p, m) == pytest.approx(b / 2)
        assert abs(half - b / 2) < 0.1 * b  # within a tenth of B of the estimate B/2
        assert 2 * b / 3 <= vmin < 2 * b / 3 + 0.1 * b  # 2B/3 plus a small overhead, as the README says
        assert half < vmin < b


def test_zbv_holds_about_1f1b_peak_activation():
    assert peak("zbv", 8, 32) == peak("1f1b", 8, 32) == 8


def test_dualpipe_bubble_below_1f1b_and_its_readme_formula():
    for p in (4, 8):
        for m in (2 * p, 4 * p, 4 * p + 2):
            for tw in (0.0, 0.5, 1.0):
                r = run("dualpipe", p, m, tf=1.0, tb=1.0, tw=tw)
                f, b, w = 1.0, 1.0 + tw, tw  # README: B is a full backward chunk, W its weight part
                assert r.timeline.bubble_time == pytest.approx((p / 2 - 1) * ((f + b) + b - 3 * w))
                formula, why = r.formula
                assert formula is not None and not why
                assert formula.bubble_time == pytest.approx(r.timeline.bubble_time)
                assert r.timeline.bubble_fraction < run("1f1b", p, m, tf=1.0, tb=1.0, tw=tw).timeline.bubble_fraction


def test_dualpipe_has_two_directions_and_two_copies():
    s = build("dualpipe", 4, 8)
    assert s.num_stages == 4 and s.stage_map.tolist() == [[0, 3], [1, 2], [2, 1], [3, 0]]  # each stage twice
    def stage0_forwards(d, chunk):
        rows = s.devices[d]
        return set(rows[(rows[:, 0] == 0) & (rows[:, 2] == chunk), 1].tolist())

    assert stage0_forwards(0, 0) == {0, 1, 2, 3}  # stage 0 of the downward copy: device 0
    assert stage0_forwards(3, 1) == {4, 5, 6, 7}  # stage 0 of the upward copy: device 3
    with pytest.raises(InputError, match="even"):
        build("dualpipe", 3, 8)
    with pytest.raises(InputError, match="m >= 8"):
        build("dualpipe", 4, 6)
    with pytest.raises(InputError, match="even m"):
        build("dualpipe", 4, 9)


def test_dualpipe_formula_withheld_when_forward_and_backward_differ():
    r = run("dualpipe", 4, 8, tf=1.0, tb=2.0, tw=0.0)
    formula, why = r.formula
    assert formula is None and "t_f = t_b" in why and "t_f, t_b, t_w = 1, 2, 0" in why


def test_zbv_zero_bubble_only_from_2p_minus_1_micro_batches():
    """Issue 9's example: p = 8, m = 8, equal costs; the simulator finds 0.2258, so no closed form of 0."""
    r = run("zbv", 8, 8)
    assert r.timeline.bubble_fraction == pytest.approx(0.2258, abs=5e-5)
    formula, why = r.formula
    assert formula is None and "m >= 2p-1" in why and "m = 8 < 2p-1 = 15" in why
    assert run("zbv", 8, 15).formula[0].bubble_time == 0.0 == run("zbv", 8, 15).timeline.span_bubble_time


@pytest.mark.parametrize("schedule,p,m,word", [
    ("zb-h2", 4, 6, "m >= 2p-1"), ("zb-h1", 4, 3, "m >= p"), ("looped-bfs", 4, 3, "m >= p"),
    ("dualpipev", 4, 8, "t_f = t_b"),
])
def test_every_closed_form_states_its_condition_when_it_fails(schedule, p, m, word):
    r = simulate(PipelineParams(schedule=schedule, p=p, m=m, tf=1.0, tb=2.0, tw=0.0))
    formula, why = r.formula
    assert formula is None and word in why


def test_formulas_carry_their_conditions():
    formula, _ = run("1f1b", 4, 8).formula
    assert formula.conditions == "any m"
    formula, _ = run("zbv", 4, 8).formula
    assert formula.conditions == "T_F = T_B = T_W and m >= 2p-1"


@pytest.mark.parametrize("schedule", ["v-half", "v-min"])
def test_v_schedules_export_every_action_once(schedule):
    r = run(schedule, 4, 8)
    rows = list(csv.reader(io.StringIO(pytorch_actions_csv(r.schedule))))
    assert len(rows) == 4
    for kind in "FIW":
        got = sorted((int(a[:-len(a.split(kind)[-1]) - 1]), int(a.split(kind)[-1])) for row in rows for a in row
                     if kind in a)
        assert got == [(s, mb) for s in range(8) for mb in range(8)], kind
    assert rows[0][0] == "0F0"


def test_dualpipe_has_no_pytorch_action_table_and_says_why():
    with pytest.raises(InputError, match="one chain of stages"):
        pytorch_actions_csv(build("dualpipe", 4, 8))


def test_peak_activation_unit_counts_a_v_chunk_as_half_a_device():
    """1F1B's device d holds p-d; a V schedule's chunk is half a device, so its counts are halves."""
    assert run("1f1b", 4, 8).summary()["peak_activation"] == [4.0, 3.0, 2.0, 1.0]
    act = run("v-min", 8, 32).summary()["peak_activation"]
    assert act[0] == 3.5 and all(float(2 * a).is_integer() for a in act)
    assert np.isclose(run("zbv", 4, 8).timeline.peak_activation, run("zbv", 4, 8).timeline.peak_inflight).all()


def test_cli_json_reports_peak_activation_and_formula_conditions():
    import json
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "core", "simulate", "--schedule", "v-half", "-p", "8", "-m", "32",
                          "--tf", "1", "--tb", "1", "--tw", "1", "--json"], capture_output=True, text=True, timeout=120)
    data = json.loads(out.stdout)
    assert max(data["peak_activation"]) == 5 and data["formula_conditions"] is None and "B/2" in data["formula_note"]
    out = subprocess.run([sys.executable, "-m", "core", "simulate", "--schedule", "zbv", "-p", "4", "-m", "8",
                          "--tf", "1", "--tb", "1", "--tw", "1", "--json"], capture_output=True, text=True, timeout=120)
    data = json.loads(out.stdout)
    assert data["peak_activation"] == [4, 4, 4, 4] and data["formula_conditions"] == "T_F = T_B = T_W and m >= 2p-1"


@pytest.mark.parametrize("schedule", ["v-half", "v-min"])
@pytest.mark.parametrize("p,m", [(2, 2), (3, 5), (4, 8), (8, 32)])
def test_pytorch_accepts_the_v_schedules_action_tables(schedule, p, m):
    """PyTorch's own checks of a loaded action table: every action once and in order (_validate_schedule),
    then its sends and receives added and played through without deadlock (_simulate_comms_compute)."""
    torch_schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    s = run(schedule, p, m).schedule
    actions = {rank: [torch_schedules._Action.from_str(a) for a in row]
               for rank, row in enumerate(csv.reader(io.StringIO(pytorch_actions_csv(s))))}
    torch_schedules._validate_schedule(actions, p, s.num_stages, m)
    rank_of = {int(s.stage_map[d, c]): d for d in range(p) for c in range(2)}
    with_comms = torch_schedules._add_send_recv(actions, rank_of.__getitem__, s.num_stages)
    torch_schedules._simulate_comms_compute(with_comms, rank_of.__getitem__, s.num_stages)


def test_every_closed_form_equals_the_simulation_wherever_its_conditions_hold():
    """Issue 9: a closed form is shown only where it holds. On this grid every form that is not withheld
    equals the simulated bubble in its own convention, and each schedule with a form gets both verdicts."""
    from core.pipeline.schedules import REGISTRY

    costs = [(1, 1, 1), (1, 2, 0), (1, 1, 0.5), (2, 1, 1), (1, 2, 1), (1, 1, 2)]
    shown, withheld = set(), set()
    for name in REGISTRY:
        for p in (2, 3, 4, 8):
            for m in (1, 3, 4, 7, 8, 15, 16):
                for iterations in (1, 2):
                    for tf, tb, tw in costs:
                        try:
                            r = simulate(PipelineParams(schedule=name, p=p, m=m, v=2, tf=tf, tb=tb, tw=tw,
                                                        iterations=iterations))
                        except InputError:
                            continue
                        formula, why = r.formula
                        if formula is None:
                            assert why
                            withheld.add(name)
                            continue
                        shown.add(name)
                        simulated = r.simulated_in(formula.convention)[0]
                        assert simulated == pytest.approx(formula.bubble_time, abs=1e-9), (name, p, m, tf, tb, tw)
    assert shown == {n for n, e in REGISTRY.items() if e.closed_form}  # every closed form was exercised ...
    assert {"zbv", "zb-h2", "dualpipe", "dualpipev", "zb-h1", "looped-bfs", "v-half", "v-min"} <= withheld  # ... and
    # withheld somewhere (interleaved's m % p == 0 is refused by the schedule itself before any formula)
