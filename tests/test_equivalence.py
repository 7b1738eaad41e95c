"""Sharded (ZeRO-1/2 style) Adam against replicated Adam: bit-identical, with 1/R of the state per rank."""

import pytest

from core.errors import InputError
from core.memory.equivalence import MAX_WORK, demonstrate


@pytest.mark.parametrize("ranks,size,seed", [(4, 1000, 0), (2, 64, 1), (7, 1001, 2), (1, 10, 3), (16, 4096, 4)])
def test_sharded_adam_is_bit_identical(ranks, size, seed):
    r = demonstrate(ranks=ranks, steps=30, size=size, seed=seed)
    assert r.max_abs_diff == 0.0
    assert r.max_abs_diff_clipped == 0.0
    assert r.replicas_identical
    assert sum(r.state_per_rank_sharded) == r.state_per_rank_replicated == 2 * size
    assert max(r.state_per_rank_sharded) - min(r.state_per_rank_sharded) <= 2  # even split, m and v


def test_state_per_rank_is_one_rth_of_the_replicated_state():
    r = demonstrate(ranks=4, steps=50, size=1000)
    assert r.state_per_rank_replicated == 2000
    assert r.state_per_rank_sharded == (500, 500, 500, 500)


def test_clipping_is_active_and_costs_one_scalar_allreduce_per_step():
    r = demonstrate(ranks=4, steps=20, size=1000, clip=0.5)
    assert r.clipped_steps == 20 and r.extra_scalar_allreduces == 20
    assert r.max_abs_diff_clipped == 0.0
    # a different summation order for the norm is no longer bit-identical in general, but only by rounding
    assert r.max_abs_diff_clipped_one_sum < 1e-12


def test_the_toy_problem_actually_trains():
    r = demonstrate(ranks=4, steps=50, size=1000)
    assert r.loss_end < 0.05 * r.loss_start


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        ({"ranks": 0}, "out of range"),
        ({"ranks": 65}, "out of range"),
        ({"steps": 0}, "out of range"),
        ({"size": 3, "ranks": 4}, "out of range"),
        ({"clip": float("nan")}, "finite"),
        ({"ranks": 64, "steps": 1000, "size": 100_000}, f"{MAX_WORK:,}"),
    ],
)
def test_hostile_inputs(kwargs, needle):
    with pytest.raises(InputError, match=needle):
        demonstrate(**kwargs)
