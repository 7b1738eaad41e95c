"""Ring collectives and the per-step communication of ZeRO, tensor and pipeline parallelism."""

import numpy as np
import pytest

from core.cost import comm
from core.errors import InputError


def test_zero_volumes_are_2_2_2_3_psi():
    np.testing.assert_array_equal(comm.zero_volume_multiple([0, 1, 2, 3]), [2, 2, 2, 3])
    assert comm.zero_volume_multiple(3) / comm.zero_volume_multiple(0) == 1.5


def test_ring_factors():
    assert float(comm.ring_factor("all-reduce", 2)) == 1.0
    assert float(comm.ring_factor("reduce-scatter", 4)) == 0.75
    assert float(comm.ring_factor("all-gather", 8)) == 0.875
    big = comm.ring_factor("all-reduce", 1 << 20)
    assert 1.99999 < float(big) < 2


def test_n_equal_one_moves_nothing_and_nothing_is_ever_negative_or_nan():
    n = np.arange(1, 4097)
    for c in comm.COLLECTIVES:
        f = comm.ring_factor(c, n)
        assert f[0] == 0.0 and float(comm.collective_bytes(c, 1e9, 1)) == 0.0
        assert np.isfinite(f).all() and (f >= 0).all() and (np.diff(f) > 0).all()
    assert float(comm.zero_comm_bytes(7.5e9, 1, 3)) == 0.0


def test_zero_bytes_per_rank_for_the_7_5b_example():
    # 2 x (63/64) x 7.5e9 values x 2 bytes for stages 0-2, 1.5 x that for stage 3
    np.testing.assert_allclose(comm.zero_comm_bytes(7.5e9, 64, [0, 1, 2, 3]),
                               [29.53125e9, 29.53125e9, 29.53125e9, 44.296875e9])


def test_zero_comm_seconds_are_the_stage_collectives_as_nccl_runs_them():
    # 7.5B on 64 ranks, one per server, 100 GB/s: stage 3 = two all-gathers + a reduce-scatter over the shard,
    # each a ring of 63 network steps (8.4 + 63 x 14 us) or PAT (8.0 + 6 x 14 / 3.5 + 64 x 2.8 us), the faster
    ring = (8.4 + 63 * 14.0) * 1e-6 + 63 / 64 * 15e9 / 100e9
    pat = (8.0 + 6 * 14.0 / 3.5 + 64 * 2.8) * 1e-6 + 15e9 / (0.75 * 100e9)
    assert comm.zero_comm_seconds(7.5e9, 64, 3) == pytest.approx(3 * min(ring, pat))
    assert comm.zero_comm_seconds(7.5e9, 1, 3) == 0.0


def test_zero_comm_table():
    df = comm.zero_comm_table(7.5e9, 64, bandwidth_gbs=100)
    assert list(df["volume [x Psi]"]) == [2, 2, 2, 3]
    assert df.loc[3, "time [s]"] == pytest.approx(44.296875e9 / 100e9, rel=0.01)  # + 3 collectives' latency
    assert df.loc[3, "time [s]"] == pytest.approx(comm.zero_comm_seconds(7.5e9, 64, 3))
    assert "reduce-scatter" in df.loc[2, "collectives"] and df.loc[3, "collectives"].count("all-gather") == 2


def test_tensor_parallel_traffic_per_layer():
    s, b, h = 2048, 1, 12288
    assert float(comm.tp_layer_bytes(s, b, h, 1)) == 0.0
    assert float(comm.tp_layer_bytes(s, b, h, 8)) == pytest.approx(4 * 2 * 7 / 8 * s * b * h * 2)
    assert float(comm.tp_layer_bytes(s, b, h, 8, recompute="full")) == pytest.approx(6 * 2 * 7 / 8 * s * b * h * 2)


def test_pipeline_point_to_point_sizes():
    assert float(comm.p2p_bytes(2048, 4, 12288)) == 2048 * 4 * 12288 * 2
    assert float(comm.p2p_bytes(2048, 4, 12288, t=8, sequence_parallel=True)) == 2048 * 4 * 12288 * 2 / 8
    assert float(comm.p2p_bytes_per_step(2048, 1, 4096, m=16, v=2)) == 2 * 16 * 2 * 2048 * 4096 * 2


@pytest.mark.parametrize(
    "call,needle",
    [
        (lambda: comm.ring_factor("all-reduce", 0), "out of range"),
        (lambda: comm.ring_factor("all-reduce", -4), "out of range"),
        (lambda: comm.ring_factor("all-reduce", float("nan")), "finite"),
        (lambda: comm.ring_factor("broadcast", 4), "not allowed"),
        (lambda: comm.zero_comm_seconds(7.5e9, 8, 1, bandwidth_gbs=0), "out of range"),
        (lambda: comm.zero_comm_bytes(-1, 8, 1), "out of range"),
        (lambda: comm.zero_volume_multiple(5), "out of range"),
    ],
)
def test_hostile_inputs(call, needle):
    with pytest.raises(InputError, match=needle):
        call()
