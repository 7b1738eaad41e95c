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


def test_the_budget_counts_a_re_plan_as_a_plan_from_nothing():
    """The simulation budget counts the work a plan from nothing does, whatever the caches and the kept structure
    hold, so a warm server rules out what a cold one does (core.planner.simulation.SIM_BUDGET)."""
    plan_cache.clear()
    simulation.clear_cache()
    first = planner.plan(Q)
    other = dataclasses.replace(Q, eff=0.45)
    cold = planner.plan(other)  # the structure kept, new simulation keys
    warm = planner.plan(other)  # everything cached
    plan_cache.clear()
    simulation.clear_cache()
    nothing = planner.plan(other)
    assert first.sim_ops > 0 and cold.sim_ops == warm.sim_ops == nothing.sim_ops
    assert warm.simulations == 0 < cold.simulations
    plan_cache.clear()
