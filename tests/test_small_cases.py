"""Clear words for the small cases (issue 23 item 7), through the pages as AppTest runs them and core's messages."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from core.errors import InputError
from core.views.pipeline import PipelineParams, pipeline_view
from tests.conftest import ROOT

APP = str(ROOT / "app.py")


def planner(query: dict) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/planner.py")
    at.query_params.update(query)
    at.run()
    assert not at.exception, at.exception
    return at


def test_pipedreams_refusal_names_only_inputs_it_takes():
    with pytest.raises(InputError) as exc:
        pipeline_view(PipelineParams(schedule="pipedream", p=64, m=1024, iterations=16))
    assert "v=" not in str(exc.value) and "lower m or iterations" in str(exc.value)
    with pytest.raises(InputError) as exc:  # interleaved takes v: it is named
        pipeline_view(PipelineParams(schedule="interleaved", p=64, m=1024, v=8, iterations=2))
    assert "v=8" in str(exc.value) and "lower m, v or iterations" in str(exc.value)
    with pytest.raises(InputError, match=r"lower p$"):
        pipeline_view(PipelineParams(schedule="pipedream", p=8, m=8, layers=4))


def test_a_missing_rank_says_so_and_the_export_shows_rank_1():
    at = planner({"model": "llama3-70b", "gpus": "64", "pick": "999"})
    notice = next(w.value for w in at.warning if "rank 999" in w.value)
    assert "There is no feasible candidate of rank 999" in notice and "Showing rank 1" in notice
    assert at.code  # the exports of rank 1 are on the page


@pytest.mark.parametrize("query", [{}, {"model": "llama3-70b", "gpus": "64"}, {"framework": "deepspeed"}])
def test_the_export_tabs_open_on_a_framework_that_runs_the_row(query):
    at = planner(query)
    tabs = next(t for t in at.get("tab_container") if [x.label for x in t.children.values()][0] == "DeepSpeed JSON")
    refused = [any(getattr(c, "icon", "") == ":material/block:" for c in tab.children.values())  # 'Not exported'
               for tab in tabs.children.values()]
    opened = tabs.proto.tab_container.default_tab_index
    assert not refused[opened] and all(refused[:opened])  # the first framework that runs the row


def test_the_models_own_sequence_length_is_shown_as_its_number():
    at = planner({"model": "llama3-70b", "gpus": "64"})
    assert any(c.value == "0: the model's own, **8,192** tokens" for c in at.caption)
    at = planner({"model": "llama3-70b", "gpus": "64", "seq": "16384"})
    assert not any("the model's own" in c.value for c in at.caption)


def test_the_zero_pages_own_sequence_length_is_shown_as_its_number():
    at = AppTest.from_file(str(ROOT / "pages" / "zero.py"), default_timeout=60)
    at.query_params.update({"model": "llama3-70b", "act": "true"})
    at.run()
    assert any(c.value == "Sequence length 0: the model's own, **8,192** tokens." for c in at.caption)


def test_mfu_has_one_precision_everywhere():
    at = planner({"model": "llama3-70b", "gpus": "64"})
    mfu = {m.label: m.value for m in at.metric}["MFU"]
    assert re.fullmatch(r"\d+\.\d %", mfu)
    assert f"MFU {mfu}" in "\n".join(m.value for m in at.markdown)  # the recommendation prints the same text
    table = at.dataframe[0].value
    assert table["MFU [%]"].iloc[0] == pytest.approx(float(mfu.split()[0]), abs=0.05)
