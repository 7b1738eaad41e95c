"""DeepSpeed's PipelineEngine as the validation rows time it (issue 22: MT-NLG 530B and BLOOM-176B).

What the engine's source shows and the model takes from it:
- microsoft/DeepSpeed v0.5.4 (bc7778ea5, 2021-10-06) deepspeed/runtime/pipe/schedule.py, TrainSchedule: every stage
  alternates forward and backward steps, its neighbours the opposite kind in the same step, and each step first
  exchanges with one neighbour (blocking dist.send / dist.recv, deepspeed/runtime/pipe/p2p.py) what the previous
  step produced. That is 1F1B's own order and its own data dependencies, so `1f1b` with blocking sends
  (pp_overlap false) is the engine's schedule: no lock-step cost is added.
- microsoft/DeepSpeed 56c522386 (2022-04-19, #1801) deepspeed/runtime/bf16_optimizer.py update_hp_grads, called
  after every micro-batch's backward from deepspeed/runtime/pipe/engine.py: under bf16 the weight gradients are
  added into fp32 buffers in a separate pass, the model's grad_accum_fusion false (BLOOM's row).
"""

import copy

import pytest

from core.cost import calibration
from core.model import presets
from core.pipeline.schedules.flush import one_f_one_b
from core.pipeline.schedules.ir import B, F
from core.planner import validation


def _row(key):
    return next(r for r in validation.data()["rows"] if r["key"] == key)


def _deepspeed_steps(p: int, m: int, s: int) -> list[tuple[int, int, int]]:
    """(step, kind, micro-batch) of stage s under TrainSchedule: its 2 (m + p - 1) steps alternate forward and
    backward, even stages forward on even steps; stage s forwards micro-batch i at step 2i + s and runs the backward
    of j at step 2j + 2p - 1 - s (the step-to-micro-batch map of schedule.py at v0.5.4, restated)."""
    return sorted([(2 * i + s, F, i) for i in range(m)] + [(2 * j + 2 * p - 1 - s, B, j) for j in range(m)])


@pytest.mark.parametrize("p, m", [(2, 1), (2, 6), (4, 3), (4, 8), (8, 16), (35, 240)])
def test_deepspeeds_train_schedule_is_1f1b_with_its_own_data_dependencies(p, m):
    steps = {s: _deepspeed_steps(p, m, s) for s in range(p)}
    ours = one_f_one_b(p, m)
    for s in range(p):
        assert [(k, i) for _, k, i in steps[s]] == [(int(k), int(i)) for k, i, *_ in ours.devices[s]], s
        # forwards on the steps of the stage's parity, backwards on the others: neighbours run opposite kinds
        assert all(step % 2 == (s if k == F else s + 1) % 2 for step, k, _ in steps[s])
    when = {(s, k, i): step for s in range(p) for step, k, i in steps[s]}
    for s in range(p):
        for i in range(m):
            # what a stage computes at step k arrives in step k's exchange, from its neighbour's step k - 1 or earlier
            if s > 0:
                assert when[(s - 1, F, i)] <= when[(s, F, i)] - 1
            if s < p - 1:
                assert when[(s + 1, B, i)] <= when[(s, B, i)] - 1
    # the steps run the pipeline's 2 (m + p - 1) slots, each stage one op per step at most
    assert max(step for s in range(p) for step, _, _ in steps[s]) == 2 * (m + p - 1) - 1
    assert all(len({step for step, _, _ in steps[s]}) == 2 * m for s in range(p))


def test_bloom_times_deepspeeds_separate_fp32_gradient_pass():
    row = _row("bloom-176b-384")
    assert row["software"]["grad_accum_fusion"] is False and "update_hp_grads" in row["assumed"]["grad_accum_fusion"]
    # Its split counts the embeddings as layers (ends_in_split): 5 layers on each end stage, 6 on the others, and
    # the row reads -15.5 % (88.5 s against 104.7 s published; -2.5 % when the last stage held 6 and the output)
    assert row["software"]["ends_in_split"] is True
    assert validation.step_row(row)["error"] == pytest.approx(-0.155, abs=0.003)
    even = {"ends_in_split": False}  # the last stage the busiest, so the pass is counted on one stage's weights
    ours = validation.step_row(row, even)
    fused = copy.deepcopy(row)
    fused["software"]["grad_accum_fusion"] = True
    before = validation.step_row(fused, even)
    assert ours["error"] == pytest.approx(-0.025, abs=0.003)  # 102.1 s against 104.7 s published
    assert before["error"] == pytest.approx(-0.073, abs=0.003)  # with Megatron's fusion
    # by hand: every micro-batch reads 2 + 4 and writes 4 bytes per weight of the busiest (last) stage: 6 layers of
    # 12 h^2 / t weights and the output layer's V h / t, at the A100's HBM rate x its calibrated mem_eff
    h, t, vocab, m = 14336, 4, 250880, 2048 // 8 // 2
    weights = 6 * 12 * h * h / t + vocab * h / t
    gpu = presets.gpu("a100-80gb")
    rate = gpu.mem_bw_gbs * 1e9 * calibration.record("a100-16bit").mem_eff
    assert ours["memory_bound"] - before["memory_bound"] == pytest.approx(m * weights * 10.0 / rate, rel=1e-3)


def test_mtnlg_gap_is_not_explained_by_the_engine():
    # Issue 22 asks 15 %: no sourced DeepSpeed cost found closes it (the report lists what each hypothesis gives);
    # the rows stay as they were, 16-19 % fast, with the drift across the three under 5 points.
    errors = [validation.step_row(_row(f"mtnlg-530b-{g}"))["error"] for g in (2240, 2800, 3360)]
    assert errors == pytest.approx([-0.156, -0.165, -0.188], abs=0.002)
    assert max(errors) - min(errors) < 0.05
