"""The PyTorch accounting's two attention switches. `repeat_kv`: whether the attention widens K and V to every query
head before the kernel keeps them (torchtitan until 2026-01-27, torchtune) or the kernel takes them at their own width
(today's torchtitan, FlexAttention, Transformer Engine). `sac_attention`: whether the per-op selective recompute saves
the attention's output and log-sum-exp, or runs the attention again in the backward (torchtitan on Blackwell between
3b85aa31f and b39377f9f, 2025). The layer's measured bytes in both K/V widths: tests/test_engine_saved_bytes.py."""

import dataclasses

import pytest

from core.memory import activations
from core.params.planner import PlannerParams
from core.planner import memory_validation
from core.planner import plan as planner

H, HEADS, KV, F = 4096, 32, 8, 14336  # Llama 3 8B's block


def _layer(recompute: str, compiled: bool = False, **switches) -> float:
    shape = activations.Shape(8192, 1, H, HEADS, flash=True, kv_heads=KV, ffn=F, mlp="swiglu", norm="rmsnorm",
                              dropout=False, rope=True, accounting="torch", recompute=recompute, compiled=compiled,
                              **switches)
    return float(shape.per_layer())


@pytest.mark.parametrize("compiled", [False, True])
def test_per_op_recompute_without_the_attention_keeps_neither_its_output_nor_its_statistics(compiled):
    tokens = 8192
    saved, rerun = _layer("selective", compiled), _layer("selective", compiled, sac_attention=False)
    assert saved - rerun == tokens * (2 * H + 4 * HEADS)  # bf16 output at the query width, fp32 log-sum-exp per head
    for mode in ("none", "full"):  # no policy to miss the kernel: unchanged
        assert _layer(mode, compiled) == _layer(mode, compiled, sac_attention=False)


@pytest.mark.parametrize("compiled", [False, True])
def test_widened_k_and_v_are_kept_only_where_the_attentions_inputs_are(compiled):
    tokens, kv_width = 8192, H // HEADS * KV
    assert _layer("none", compiled, repeat_kv=True) - _layer("none", compiled) == tokens * 2 * 2 * (H - kv_width)
    for mode in ("selective", "full"):  # per-op and full recompute keep neither K nor V
        assert _layer(mode, compiled, repeat_kv=True) == _layer(mode, compiled)


def test_a_plan_without_the_saved_attention_is_lighter_and_runs_the_attention_again():
    q = PlannerParams(model="llama3-70b", gpus=64, gpu="h100-80gb", batch=64, framework="torch", fix_t=8, fix_p=1,
                      fix_d=8, recompute="selective", mb_sizes=(1.0,))
    saved, rerun = (planner.plan(dataclasses.replace(q, sac_attention=s)).frame.iloc[0] for s in (True, False))
    layers, tokens, per_rank = 80, 8192, 8192 // 8  # the query width on one of 8 TP ranks
    assert saved["activation_bytes"] - rerun["activation_bytes"] == pytest.approx(
        layers * tokens * (2 * per_rank + 4 * 64 // 8), rel=1e-9)
    assert rerun["attention_s"] > saved["attention_s"]  # the attention forward once more per layer
    assert rerun["step_time_s"] > saved["step_time_s"]
    assert rerun["gemm_s"] == pytest.approx(saved["gemm_s"])


def test_the_b200_rows_count_the_recomputed_attention_and_say_why():
    rows = {r["key"]: r for r in memory_validation.data()["rows"]}
    for key in ("tt25-b200-bf16", "tt25-b200-fp8-tensorwise"):
        row = rows[key]
        assert row["software"]["sac_attention"] is False and "b39377f9f" in row["assumed"]["sac_attention"]
        got = memory_validation.memory_row(row)
        assert got["error"] == pytest.approx(0.09, abs=0.005)  # +15.4 % when the attention was counted as kept
        saved = memory_validation.memory_row({**row, "software": {**row["software"], "sac_attention": True}})
        assert saved["error"] == pytest.approx(0.153, abs=0.005)


def test_torchtitan_and_torchtune_rows_widen_k_and_v_as_their_code_did():
    for row in memory_validation.data()["rows"]:
        if row["source"].startswith(("torchtitan", "torchtune")):
            assert row["software"]["repeat_kv"] is True, row["key"]


def test_the_config_readers_say_which_width_their_attention_keeps():
    """A torchtitan TOML predates the Python registry (2026-02-23) and so ran the widening attention; torchtune
    expands K and V; NeMo Automodel's attention backends take them at their own width."""
    from pathlib import Path

    from core.configs.check import check

    data = Path(__file__).parent / "data" / "configs"
    cases = (("torchtitan_llama3_8b.toml", {"gpus": "8"}, "true", "assumed"),
             ("torchtune_llama3_1_8b_full.yaml", {"gpus": "8", "seq": "4096"}, "true", "assumed"),
             ("automodel_qwen3_moe_30b_te_deepep.yaml", {}, "false", "read"))
    for name, given, widened, kind in cases:
        done = check([(name, (data / name).read_text())], given)
        assert done.reading.raw["repeat_kv"] == widened, name
        said = {e.name: e.kind for e in done.reading.entries}
        assert said.get("repeat_kv" if kind == "assumed" else "model.backend.attn") == kind, name


@pytest.mark.parametrize("recompute,switch", [("none", {"repeat_kv": True}), ("selective", {"sac_attention": False})])
def test_the_zero_pages_link_carries_the_switches_and_shows_the_rows_number(recompute, switch):
    """One number: a PyTorch row counted with a switch set opens the ZeRO page on the same bytes per GPU."""
    from core.views import planner as pv
    from core.views import zero as zv
    from tests.test_page_zero import _defaults

    q = PlannerParams(model="llama3-8b", seq=4096, gpus=8, gpu="h100-80gb", batch=16, framework="torch", fix_t=1,
                      fix_p=1, fix_d=8, zero="3", recompute=recompute, mb_sizes=(1.0,), reshard="on", **switch)
    result = planner.plan(q)
    row = result.feasible.iloc[0]
    link = pv.zero_params(row, pv.zero_base(result))
    assert all(link[k] == v for k, v in switch.items())
    view = zv.zero_view(*zv.from_inputs({**_defaults(), **link, "act": True}))
    assert view.bars[3].total == pytest.approx(float(row["memory_bytes"]), rel=1e-9)
    plain = planner.plan(dataclasses.replace(q, repeat_kv=False, sac_attention=True)).feasible.iloc[0]
    assert plain["memory_bytes"] != row["memory_bytes"]  # the switch changed the number the page shows
