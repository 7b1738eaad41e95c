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
- What no cost in the engine's source closes: Megatron-DeepSpeed runs its compute at 0.844 of the rates Megatron-LM's
  runs calibrate (compute_stack megatron-deepspeed), fitted on BigScience's Jean Zay benchmarks and held out on the
  BLOOM run and on MT-NLG 530B, another cluster.
"""

import copy

import pytest

from core.cost import calibration
from core.cost.step_input import Assumptions
from core.model import presets
from core.params.catalog import document
from core.params.planner import ASSUMPTIONS
from core.pipeline.schedules.flush import one_f_one_b
from core.pipeline.schedules.ir import B, F
from core.planner import validation
from scripts import fit_efficiency


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
    # Its split counts the embeddings as layers (ends_in_split): 5 layers on each end stage, 6 on the others. At
    # Megatron-LM's pace on a DGX A100's network the row read -15.5 %; Jean Zay's 4 x 100 Gb/s Omni-Path per node
    # (6.25 GB/s per GPU) makes it -12.7 %, and Megatron-DeepSpeed's fitted pace +2.4 % (107.2 s against 104.7 s)
    assert row["software"]["ends_in_split"] is True and row["software"]["inter_bw"] == 6.25
    assert validation.step_row(row, {"compute_stack": "megatron-lm", "inter_bw": 0.0})["error"] == pytest.approx(
        -0.155, abs=0.003)
    assert validation.step_row(row, {"compute_stack": "megatron-lm"})["error"] == pytest.approx(-0.127, abs=0.003)
    assert validation.step_row(row)["error"] == pytest.approx(0.024, abs=0.003)
    even = {"ends_in_split": False}  # the last stage the busiest, so the pass is counted on one stage's weights
    ours = validation.step_row(row, even)
    fused = copy.deepcopy(row)
    fused["software"]["grad_accum_fusion"] = True
    before = validation.step_row(fused, even)
    assert ours["error"] == pytest.approx(0.179, abs=0.003)
    assert before["error"] == pytest.approx(0.121, abs=0.003)  # with Megatron's fusion
    # by hand: every micro-batch reads 2 + 4 and writes 4 bytes per weight of the busiest (last) stage: 6 layers of
    # 12 h^2 / t weights and the output layer's V h / t, at the A100's HBM rate x its calibrated mem_eff x the
    # software's share
    h, t, vocab, m = 14336, 4, 250880, 2048 // 8 // 2
    weights = 6 * 12 * h * h / t + vocab * h / t
    gpu = presets.gpu("a100-80gb")
    share = ASSUMPTIONS["megatron_deepspeed_share"].default
    rate = gpu.mem_bw_gbs * 1e9 * calibration.record("a100-16bit").mem_eff * share
    assert ours["memory_bound"] - before["memory_bound"] == pytest.approx(m * weights * 10.0 / rate, rel=1e-3)


def test_mtnlg_gap_is_megatron_deepspeeds_pace():
    # Issue 22 asks 15 %. At Megatron-LM's pace the three rows read 16-19 % fast, and no sourced cost of the engine
    # closes that (the rows' notes list what each hypothesis gives). At Megatron-DeepSpeed's pace, fitted on another
    # cluster and model (BigScience's Jean Zay benchmarks), they read -1.4 / -2.5 / -5.1 %, drift under 5 points.
    keys = [f"mtnlg-530b-{g}" for g in (2240, 2800, 3360)]
    assert all(_row(k)["software"]["compute_stack"] == "megatron-deepspeed" for k in keys)
    megatron = [validation.step_row(_row(k), {"compute_stack": "megatron-lm"})["error"] for k in keys]
    assert megatron == pytest.approx([-0.156, -0.165, -0.188], abs=0.002)
    errors = [validation.step_row(_row(k))["error"] for k in keys]
    assert errors == pytest.approx([-0.014, -0.025, -0.051], abs=0.002)
    assert max(errors) - min(errors) < 0.05


def test_megatron_deepspeeds_pace_is_fitted_on_the_jean_zay_benchmarks_only():
    # scripts/fit_efficiency.py fit 'megatron_deepspeed': one share, on the twelve Jean Zay rows whose `fitted_by`
    # names it; the BLOOM model's own 70-layer runs, the BLOOM run and MT-NLG are held out
    fit = document("efficiency.json")["assumption_fits"]["megatron_deepspeed_share"]
    assert fit["value"] == 0.844 and ASSUMPTIONS["megatron_deepspeed_share"].default == 0.844
    assert Assumptions().compute_share == 1.0  # Megatron-LM's pace unless the stack is chosen
    assert Assumptions(compute_stack="megatron-deepspeed").compute_share == 0.844
    rows = validation.data()["rows"]
    tagged = sorted(r["key"] for r in rows if r.get("fitted_by") == fit["fitted_by"])
    assert sorted(fit["rows"]) == tagged and len(tagged) == 12
    assert all(r["role"] == "calibration" and r["source"] == "bigscience_jz" for r in rows if r["key"] in tagged)
    held = [r for r in rows if r["source"] == "bigscience_jz" and r["role"] == "held-out"]
    assert len(held) == 4 and all(r["model"]["layers"] == 70 for r in held)
    assert fit["held_out"] == pytest.approx({"mtnlg-530b-2240": -0.014, "mtnlg-530b-2800": -0.025,
                                             "mtnlg-530b-3360": -0.051, "bloom-176b-384": 0.024}, abs=0.002)
    assert fit["summary"]["calibration"]["signed_mean_error"] == pytest.approx(0.004, abs=0.002)
    # the share scales every compute rate, and the assumption rows say so
    a100 = presets.gpu("a100-80gb")
    plain, slow = Assumptions().rates(a100), Assumptions(compute_stack="megatron-deepspeed").rates(a100)
    for name in ("gemm_eff", "mem_eff", "flash_eff", "linear_eff"):
        assert getattr(slow, name) == pytest.approx(0.844 * getattr(plain, name))
    assert "x 0.844, the training software's share" in {r["key"]: r["why"] for r in slow.rows(a100)}["gemm_eff"]
    # refitting gives the stored value
    values, _ = fit_efficiency.fit("megatron_deepspeed")
    assert values == {"megatron_deepspeed_share": 0.844}


def test_a_deepspeed_pipeline_plan_says_what_pace_its_engine_ran_at():
    # `--framework deepspeed` plans DeepSpeed's PipelineEngine; at the default (Megatron-LM's) pace the trust section
    # names the measured pace and the switch, which then times the plan at it (every step slower, nothing said)
    from core.params.planner import PlannerParams
    from core.planner.plan import plan
    from core.planner.recommend import recommend

    q = PlannerParams(model="bloom-176b", gpus=384, gpu="a100-80gb", batch=2048, framework="deepspeed", fix_p=6)
    fast = recommend(plan(q))
    said = [x for x in fast.trust if x.startswith("This plan runs DeepSpeed")]
    assert len(said) == 1 and "at 0.844 of it: compute_stack megatron-deepspeed" in said[0]
    slow_q = PlannerParams(**{**q.__dict__, "compute_stack": "megatron-deepspeed"})
    slow = recommend(plan(slow_q))
    assert not [x for x in slow.trust if x.startswith("This plan runs DeepSpeed")]
    assert plan(slow_q).best()["step_time_s"] > 1.1 * plan(q).best()["step_time_s"]
    megatron = recommend(plan(PlannerParams(**{**q.__dict__, "framework": "megatron"})))
    assert not [x for x in megatron.trust if x.startswith("This plan runs DeepSpeed")]
