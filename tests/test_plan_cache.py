"""core.planner.plan_cache: a re-plan of the same question under other step-time assumptions reuses the candidates,
their model states and memory gate, and gives the frame a plan from nothing gives."""

import dataclasses

import pandas as pd
import pytest

from core.params.planner import PlannerParams
from core.planner import plan as planner
from core.planner import plan_cache, simulation

Q = PlannerParams(model="llama3-70b", gpu="a100-80gb", gpus=64, batch=512)


def _fresh(q: PlannerParams) -> pd.DataFrame:
    plan_cache.clear()
    simulation.clear_cache()
    return planner.plan(q).frame


@pytest.mark.parametrize("change", [dict(eff=0.4), dict(dp_overlap=0.5, straggler=0.05), dict(reserve_frac=0.2),
                                    dict(ends_in_split=True), dict(moe_capacity=1.5)])
def test_a_re_plan_under_another_assumption_is_a_plan_from_nothing(change):
    q = dataclasses.replace(Q, **change)
    planner.plan(Q)  # the question's structure kept ...
    reused = planner.plan(q).frame  # ... and reused where the change leaves it valid
    pd.testing.assert_frame_equal(reused, _fresh(q))
    plan_cache.clear()


def test_the_key_keeps_only_the_assumptions_the_structure_reads():
    degrees = planner.candidates.degrees(Q, planner.candidates.resolve(Q)[0])[0]
    same = plan_cache.key(dataclasses.replace(Q, eff=0.4, tp_overlap=0.9), degrees, None)
    assert same == plan_cache.key(Q, degrees, None)
    for change in (dict(ends_in_split=True), dict(reserve_frac=0.2), dict(moe_capacity=1.5), dict(batch=1024)):
        assert plan_cache.key(dataclasses.replace(Q, **change), degrees, None) != plan_cache.key(Q, degrees, None)


def test_kept_arrays_cannot_be_written():
    plan_cache.clear()
    planner.plan(Q)
    (c, *_), = plan_cache._KEPT.values()
    with pytest.raises(ValueError):
        c.t[0] = 3
    plan_cache.clear()


def test_a_structure_above_the_cap_is_not_kept(monkeypatch):
    plan_cache.clear()
    monkeypatch.setattr(plan_cache, "MAX_BYTES", 1024)
    first = planner.plan(Q).frame
    assert plan_cache._KEPT == {}
    pd.testing.assert_frame_equal(planner.plan(Q).frame, first)


def test_a_kept_placement_is_counted_once():
    """The plan that builds the structure spends the placement's share of the simulation budget; the next plan of
    the same question does none of that work again and spends nothing."""
    first = _fresh(Q)
    assert len(first) and planner.plan(Q).sim_ops == 0
    plan_cache.clear()
    simulation.clear_cache()
    assert planner.plan(Q).sim_ops > 0
    plan_cache.clear()
