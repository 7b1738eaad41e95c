"""The context- and expert-parallel rules (Megatron-LM's validate_args and MoE parallel folding), each a reason."""

import pytest

from core.errors import InputError
from core.model import presets
from core.planner.cp_ep_rules import first_reason, violations
from core.planner.layout import Layout, from_published

H100 = presets.gpu("h100-80gb")


def test_published_layouts_with_cp_and_ep_are_valid():
    ds = from_published("deepseek-v3")  # arXiv:2412.19437: 2,048 H800, PP 16, EP 64, ZeRO-1 DP, no TP
    assert (ds.t, ds.p, ds.d, ds.ep, ds.etp, ds.n_gpus, ds.precision, ds.half) == (1, 16, 128, 64, 1, 2048, "fp8",
                                                                                   "bf16")
    long = from_published("llama3-405b", which=1)  # arXiv:2407.21783 Table 4: TP 8, CP 16, PP 16 at 131,072
    assert (long.t, long.cp, long.p, long.d, long.n_gpus, long.model.seq) == (8, 16, 16, 8, 16384, 131072)
    with pytest.raises(InputError, match="published layout"):
        from_published("llama3-405b", which=2)


@pytest.mark.parametrize("kwargs,match", [
    (dict(model="llama3-8b", cp=3), "does not split into 2 x cp = 6"),
    (dict(model="llama3-8b", ep=2), "dense model"),
    (dict(model="mixtral-8x7b", ep=3, d=6), "does not divide the 8 experts"),
    (dict(model="mixtral-8x7b", ep=8, d=4, t=2), "does not divide t x d x cp = 8"),
])
def test_each_broken_rule_is_a_stated_reason(kwargs, match):
    m = presets.model(kwargs.pop("model"))
    values = dict(t=1, p=1, d=8, global_batch=48, cp=1, ep=1) | kwargs
    assert match in first_reason(m, values["t"], values["d"], values["cp"], values["ep"], 0)
    with pytest.raises(InputError, match=match):
        Layout(model=m, gpu=H100, **values)


def test_expert_tensor_parallelism_changes_what_ep_must_divide():
    m = presets.model("mixtral-8x7b")
    assert first_reason(m, 2, 4, 1, 8, 1) is None   # etp = 1: ep x 1 divides t x d x cp = 8
    assert first_reason(m, 2, 4, 1, 8, 0) is not None  # etp = t = 2: 16 does not divide 8
    masks = violations(m, [1, 2, 4], 4, 1, 8, 1)
    assert [name for name, _, _ in masks] == ["ep_ranks"] and masks[0][1].tolist() == [True, False, False]


def test_fp8_needs_fp8_tensor_cores():
    with pytest.raises(InputError, match="no FP8"):
        Layout(model=presets.model("llama3-8b"), gpu=presets.gpu("a100-80gb"), t=1, p=1, d=8, global_batch=8,
               precision="fp8")
