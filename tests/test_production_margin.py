"""The production margin (issue 36): what a production run loses that a vendor benchmark does not, as its own part
of the step that only the user sets, never folded into the compute rates and never set by a validation row."""

import numpy as np
import pytest

from core.cost import step_time
from core.errors import InputError
from core.params.planner import PlannerParams
from core.planner import accuracy, validation
from core.planner import plan as planner

Q = dict(model="llama3-8b", gpu="h100-80gb", gpus=64, batch=256)


def test_it_is_zero_unless_set_and_no_published_row_sets_it():
    assert PlannerParams().production_margin == 0.0
    assert (planner.plan(PlannerParams(**Q)).feasible["margin_s"] == 0.0).all()
    assert not any("production_margin" in r.get("software", {}) for r in validation.data()["rows"])


def test_it_scales_the_step_as_its_own_part_and_keeps_the_ranking():
    plain = planner.plan(PlannerParams(**Q)).feasible
    margin = planner.plan(PlannerParams(**Q, production_margin=0.25)).feasible
    rest = [c for k, c in step_time.COLUMN.items() if k != "margin"]
    assert np.allclose(margin["margin_s"], 0.25 * margin[rest].sum(axis=1))
    assert np.allclose(margin["step_time_s"], 1.25 * plain["step_time_s"])
    assert np.allclose(margin["mfu"], plain["mfu"] / 1.25)
    assert list(margin[["t", "p", "d", "zero_stage"]].itertuples(index=False)) == list(
        plain[["t", "p", "d", "zero_stage"]].itertuples(index=False))


def test_the_trust_note_names_the_margin_that_reproduces_the_slowest_large_run():
    stored = accuracy.load()
    m = 1.0 / (1.0 + stored.large_low) - 1.0
    assert f"production_margin {m:.2f}" in stored.words()[1]
    result = validation.validate()
    s = result.matched
    slowest = s[(s["gpus"] >= accuracy.LARGE_GPUS) & (s["role"] == "held-out") & (s["scope"] != validation.MODELLED)]
    key = slowest.loc[slowest["error"].idxmin(), "key"]
    row = next(r for r in validation.data()["rows"] if r["key"] == key)
    assert validation.step_row(row, {"production_margin": m})["error"] == pytest.approx(0.0, abs=0.002)


def test_out_of_range_is_refused():
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(InputError, match="production_margin"):
            PlannerParams(**Q, production_margin=bad)
