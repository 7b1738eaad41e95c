"""FSDP peak = sharded states + unsharded unit(s) being gathered; the wrap policy sets the unit size."""

import pytest

from core.errors import InputError
from core.memory import fsdp

PSI, ND, LAYERS, BLOCK = 7e9, 8, 32, 218e6  # 32 blocks = 6.976e9; the root keeps 24e6 (embeddings, norm)
SHARDED = 16 * PSI / ND  # 14e9


def test_block_wrap_with_prefetch_by_hand():
    r = fsdp.fsdp_peak(PSI, ND, LAYERS, BLOCK, "block", prefetch=True)
    assert r.sharded == SHARDED
    assert r.root_params == 2 * 24e6
    assert r.unit_params == 2 * 2 * BLOCK  # this block and the prefetched next one, 16-bit
    assert r.unit_grads == 2 * BLOCK
    assert r.peak == pytest.approx(14e9 + 48e6 + 872e6 + 436e6)
    assert (r.units, r.unit_size) == (32, BLOCK)


def test_block_wrap_without_prefetch_holds_one_unit():
    r = fsdp.fsdp_peak(PSI, ND, LAYERS, BLOCK, "block", prefetch=False)
    assert r.peak == pytest.approx(14e9 + 48e6 + 436e6 + 436e6)


def test_root_only_wrap_blows_up_the_peak():
    root = fsdp.fsdp_peak(PSI, ND, LAYERS, BLOCK, "root-only")
    assert root.peak == pytest.approx(SHARDED + 2 * PSI + 2 * PSI)  # all of Psi unsharded, params and grads
    block = fsdp.fsdp_peak(PSI, ND, LAYERS, BLOCK, "block")
    assert root.peak > 2.5 * block.peak
    assert root.units == 0 and root.unit_size == PSI


def test_min_params_groups_blocks_until_the_minimum():
    r = fsdp.fsdp_peak(PSI, ND, LAYERS, BLOCK, "min-params", min_params=500e6)
    assert (r.unit_size, r.units) == (3 * BLOCK, 11)  # ceil(500/218) = 3 blocks, ceil(32/3) = 11 units
    assert fsdp.units(PSI, LAYERS, BLOCK, "min-params", 1e6)[1] == BLOCK  # below one block: one block
    whole = fsdp.fsdp_peak(PSI, ND, LAYERS, BLOCK, "min-params", min_params=PSI)
    assert whole.units == 1 and whole.unit_params == 2 * LAYERS * BLOCK  # nothing left to prefetch


def test_peak_grows_with_unit_size_and_the_comparison_orders_it():
    df = fsdp.wrap_comparison(PSI, ND, LAYERS, BLOCK, min_params=500e6)
    peaks = dict(zip(df["policy"], df["peak [bytes]"], strict=True))
    assert peaks["block"] < peaks["min-params"] < peaks["root-only"]


def test_more_ranks_shrink_only_the_sharded_part():
    a = fsdp.fsdp_peak(PSI, 8, LAYERS, BLOCK)
    b = fsdp.fsdp_peak(PSI, 64, LAYERS, BLOCK)
    assert a.peak - b.peak == pytest.approx(a.sharded - b.sharded)


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        ({"block_params": 1e9}, "exceed"),
        ({"policy": "everything"}, "not allowed"),
        ({"policy": "min-params"}, "min_params"),
        ({"nd": 0}, "out of range"),
        ({"layers": 0}, "out of range"),
        ({"psi": float("nan")}, "finite"),
    ],
)
def test_hostile_inputs(kwargs, needle):
    args = {"psi": PSI, "nd": ND, "layers": LAYERS, "block_params": BLOCK} | kwargs
    with pytest.raises(InputError, match=needle):
        fsdp.fsdp_peak(**args)
