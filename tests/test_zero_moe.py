"""The ZeRO page and `python -m core zero` with routed experts: experts sharded over ep, their ZeRO group N_d / ep.

Sources: Megatron-LM's MoE parallel folding (expert-dp = t x d x cp / (ep x etp), here etp = t); the ZeRO paper
for the per-component bytes (2 + 2 + K); Mistral AI for Mixtral 8x7B's 46.7B total / 12.9B active.
"""

import pytest
from streamlit.testing.v1 import AppTest

from core.cli import main
from core.errors import InputError
from core.params.memory import ZeroParams
from core.views import zero as zv
from tests.conftest import ROOT
from ui.zero import figures as fz

MIXTRAL = dict(params=46_700_000_000, expert_params=zv.preset_expert_params("mixtral-8x7b"), t=1, p=4, nd=64,
               ep=8, gpu_mem=80.0)


def test_experts_are_divided_by_ep_and_sharded_over_nd_over_ep():
    rep = zv.build(ZeroParams(**MIXTRAL))
    experts = MIXTRAL["expert_params"]
    assert rep.expert_rank == experts / (4 * 8)
    assert rep.psi_rank == (46.7e9 - experts) / 4
    for key, stage_bytes in (("dp", 16), ("zero1", 2 + 2 + 12 / 8), ("zero2", 2 + (2 + 12) / 8), ("zero3", 16 / 8)):
        row = rep.stages[key]
        assert row["expert_total"] == pytest.approx(rep.expert_rank * stage_bytes)
        dense = row["params"] + row["grads"] + row["optimizer"]
        assert row["total"] == pytest.approx(dense + row["expert_total"])


def test_smallest_nd_is_a_multiple_of_ep_that_fits():
    q = ZeroParams(**{**MIXTRAL, "gpu_mem": 24.0, "p": 1})
    for key in ("zero1", "zero2", "zero3"):
        need = zv.build(q).stages[key]["smallest_nd"]
        if need == float("inf"):
            continue
        assert need % 8 == 0
        assert zv.build(ZeroParams(**{**MIXTRAL, "gpu_mem": 24.0, "p": 1, "nd": int(need)})).stages[key]["fits"]
        if need > 8:
            assert not zv.build(ZeroParams(**{**MIXTRAL, "gpu_mem": 24.0, "p": 1, "nd": int(need) - 8})
                                ).stages[key]["fits"]


@pytest.mark.parametrize("change,match", [(dict(ep=3), "must divide N_d"), (dict(expert_params=0), "needs routed"),
                                          (dict(expert_params=46_700_000_000), "must be less")])
def test_bad_expert_inputs_are_clear_errors(change, match):
    with pytest.raises(InputError, match=match):
        zv.build(ZeroParams(**{**MIXTRAL, **change}))


def test_chart_draws_expert_states_hatched_and_the_table_lists_them():
    view = zv.zero_view(ZeroParams(**MIXTRAL), zv.preset_shape("mixtral-8x7b"), None)
    fig = fz.memory_bars(view.bars, "GB", view.gpu_bytes, view.report.usable)
    names = [tr.name for tr in fig.data]
    assert {"expert parameters", "expert gradients", "expert optimizer state"} <= set(names)
    hatched = [tr for tr in fig.data if tr.name.startswith("expert")]
    assert all(tr.marker.pattern.shape == "/" for tr in hatched)
    table = fz.stage_table(view.bars, view.report.stages, "GB")
    assert "expert states [GB]" in table.columns
    rep = view.report  # the curve against N_d carries the experts: plain DP holds 16 bytes of each parameter
    assert list(view.curve["dp [bytes]"]) == pytest.approx([16 * (rep.psi_rank + rep.expert_rank)] * len(view.curve))
    assert "Mixture of experts" in " ".join(view.notes)


def test_preset_note_gives_total_and_active():
    note = zv.preset_moe_note("deepseek-v3")
    assert "671.0B parameters in total" in note and "37.6B active" in note and "8 of 256" in note
    assert zv.preset_moe_note("llama3-70b") == ""


def test_zero_cli_adds_an_experts_column(capsys):
    assert main(["zero", "--params", "46.7e9", "--expert-params", "45.09e9", "--ep", "8", "--nd", "64", "-p", "4"]) == 0
    out = capsys.readouterr().out
    assert "experts GB" in out and "ZeRO over N_d / ep = 8 ranks" in out
    assert main(["zero", "--params", "46.7e9", "--expert-params", "45.09e9", "--ep", "3"]) == 2


def test_page_with_a_moe_preset_shows_total_active_and_expert_bars():
    at = AppTest.from_file(str(ROOT / "pages" / "zero.py"), default_timeout=30)
    at.query_params.update({"model": "mixtral-8x7b", "ep": "8", "p": "4"})
    at.run()
    assert not at.exception, at.exception
    assert any("46.7B parameters in total, 12.9B active" in i.value for i in at.info)
    assert not at.error
