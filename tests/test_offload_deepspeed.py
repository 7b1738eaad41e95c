"""Offload in the paper's accounting, and DeepSpeed's estimator reproduced to the byte.

The DeepSpeed expectations are derived by hand from microsoft/DeepSpeed
deepspeed/runtime/zero/stage_1_and_2.py (estimate_zero2_model_states_mem_needs, commit 022f2236...),
deepspeed/runtime/zero/stage2.py (the older 4 Psi + 16 Psi / GPUs, commit 5336cd0f...) and
deepspeed/runtime/zero/stage3.py (estimate_zero3_model_states_mem_needs); the printed strings are the
examples in DeepSpeed's docs/code-docs/source/memory.rst (t5-3b cold: 2851e6 params, 32e6 largest layer).
"""

import numpy as np
import pytest

from core.errors import InputError
from core.memory import deepspeed_estimate as ds
from core.memory import offload
from core.memory.states import model_states

P, L = 2_851_000_000, 32_000_000  # t5-3b as in DeepSpeed's memory.rst


# --- paper convention -----------------------------------------------------------------------------------


def test_zero_offload_stage2_keeps_only_16bit_params_on_the_gpu():
    placed = offload.placement(7e9, 8, 2, "optimizer")
    assert float(placed.gpu_total) == 2 * 7e9
    assert float(placed.cpu_total) == pytest.approx((2 + 12) * 7e9 / 8)
    assert float(placed.cpu_per_node(8)) == pytest.approx((2 + 12) * 7e9)
    assert float(placed.gpu_total + placed.cpu_total) == pytest.approx(float(model_states(7e9, 8, 2).total))


def test_zero_offload_stage1_moves_only_the_optimizer_state():
    placed = offload.placement(7e9, 8, 1, "optimizer")
    assert float(placed.gpu_total) == 4 * 7e9
    assert float(placed.cpu_total) == pytest.approx(12 * 7e9 / 8)


def test_zero_infinity_stage3_leaves_only_the_gathered_layer_on_the_gpu():
    placed = offload.placement(70e9, 64, 3, "optimizer+params", largest_layer=1e9)
    assert float(placed.gpu_total) == 4e9  # 2 + 2 bytes for the one gathered layer
    assert float(placed.cpu_total) == pytest.approx(16 * 70e9 / 64)
    assert offload.placement(70e9, 64, 3, "none").gpu_total == pytest.approx(17.5e9)


@pytest.mark.parametrize("stage,mode,needle", [(0, "optimizer", "stage 1 or higher"),
                                               (2, "optimizer+params", "needs ZeRO stage 3"),
                                               (2, "nvme", "needs ZeRO stage 3"),
                                               (3, "disk", "not allowed")])
def test_unsupported_offload_is_an_input_error(stage, mode, needle):
    with pytest.raises(InputError, match=needle):
        offload.placement(7e9, 8, stage, mode)


# --- DeepSpeed convention, numbers derived by hand from their code ----------------------------------------


def test_zero2_current_revision_by_hand():
    # offload: gpu 2P; cpu P * max(4 * 8, 16) * 1.5
    assert ds.zero2(P, 8, 1, cpu_offload=True) == {"cpu": 136_848_000_000, "gpu": 5_702_000_000}
    # no offload: gpu 2P + int(18P / 8) = 5,702,000,000 + 6,414,750,000; cpu P * 4 * 8 * 1.5
    assert ds.zero2(P, 8, 1, cpu_offload=False) == {"cpu": 136_848_000_000, "gpu": 12_116_750_000}


def test_zero2_legacy_revision_by_hand():
    # stage2.py: 4P + int(16P / 8) = 11,404,000,000 + 5,702,000,000
    assert ds.zero2(P, 8, 1, cpu_offload=False, revision="legacy")["gpu"] == 17_106_000_000


def test_zero2_truncates_like_int():
    # 18 * 1,000,000,001 / 8 = 2,250,000,002.25 -> 2,250,000,002
    assert ds.zero2(1_000_000_001, 8, 1, cpu_offload=False)["gpu"] == 2_000_000_002 + 2_250_000_002
    assert isinstance(ds.zero2(P, 8)["gpu"], int)


def test_zero2_offload_cpu_uses_total_gpus_not_per_node():
    # max(4 * total_gpus, 16): 2 nodes x 8 -> 64 bytes per parameter per node, x 1.5
    assert ds.zero2(P, 8, 2, cpu_offload=True)["cpu"] == P * 64 * 3 // 2


@pytest.mark.parametrize(
    "opt,par,init,cpu,gpu",
    [
        (True, True, True, 76_977_000_000, 128_000_000),  # P * 18 * 1 * 1.5; 4L
        (True, True, False, 136_848_000_000, 128_000_000),  # P * max(32, 18) * 1.5
        (True, False, True, 68_424_000_000, 840_750_000),  # P * 16 * 1.5; 4L + int(2P / 8)
        (True, False, False, 136_848_000_000, 840_750_000),
        (False, False, True, 1_536_000_000, 6_542_750_000),  # L * 4 * 8 * 1.5; 4L + int(18P / 8)
        (False, False, False, 136_848_000_000, 6_542_750_000),  # P * 4 * 8 * 1.5
    ],
)
def test_zero3_by_hand(opt, par, init, cpu, gpu):
    est = ds.zero3(P, L, 8, 1, opt, par, init)
    assert (est["cpu"], est["gpu"]) == (cpu, gpu)
    assert est["largest_layer_memory"] == 4 * L


def test_zero3_cpu_is_per_node_with_the_gpus_factor():
    # two nodes: gpus_factor = 1/2 -> P * 18 * 0.5 * 1.5; without zero.Init max(4 * 8, 9) = 32 wins
    assert ds.zero3(P, L, 8, 2, True, True, True)["cpu"] == 38_488_500_000
    assert ds.zero3(P, L, 8, 2, True, True, False)["cpu"] == 136_848_000_000
    assert ds.zero3(P, L, 8, 2, False, False, True)["gpu"] == 128_000_000 + 18 * P // 16


def test_docs_printed_zero3_cold_example():
    printed = ds.printed_zero3(2851e6, 32e6, 8, 1)
    pairs = [(round(r["per CPU [GiB]"], 2), round(r["per GPU [GiB]"], 2)) for _, r in printed.iterrows()]
    assert pairs == [(71.69, 0.12), (127.45, 0.12), (63.72, 0.78), (127.45, 0.78), (1.43, 6.09), (127.45, 6.09)]
    assert printed["printed (GiB labelled GB)"].iloc[0].startswith("   71.69GB |   0.12GB | offload_param=cpu")


def test_docs_printed_zero2_example_needs_the_legacy_formula():
    legacy = ds.printed_zero2(2851e6, 8, 1, revision="legacy")
    assert [round(x, 2) for x in legacy["per GPU [GiB]"]] == [5.31, 15.93]
    assert [round(x, 2) for x in legacy["per CPU [GiB]"]] == [127.45, 127.45]
    current = ds.printed_zero2(2851e6, 8, 1)
    assert round(current["per GPU [GiB]"].iloc[1], 2) == 11.28  # what today's code computes for the same call


def test_deepspeed_vectorises_over_hardware_arrays():
    gpn = np.array([1, 2, 4, 8])
    est = ds.zero3(P, L, gpn, 1, False, False, True)
    for i, g in enumerate(gpn):
        assert est["gpu"][i] == ds.zero3(P, L, int(g), 1, False, False, True)["gpu"]


def test_compare_with_paper_side_by_side():
    df = ds.compare_with_paper(7e9, 100e6, gpus_per_node=8, nodes=1)
    row = df[(df["stage"] == 3) & (df["offload"] == "none")].iloc[0]
    assert row["paper GPU [bytes]"] == pytest.approx(16 * 7e9 / 8)
    assert row["DeepSpeed GPU [bytes]"] == 4 * 100e6 + 18 * 7e9 / 8
    assert len(df) == 5


@pytest.mark.parametrize(
    "call,needle",
    [
        (lambda: ds.zero3(1e9, 2e9, 8), "cannot exceed"),
        (lambda: ds.zero3(1e9, 1e6, 8, 1, cpu_offload=False, cpu_offload_params=True), "only together"),
        (lambda: ds.zero2(float("nan"), 8), "finite"),
        (lambda: ds.zero2(1e9, 0), "out of range"),
        (lambda: ds.zero2(1e9, 8, nodes=0), "out of range"),
        (lambda: ds.zero2(1e9, 8, revision="v0"), "not allowed"),
    ],
)
def test_deepspeed_hostile_inputs(call, needle):
    with pytest.raises(InputError, match=needle):
        call()
