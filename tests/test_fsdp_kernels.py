"""llm-foundry's FSDP rows run the attention kernel and gradient path their source ran (Triton FlashAttention where
its benchmark scripts name it, no gradient-accumulation fusion), timed at the kernel's own calibrated rate; the
H100 rate is fitted on a named subset of the rows and the rest are held out."""

import numpy as np
import pytest

from core.cost import calibration, layer_ops, releases
from core.cost.collective import Fabric
from core.cost.step_input import Assumptions, Layouts
from core.model import presets
from core.planner import validation

FIT_TAG = "scripts/fit_efficiency.py fit 'llmfoundry'"


@pytest.fixture(scope="module")
def result():
    return validation.validate()


def _rows():
    return [r for r in validation.data()["rows"] if r["source"] == "llmfoundry"]


def test_triton_kernel_runs_at_its_own_rate():
    a100, h100 = calibration.record("a100-16bit"), calibration.record("h100-16bit")
    assert a100.flash("triton") == pytest.approx(0.280) and a100.flash("flash-attn-2") == pytest.approx(0.62)
    assert h100.flash("triton") == pytest.approx(0.204) and h100.flash("flash-attn-2") == pytest.approx(0.337)
    assert "fitted on the llm-foundry benchmark rows" in h100.source("triton_flash_eff")
    with pytest.raises(KeyError):
        a100.flash("xformers")
    # the attention core's time scales by the kernels' rate ratio; nothing else in the layer moves
    gpu = presets.gpu("a100-80gb")
    model = presets.custom_model({"layers": 32, "hidden": 4096, "heads": 32, "vocab": 50368, "seq": 8192,
                                  "flash": True})
    times = {}
    for kernel in calibration.FLASH_KERNELS:
        a = Assumptions(flash_kernel=kernel)
        times[kernel] = layer_ops.layer_times(model, a.rates(gpu), Layouts(micro_batch_size=2), Fabric.of(gpu, a))
    for ph in ("F", "B"):
        ratio = times["triton"][ph]["attention"] / times["flash-attn-2"][ph]["attention"]
        assert float(ratio) == pytest.approx(0.62 / 0.280)
        assert float(times["triton"][ph]["gemm"]) == float(times["flash-attn-2"][ph]["gemm"])


def test_rows_carry_the_kernel_their_source_names():
    rows = _rows()
    assert len(rows) == 74
    for r in rows:
        size, large = r["key"].split("-")[4], r["gpu"] == "h100-80gb" and r["layout"]["gpus"] >= 128
        want = "flash-attn-2" if large and r["precision"] == "bf16" and size in ("1b", "3b", "7b", "70b") \
            else "triton"
        assert r["software"]["flash_kernel"] == want, r["key"]
        assert r["software"]["grad_accum_fusion"] is False
        assert "attn_impl" in r["assumed"]["flash_attention"] and r["assumed"]["grad_accum_fusion"]


def test_the_fit_saw_only_its_named_subset():
    fit = calibration.entry("h100-16bit")["fits"]["triton_flash_eff"]
    cal = sorted(r["key"] for r in _rows() if r["role"] == "calibration")
    assert sorted(fit["rows"]) == cal and len(cal) == 20
    assert all(r.get("fitted_by", "").startswith(FIT_TAG) for r in _rows() if r["role"] == "calibration")
    assert all(r["gpu"] == "h100-80gb" and r["precision"] == "bf16" and r["key"].split("-")[4] in ("7b", "30b", "70b")
               for r in _rows() if r["role"] == "calibration")
    # the Megatron-LM records' own sets never include these rows
    for key in calibration.keys():
        assert not set(calibration.record(key).rows) & set(cal)


def test_llmfoundry_signed_mean_is_near_zero_on_calibration_and_held_out(result):
    s = result.summary()
    cal = s[f"{validation.OUTSIDE}: llmfoundry calibration"]
    held = s[f"{validation.OUTSIDE}: llmfoundry held-out"]
    assert (cal.rows, held.rows) == (20, 54)
    assert abs(cal.signed_mean_error) < 0.03 and cal.mean_abs_error < 0.06
    # before the kernels were the source's the 74 rows were -13.1 % signed, 13.3 % mean |error|
    assert -0.06 < held.signed_mean_error < 0.0 and held.mean_abs_error < 0.07
    steps = result.matched.set_index("key")
    long = steps.loc[["lf-h100-80gb-bf16-7b-s65536-g8", "lf-h100-80gb-bf16-7b-s32768-g8"], "error"]
    assert np.all(np.abs(long) < 0.055)  # the attention-bound rows: -35 % and -29 % at FlashAttention-2's rate


def test_modelled_frameworks_do_not_move(result):
    # the llm-foundry kernels leave the modelled frameworks' rows alone (these are their errors with the gathers a
    # chunk ahead and the refitted H100 record: 3.46 / 2.72 % before that change; 3.38 % calibration until Megatron-
    # Core r0.8's 70B weak-scaling row, whose micro-batch is unstated, fit micro-batch 4 only at the textbook's bytes:
    # at 2 it reads +9.6 %, not +3.3 %)
    # the rows timed as the base records (release nemo-24.07); Megatron-Bridge's dense rows, timed as their own
    # release since the release became an input, are checked in tests/test_releases.py
    steps = result.matched[(result.matched["scope"] == validation.MODELLED)
                           & (result.matched["release"] == releases.base())]
    cal = steps[steps["role"] == "calibration"]["error"].abs()
    assert len(cal) == 26 and cal.mean() == pytest.approx(0.0362, abs=5e-4)
    # NeMo 25.02's GPT3-175B row (tests/test_nemo_releases.py) apart, the other 25 at 2.51 % (2.77 % while unstated
    # micro-batch sizes were chosen by the textbook's memory: Megatron-Core r0.8's 96-GPU strong-scaling row now
    # fits micro-batch 1, not 2, counted as Megatron-LM stores it)
    held = steps[(steps["role"] == "held-out") & (steps["source"] != "nemo_perf_2502")]["error"].abs()
    assert len(held) == 25 and held.mean() == pytest.approx(0.0251, abs=5e-4)
    s = result.summary()
    assert (s["calibration"].rows, s["held-out"].rows) == (32, 33)
