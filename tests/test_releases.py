"""The software release as an input (core.cost.releases, assets/releases.json): each release with a vendor table is
fitted on that table alone, the others time with the nearest earlier fit, and the rows of every release are
reported apart, including each fitted release's rows timed with the other fit (fit on one, predict the other)."""

import pytest

from core.cost import calibration, releases
from core.cost.step_input import Assumptions
from core.errors import InputError
from core.model import presets
from core.params.planner import PLAN, PlannerParams
from core.planner import plan as planner
from core.planner import validation
from scripts import fit_efficiency

H100, A100 = presets.gpu("h100-80gb"), presets.gpu("a100-80gb")
FITTED = ("bridge-25.09", "bridge-26.04")


@pytest.fixture(scope="module")
def result():
    return validation.validate()


def test_the_default_is_the_newest_release_and_the_base_replaces_nothing():
    assert PLAN["release"].default == releases.keys()[-1] == "bridge-26.06"
    assert releases.fitted_by("bridge-26.06") == "bridge-26.04"
    base = Assumptions(release=releases.base()).rates(H100, fp8=True)
    assert base.linear[1] == calibration.record("h100-fp8").gemm_eff
    assert base.flash_eff == calibration.record("h100-16bit").flash_eff
    assert releases.values(releases.base()) == {}


@pytest.mark.parametrize("key", FITTED)
def test_a_fitted_release_replaces_only_its_two_kernels(key):
    stored = releases.entry(key)["values"]
    mine = Assumptions(release=key).rates(H100, fp8=True)
    base = Assumptions(release=releases.base()).rates(H100, fp8=True)
    assert mine.linear[1] == stored["h100-fp8:gemm_eff"] and mine.flash_eff == stored["h100-16bit:flash_eff"]
    assert (mine.gemm_eff, mine.mem_eff, mine.gemm_k0, mine.linear[2]) == (base.gemm_eff, base.mem_eff,
                                                                           base.gemm_k0, base.linear[2])
    bounds = releases.entry(key)["fit"]["bounds"]
    assert bounds["gemm_eff"][0] <= stored["h100-fp8:gemm_eff"] <= bounds["gemm_eff"][1]
    assert bounds["flash_eff"][0] <= stored["h100-16bit:flash_eff"] <= bounds["flash_eff"][1]
    # --explain says where the replaced numbers come from
    rows = {r["key"]: r for r in Assumptions(release=key).rows(H100, fp8=True)}
    for name in ("flash_eff", "fp8_gemm_eff"):
        assert f"release {key}'s table" in rows[name]["why"]
    assert rows["flash_eff"]["label"].endswith(f"(release {key}'s fused attention)")
    base_rows = {r["key"]: r for r in Assumptions(release=releases.base()).rows(H100, fp8=True)}
    assert base_rows["flash_eff"]["label"].endswith("(flash-attn-2)")


def test_other_gpu_families_time_as_the_base_records():
    base = Assumptions(release=releases.base()).rates(A100, fp8=True)
    for key in releases.keys():
        r = Assumptions(release=key).rates(A100, fp8=True)
        assert (r.gemm_eff, r.mem_eff, r.flash_eff, r.linear) == (base.gemm_eff, base.mem_eff, base.flash_eff,
                                                                   base.linear)
    assert "no fit for the A100 family" in releases.timing_note("bridge-26.06", "a100")


def test_the_stored_fits_are_what_the_script_finds():
    for key in FITTED:
        values, _ = fit_efficiency.fit(key)
        assert values == releases.entry(key)["values"], f"run python scripts/fit_efficiency.py --fit {key} --write"
        assert releases.rows(key) == [r["key"] for r in fit_efficiency.group_rows(key)]


def test_a_release_without_a_table_is_held_out_of_every_fit():
    fitted_rows = {k for key in FITTED for k in releases.rows(key)}
    for row in validation.data()["rows"]:
        rel = validation.release(row)
        if releases.fitted_by(rel) != rel:
            assert row["key"] not in fitted_rows and row["role"] == "held-out", row["key"]
        if row["key"] in fitted_rows:
            assert row["role"] == "calibration" and row["fitted_by"] == f"scripts/fit_efficiency.py fit '{rel}'"


def test_each_release_is_reported_apart(result):
    summary = result.summary()
    held = {k: s for k, s in summary.items() if k.startswith("release ") and "held out" in k}
    assert set(held) == {"release nemo-25.02: held out of nemo-24.07's fit",
                         "release bridge-25.11: held out of bridge-25.09's fit",
                         "release bridge-26.02: held out of bridge-25.09's fit",
                         "release bridge-26.06: held out of bridge-26.04's fit"}
    # the dense rows of the releases a fit did not see (issue 36: mean <= 5 %, max <= 10 %)
    rows = [s for k, s in held.items() if "bridge" in k]
    assert sum(s.rows for s in rows) == 7
    assert max(s.max_abs_error for s in rows) < 0.08
    assert sum(s.mean_abs_error * s.rows for s in rows) / 7 == pytest.approx(0.047, abs=0.005)
    assert summary["release bridge-25.11: held out of bridge-25.09's fit"].signed_mean_error == pytest.approx(
        -0.003, abs=0.005)


def test_fit_on_one_release_predict_the_other():
    # the same layouts ran 5-6 % faster in 26.04 than 25.09's fit says, and the reverse: what moved between
    # the releases is what the `release` input carries
    cross = validation.cross_release()
    assert cross["release bridge-25.09's rows timed as bridge-26.04"].signed_mean_error == pytest.approx(-0.048,
                                                                                                         abs=0.005)
    assert cross["release bridge-26.04's rows timed as bridge-25.09"].signed_mean_error == pytest.approx(0.062,
                                                                                                         abs=0.005)


def test_the_release_is_an_input_with_a_clear_refusal():
    with pytest.raises(InputError, match="release"):
        PlannerParams(release="nemo-99.99")
    assert PlannerParams(release="BRIDGE-25.09").release == "bridge-25.09"


def test_plans_and_exports_say_which_release_they_assume():
    q = PlannerParams(model="llama3-8b", gpu="h100-80gb", gpus=8, batch=128, precision="fp8", fix_t=1, fix_p=1)
    result = planner.plan(q)
    fast = planner.plan(PlannerParams(**{**q.__dict__, "release": releases.base()}))
    assert result.best()["step_time_s"] < 0.95 * fast.best()["step_time_s"]  # newer kernels, faster step
    written = [result.export(kind) for kind in ("megatron", "deepspeed", "fsdp2")]
    assert sum(not e.refused for e in written) >= 2
    for e in written:  # an export that refuses the layout times nothing
        assert any(n.startswith("Timed as release bridge-26.06") for n in e.notes) != bool(e.refused)
    from core.planner import recommend
    assert any("Timed as release bridge-26.06" in line for line in recommend.recommend(result).trust)


def test_a_kernel_measured_release_cites_its_rate_and_fits_nothing():
    # The MoE ModelZoo's H100 image (PyTorch 25.06, Transformer Engine 2.6): TE prefers cuDNN's fused attention on
    # Hopper; its rate is cuDNN's measured 595 TFLOP/s forward and 516 backward (FlashAttention-3 paper, head size
    # 128, 16K tokens) combined as the step counts them (backward 2.5 x the forward), over the 989 TFLOP/s BF16 peak
    key = "pytorch-25.06"
    assert releases.measured(key) and not releases.rows(key) and releases.fitted_by(key) == key
    assert not any(releases.measured(k) for k in FITTED + (releases.base(), "bridge-26.06"))
    combined = 3.5 / (1 / 595 + 2.5 / 516) / H100.peak_flops * 1e12
    assert releases.values(key) == {"h100-16bit": {"flash_eff": pytest.approx(combined, abs=5e-4)}}
    assert Assumptions(release=key).rates(H100, fp8=False).flash_eff == pytest.approx(0.542)
    assert "not fitted: a kernel measurement" in releases.note(key)
    assert "a kernel measurement (not fitted" in releases.timing_note(key, "h100")
    # none of its rows fits its value; all are held out but the pair the EP overlap's cost is fitted on
    rows = [r for r in validation.data()["rows"] if validation.release(r) == key]
    assert len(rows) == 9 and {r["role"] for r in rows if "fitted_by" not in r} == {"held-out"}
