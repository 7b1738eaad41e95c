"""Hostile inputs to the pipeline engine: a clear InputError, never a hang or a traceback."""

import math

import pytest

from core.errors import InputError
from core.params.pipeline import MAX_OPS
from core.pipeline.result import PipelineParams, peak_inflight, simulate
from core.pipeline.schedules import build


@pytest.mark.parametrize("kwargs,needle", [
    ({"p": 0}, "out of range"),
    ({"m": -1}, "out of range"),
    ({"v": 65}, "out of range"),
    ({"tf": math.nan}, "finite"),
    ({"tb": math.inf}, "finite"),
    ({"tw": -1.0}, "out of range"),
    ({"tf": 1e9}, "out of range"),
    ({"schedule": "zb-h3"}, "not allowed"),
    ({"p": 2.5}, "whole number"),
    ({"stage_costs": (1.0, math.nan)}, "finite"),
])
def test_bad_parameters_are_refused(kwargs, needle):
    with pytest.raises(InputError, match=needle):
        PipelineParams(**kwargs)


def test_v_that_does_not_fit_the_schedule():
    with pytest.raises(InputError, match="multiple of p"):
        simulate(PipelineParams(schedule="interleaved", p=4, m=10, v=3))


def test_ops_cap_is_checked_before_building():
    with pytest.raises(InputError, match=f"limit is {MAX_OPS:,}"):
        build("interleaved", 64, 1024, 8, iterations=16)


def test_build_refuses_non_integers_directly():
    with pytest.raises(InputError):
        build("1f1b", True, 4)
    with pytest.raises(InputError, match="unknown schedule"):
        build("gpipe2", 4, 4)


def test_largest_allowed_configuration_runs_quickly():
    import time
    t0 = time.perf_counter()
    r = simulate(PipelineParams(schedule="1f1b", p=64, m=1024))
    assert r.timeline.num_ops == 2 * 64 * 1024
    assert time.perf_counter() - t0 < 2.0  # a generous ceiling; bench/ has the real figures


def test_peak_inflight_helper_for_the_memory_model():
    assert peak_inflight("1f1b", 4, 8) == 4
    assert peak_inflight("gpipe", 4, 8) == 8
    assert peak_inflight("interleaved", 4, 8, 2) == pytest.approx(5.5)
