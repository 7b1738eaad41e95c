"""Model states per GPU under DP and ZeRO 1-3 against the ZeRO paper and the seeds' worked examples."""

import numpy as np
import pytest

from core.errors import InputError
from core.memory import fit
from core.memory import states as memory
from core.params.memory import MAX_ND

GB = 1e9

# ZeRO paper (arXiv 1910.02054) Table 1, 7.5B column, GB = 1e9 bytes: N_d -> (P_os, P_os+g, P_os+g+p)
TABLE1_7_5B = {1: (120, 120, 120), 4: (52.5, 41.3, 30), 16: (35.6, 21.6, 7.5),
               64: (31.4, 16.6, 1.88), 256: (30.4, 15.4, 0.47), 1024: (30.1, 15.1, 0.12)}


def total_gb(psi, nd, stage, **kw):
    return float(memory.model_states(psi, nd, stage, **kw).total) / GB


@pytest.mark.parametrize("nd", sorted(TABLE1_7_5B))
def test_zero_paper_table1_all_18_cells_within_0_06_gb(nd):
    assert total_gb(7.5e9, nd, 0) == 120.0
    for stage, published in zip((1, 2, 3), TABLE1_7_5B[nd], strict=True):
        assert abs(total_gb(7.5e9, nd, stage) - published) <= 0.06, (nd, stage)


def test_table1_frame_has_the_same_numbers():
    df = memory.table1(7.5e9)
    assert list(df["N_d"]) == sorted(TABLE1_7_5B)
    for _, row in df.iterrows():
        assert row["DP [bytes]"] == 120e9
        cols = ("ZeRO-1 (P_os) [bytes]", "ZeRO-2 (P_os+g) [bytes]", "ZeRO-3 (P_os+g+p) [bytes]")  # the paper's names
        for col, published in zip(cols, TABLE1_7_5B[row["N_d"]], strict=True):
            assert abs(row[col] / GB - published) <= 0.06


def test_reductions_at_nd_64_are_3_8_7_2_and_64():
    base = total_gb(7.5e9, 64, 0)
    assert [round(base / total_gb(7.5e9, 64, s), 1) for s in (1, 2, 3)] == [3.8, 7.2, 64.0]


def test_stage1_and_2_reductions_approach_4x_and_8x_but_never_reach_them():
    nds = np.array([1, 4, 64, 1024, 65536, MAX_ND])
    base = memory.model_states(7.5e9, nds, 0).total
    r1 = base / memory.model_states(7.5e9, nds, 1).total
    r2 = base / memory.model_states(7.5e9, nds, 2).total
    assert np.all(np.diff(r1) > 0) and np.all(r1 < 4) and r1[-1] == pytest.approx(4, abs=1e-4)
    assert np.all(np.diff(r2) > 0) and np.all(r2 < 8) and r2[-1] == pytest.approx(8, abs=1e-4)
    assert float(memory.floor_bytes(7.5e9, 1)) == 4 * 7.5e9
    assert float(memory.floor_bytes(7.5e9, 2)) == 2 * 7.5e9
    assert float(memory.floor_bytes(7.5e9, 3)) == 0.0


def test_component_breakdown_follows_the_sharding_table():
    s = memory.model_states(7.5e9, 64, [0, 1, 2, 3])
    np.testing.assert_array_equal(s.params / 7.5e9, [2, 2, 2, 2 / 64])
    np.testing.assert_array_equal(s.grads / 7.5e9, [2, 2, 2 / 64, 2 / 64])
    np.testing.assert_array_equal(s.optimizer / 7.5e9, [12, 12 / 64, 12 / 64, 12 / 64])


def test_seed_002_seven_b_on_eight_gpus():
    assert total_gb(7e9, 1, 0) == pytest.approx(112.0)
    assert [total_gb(7e9, 8, s) for s in (1, 2, 3)] == pytest.approx([38.5, 26.25, 14.0], rel=1e-12)


def test_seed_002_thirteen_b_on_sixteen_gpus():
    assert total_gb(13e9, 16, 1) == pytest.approx(61.75, rel=1e-12)
    assert total_gb(13e9, 16, 3) == pytest.approx(13.0, rel=1e-12)


def test_seed_000_seventy_b_on_64_gpus_only_stage3_fits_80_gb():
    totals = [total_gb(70e9, 64, s) for s in range(4)]
    assert [round(x, 1) for x in totals] == [1120.0, 293.1, 155.3, 17.5]
    usable = fit.usable_bytes(80)
    assert [bool(fit.fits(t * GB, usable)) for t in totals] == [False, False, False, True]


def test_seed_000_smallest_nd_for_zero3_and_zero2_never_fits():
    assert fit.smallest_nd(70e9, 3, 80) == 14  # 16 x 70e9 / 14 = 80e9 bytes exactly
    assert total_gb(70e9, 14, 3) <= 80 < total_gb(70e9, 13, 3)
    assert fit.smallest_nd(70e9, 2, 80) is None  # 2 Psi = 140 GB of 16-bit weights on every GPU
    assert fit.smallest_nd(70e9, 1, 80) is None
    assert total_gb(70e9, MAX_ND, 2) > 140 > 80


def test_smallest_nd_vectorised_matches_a_brute_force_search():
    usable = fit.usable_bytes(40.0, reserve_gb=2.0)
    psis = np.array([1e9, 3e9, 7e9, 13e9, 70e9])
    for stage in (1, 2, 3):
        got = fit.min_nd(psis, stage, usable)
        for psi, n in zip(psis, got, strict=True):
            brute = next((d for d in range(1, 5000) if memory.model_states(psi, d, stage).total <= usable), np.inf)
            assert n == brute, (psi, stage)


def test_reserve_reduces_usable_memory_and_can_flip_the_fit():
    assert float(fit.usable_bytes(80, reserve_gb=4, reserve_frac=0.1)) == pytest.approx(80e9 * 0.9 - 4e9)
    assert fit.smallest_nd(70e9, 3, 80, reserve_gb=5) == 15
    with pytest.raises(InputError, match="reserve"):
        fit.usable_bytes(80, reserve_gb=80)


def test_largest_model_zero_paper_table2_v100_32gb_64_gpus():
    # ZeRO paper Table 2 (check against the paper): 32 GB V100, N_d = 64: 2B / 7.6B / 14.4B / 128B
    usable = 32e9
    got = [float(fit.largest_model(64, s, usable)) / 1e9 for s in range(4)]
    assert [round(x, 1) for x in got] == [2.0, 7.6, 14.4, 128.0]
    # its 16-way model-parallel row (1024 GPUs: 32B, 121.6B, 230.4B, 2T) is 16 x the rounded figures above
    assert [round(16 * round(x, 1), 1) for x in got] == [32.0, 121.6, 230.4, 2048.0]


def test_largest_model_round_trips_through_model_states():
    usable = 80e9
    for stage in range(4):
        psi = float(fit.largest_model(64, stage, usable))
        assert memory.model_states(psi, 64, stage).total <= usable < memory.model_states(psi + 1e3, 64, stage).total


def test_presets_state_their_byte_counts():
    assert memory.preset("adam", "mixed").kwargs() == {"param_bytes": 2.0, "grad_bytes": 2.0, "k": 12.0}
    assert memory.preset("adam", "fp32").total == 16.0  # 4 + 4 + 8, no separate master copy
    assert memory.preset("adam-8bit", "mixed").k == 6.0
    assert memory.preset("sgd-momentum", "mixed").k == 8.0
    assert memory.preset("sgd-momentum", "fp32").k == 4.0
    assert memory.preset("sgd", "fp32").k == 0.0
    assert memory.preset("adam", "mixed", k=20).k == 20.0
    table = memory.preset_table()
    assert len(table) == 8 and table["source"].str.len().min() > 20


def test_fp32_training_stage2_formula():
    b = memory.preset("adam", "fp32")
    assert float(memory.model_states(1e9, 8, 2, **b.kwargs()).total) == pytest.approx((4 + (4 + 8) / 8) * 1e9)


def test_broadcasting_over_candidate_arrays_matches_scalar_calls():
    psi = np.array([[1e9], [7e9], [70e9]])
    nd = np.array([1, 8, 64, 512])
    stage = np.array([0, 1, 2, 3])
    grid = memory.model_states(psi, nd, stage).total
    assert grid.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            assert grid[i, j] == memory.model_states(float(psi[i, 0]), nd[j], stage[j]).total


def test_even_split_over_t_and_p():
    assert float(memory.params_per_rank(175e9, 8, 16)) == 175e9 / 128
    assert float(memory.model_states(memory.params_per_rank(175e9, 8, 16), 4, 1).total) == pytest.approx(
        (4 + 12 / 4) * 175e9 / 128)


def test_embedding_on_ends_puts_the_embedding_and_its_copy_on_the_end_stages():
    psi, emb = 10e9, 1e9
    assert float(memory.params_per_rank(psi, 1, 1, "embedding-on-ends", emb)) == psi
    worst = float(memory.params_per_rank(psi, 2, 4, "embedding-on-ends", emb))
    assert worst == pytest.approx(((psi - emb) / 4 + emb) / 2)
    assert worst > float(memory.params_per_rank(psi, 2, 4))
    stages = memory.stage_params(psi, 4, "embedding-on-ends", emb)
    assert stages.sum() == pytest.approx(psi + emb)  # the logits copy on the last stage is extra memory
    assert stages[0] == stages[-1] > stages[1] == stages[2]
    with pytest.raises(InputError, match="embedding"):
        memory.params_per_rank(psi, 1, 4, "embedding-on-ends")
    with pytest.raises(InputError, match="cannot exceed"):
        memory.params_per_rank(psi, 1, 4, "embedding-on-ends", 2 * psi)


def test_curve_vs_nd_has_log_spaced_whole_nd_and_floors():
    df = memory.curve_vs_nd(7.5e9, nd_max=4096, points=32)
    assert df["nd"].iloc[0] == 1 and df["nd"].iloc[-1] == 4096 and (np.diff(df["nd"]) > 0).all()
    assert (df["zero1 floor [bytes]"] == 30e9).all() and (df["zero2 floor [bytes]"] == 15e9).all()
    assert (df["zero1 [bytes]"] > df["zero1 floor [bytes]"]).all()


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        ({"psi": 0}, "out of range"),
        ({"psi": -7e9}, "out of range"),
        ({"psi": float("nan")}, "finite"),
        ({"psi": float("inf")}, "finite"),
        ({"psi": 1e15}, "out of range"),
        ({"psi": "seven"}, "expected a number"),
        ({"psi": None}, "expected a number"),
        ({"nd": 0}, "out of range"),
        ({"nd": -8}, "out of range"),
        ({"nd": 2.5}, "whole number"),
        ({"nd": MAX_ND + 1}, "out of range"),
        ({"stage": 4}, "out of range"),
        ({"stage": True}, "expected a number"),
        ({"k": float("nan")}, "finite"),
        ({"k": -1}, "out of range"),
        ({"k": 1e6}, "out of range"),
        ({"psi": [1e9, float("nan")]}, "finite"),
        ({"psi": []}, "no values"),
    ],
)
def test_hostile_inputs_raise_a_clear_input_error(kwargs, needle):
    args = {"psi": 7e9, "nd": 8, "stage": 1, "k": 12.0} | kwargs
    with pytest.raises(InputError, match=needle):
        memory.model_states(**args)


def test_nd_larger_than_the_gpu_count_is_rejected():
    assert float(fit.check_gpu_count(8, 4, 16, 512)) == 512
    with pytest.raises(InputError, match="exceeds the 256 available"):
        fit.check_gpu_count(8, 4, 16, 256)
    with pytest.raises(InputError, match="exceeds"):
        fit.check_gpu_count(1, 1, [4, 64], 32)


def test_fit_table_reports_states_and_headroom():
    df = fit.fit_table(70e9, 64, gpu_mem_gb=80)
    assert list(df["fits"]) == [False, False, False, True]
    assert df.loc[3, "headroom [bytes]"] == pytest.approx(62.5e9)
    assert df.loc[3, "smallest N_d that fits"] == 14
    with_acts = fit.fit_table(70e9, 64, gpu_mem_gb=80, activation_bytes=70e9)
    assert not with_acts.loc[3, "fits"]  # the states fit; states + activations do not


def test_together_flags_the_forgotten_activations():
    tg = fit.together(17.5e9, 70e9, 80e9)
    assert tg["fits_states_only"] and not tg["fits"] and tg["total"] == 87.5e9


def test_the_memory_function_vectorised_equals_its_parts():
    from core.memory import activations, per_gpu

    t, p, nd, stage = np.array([1, 8, 8, 4]), np.array([1, 8, 16, 4]), np.array([64, 8, 4, 32]), np.array([0, 1, 3, 2])
    inflight = np.array([1.0, 8.0, 16.0, 4.0])
    model = per_gpu.ModelMemory(dense_params=175e9, layers=96, hidden=12288, heads=96, seq=2048, vocab=51200)
    cfg = per_gpu.MemoryConfig(model, per_gpu.Layout(t=t, p=p, d=nd, zero=stage),
                               per_gpu.Training(1, True, "selective"), per_gpu.InFlight(inflight, inflight))
    got = per_gpu.per_gpu(cfg)
    for i in range(4):
        states = float(memory.model_states(175e9 / (t[i] * p[i]), nd[i], stage[i]).total)
        acts = activations.report(activations.Shape(2048, 1, 12288, 96, int(t[i]), True, "selective", 51200), 96,
                                  int(p[i]), inflight[i])["peak"]
        assert got.states_on_gpu[i] == pytest.approx(states) and got.activations[i] == pytest.approx(acts)
        assert got.total[i] == pytest.approx(states + acts + got.gathered[i])
    assert got.gathered[[0, 1, 3]].tolist() == [0, 0, 0] and got.gathered[2] > 0  # ZeRO-3 gathers its blocks


def test_units_are_labelled_at_the_edge():
    from core.units import fmt_bytes, frame_in

    gb = frame_in(memory.table1(7.5e9), "GB")
    assert "ZeRO-3 (P_os+g+p) [GB]" in gb.columns and gb["DP [GB]"].iloc[0] == 120.0
    gib = frame_in(memory.table1(7.5e9), "GiB")
    assert gib["DP [GiB]"].iloc[0] == pytest.approx(120e9 / 2**30)
    assert fmt_bytes(31.40625e9) == "31.41 GB" and fmt_bytes(2**30, "GiB") == "1.00 GiB"
