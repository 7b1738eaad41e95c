"""The Planner page with MoE and long-context questions (issue 12): the new dimensions on screen, total against
active parameters, links that carry cp and ep to the ZeRO page. Layouts: DeepSeek-V3 (arXiv:2412.19437) and
Llama 3 405B's 128K stage (arXiv:2407.21783, Table 4)."""

from urllib.parse import parse_qsl, urlsplit

from streamlit.testing.v1 import AppTest

from core.params.planner import PlannerParams
from tests.conftest import ROOT
from ui.planner import cache as cp

APP = str(ROOT / "app.py")
DEEPSEEK = {"model": "deepseek-v3", "gpu": "h800-80gb", "gpus": "2048", "batch": "15360", "fix_t": "1",
            "fix_p": "16", "fix_ep": "64", "fix_etp": "1", "zero": "1", "schedule": "1f1b", "mb_sizes": "1",
            "precision": "fp8", "recompute": "full"}


def run(query):
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/planner.py")
    at.query_params.update(query)
    return at.run()


def test_deepseek_v3_on_the_planner_page():
    at = run(DEEPSEEK)
    assert not at.exception and not at.error
    assert any("671.0B parameters, 37.6B active per token" in c.value for c in at.caption)
    assert {m.label: m.value for m in at.metric}["Layout t x p x d"] == "1 x 16 x 128 x ep=64"
    table = at.dataframe[0].value
    assert list(table["ep"]) == [64] and list(table["cp"]) == [1]


def test_links_carry_ep_and_cp_to_the_zero_page():
    q = PlannerParams.from_url(DEEPSEEK)[0]
    view = cp.plan_view(q)
    params = dict(parse_qsl(urlsplit(cp.zero_link(view.top.iloc[0], view.zero_link_base)).query))
    assert (params["model"], params["nd"], params["ep"], params.get("cp", "1")) == ("deepseek-v3", "128", "64", "1")
    long = PlannerParams.from_url({"model": "llama3-405b", "seq": "131072", "gpu": "h100-80gb", "gpus": "16384",
                                   "batch": "128", "fix_t": "8", "fix_p": "16", "fix_cp": "16", "zero": "1",
                                   "schedule": "interleaved", "mb_sizes": "1", "recompute": "full", "sp": "on"})[0]
    view = cp.plan_view(long)
    params = dict(parse_qsl(urlsplit(cp.zero_link(view.top.iloc[0], view.zero_link_base)).query))
    assert (params["nd"], params["cp"], params["seq"]) == ("128", "16", "131072")  # d x cp: Megatron's dp-cp group


def test_a_preset_at_128k_from_the_url():
    at = run({"model": "llama3-405b", "seq": "131072", "gpu": "h100-80gb", "gpus": "16384", "batch": "128",
              "fix_t": "8", "fix_p": "16", "fix_cp": "16", "zero": "1", "schedule": "interleaved", "mb_sizes": "1",
              "recompute": "full", "sp": "on"})
    assert not at.exception and not at.error
    assert any("131,072 tokens" in c.value for c in at.caption)
    assert "cp=16" in {m.label: m.value for m in at.metric}["Layout t x p x d"]
