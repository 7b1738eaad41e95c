"""The planner's inputs: one source of truth for the cluster, every assumption named and justified."""

import pytest

from core.cost.step_time import Assumptions
from core.errors import InputError
from core.params.memory import ZERO
from core.params.model import AUTO_HEADS, CLUSTER, MODEL
from core.params.planner import ASSUMPTIONS, PLAN, SEARCH, WHY, PlannerParams

# The same quantity under the planner's key (core.params.model) and the ZeRO page's key (core.params.memory).
SHARED = {"gpu_mem": "gpu_mem", "gpn": "gpus_per_node", "inter_bw": "bw", "gpus": "gpus"}


def test_planner_reuses_the_model_and_cluster_specs():
    for key in ("gpus", "batch", "eff"):
        assert PLAN[key] is CLUSTER[key]
    # GPU numbers: CLUSTER's range and meaning, with 0 = the chosen preset's value (any preset takes overrides).
    for key in ("gpu_mem", "gpu_tflops", "gpn", "intra_bw", "inter_bw", "gpu_bw", "gpu_sms"):
        assert PLAN[key].hi == CLUSTER[key].hi and PLAN[key].default == 0 and PLAN[key].lo == 0
        assert PLAN[key].help.startswith(CLUSTER[key].help)
    for key in ("layers", "hidden", "ffn", "vocab", "params", "mlp", "tied", "experts",
                "top_k", "shared_experts", "expert_ffn", "dense_layers"):
        assert PLAN[key] is MODEL[key]
    for key in ("heads", "kv_heads"):  # 0 = derived (hidden / 128, and kv = heads), otherwise MODEL's range
        assert PLAN[key] is AUTO_HEADS[key] and PLAN[key].hi == MODEL[key].hi and PLAN[key].default == 0
    # The planner's seq also serves presets (0 = the preset's own length), within MODEL's range otherwise.
    assert PLAN["seq"].hi == MODEL["seq"].hi and PLAN["seq"].default == 0
    assert PLAN["optimizer"] is ZERO["optimizer"] and PLAN["k"] is ZERO["k"]


@pytest.mark.parametrize("planner_key,zero_key", SHARED.items())
def test_every_planner_cluster_value_is_a_valid_zero_page_value(planner_key, zero_key):
    mine, theirs = CLUSTER[planner_key], ZERO[zero_key]
    assert theirs.lo <= mine.lo and mine.hi <= theirs.hi


def test_every_assumption_has_a_default_and_a_justification():
    a = Assumptions()
    rows = a.rows()
    assert [r["key"] for r in rows] == list(ASSUMPTIONS)
    for r in rows:
        assert r["value"] == ASSUMPTIONS[r["key"]].default
        assert len(r["why"]) > 40 and r["why"].endswith(".")
    assert rows[0]["why"] == WHY["eff"] and "calibrated" in rows[0]["why"] and "0.6" in rows[0]["why"]
    with pytest.raises(InputError):
        Assumptions(tp_overlap=1.5)


def test_with_a_gpu_the_assumptions_list_the_resolved_efficiency_parameters():
    from core.cost import calibration
    from core.model import presets

    fitted = calibration.for_family("a100", "16-bit")
    rows = {r["key"]: r for r in Assumptions().rows(presets.gpu("a100-80gb"))}
    assert rows["gemm_eff"]["value"] == fitted.gemm_eff and rows["mem_eff"]["value"] == fitted.mem_eff
    assert rows["gemm_k0"]["value"] == fitted.gemm_k0 and "eff" not in rows
    assert rows["calibration"]["value"] == "a100-16bit"
    assert "fitted on" in rows["gemm_eff"]["why"] and rows["tile"]["value"] == "256 x 128"
    overridden = {r["key"]: r for r in Assumptions(eff=0.5).rows(presets.gpu("a100-80gb"))}
    assert overridden["gemm_eff"]["value"] == 0.5  # an old URL's eff=0.5 still means something: the GEMM fraction


def test_search_dimensions_are_all_or_pinned():
    q = PlannerParams()
    assert q.searched("zero") == (0, 1, 2, 3) and q.searched("sp") == (False, True)
    assert q.searched("schedule") == ("1f1b", "interleaved", "zb-h1")
    assert q.searched("recompute") == ("none", "selective", "full") and q.searched("offload") == ("none",)
    pinned = PlannerParams.from_strings({"zero": "2", "sp": "off", "schedule": "zbv", "recompute": "full",
                                         "offload": "all", "mb_sizes": "4, 1,4"})
    assert pinned.searched("zero") == (2,) and pinned.searched("sp") == (False,)
    assert pinned.searched("offload") == ("none", "optimizer", "optimizer+params")
    assert pinned.micro_batch_sizes == (1, 4)
    assert set(SEARCH) <= set(PLAN)


def test_url_values_are_checked_leniently():
    q, notices = PlannerParams.from_url({"gpus": "65537", "model": "<b>x</b>", "batch": "2048", "fix_t": "8"})
    assert (q.gpus, q.model, q.batch, q.fix_t) == (1024, "gpt3-175b", 2048, 8)
    assert len(notices) == 2 and all("default" in n for n in notices)
    with pytest.raises(InputError):
        PlannerParams.from_strings({"schedule": "pipedream"})  # asynchronous: not a planner schedule
