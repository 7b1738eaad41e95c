"""The Planner page under the work budget: the issue's shared link answers within 30 s with the narrowing said on
the page, and the downloads come from the cached view (no second plan)."""

import io
import time
from dataclasses import replace

import pandas as pd
from streamlit.testing.v1 import AppTest

from core.params.planner import PlannerParams
from core.planner import plan as planner
from core.views import planner as pv
from tests.conftest import ROOT

APP = str(ROOT / "app.py")
ISSUE = {"model": "deepseek-v3", "gpus": "61440", "seq": "1048576", "mb_sizes": "1,2,3,4,5,6,7,8", "offload": "all"}


def test_the_issue_link_answers_within_30_s_and_says_what_was_narrowed():
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/planner.py")
    at.query_params.update(ISSUE)
    start = time.perf_counter()
    at.run()
    took = time.perf_counter() - start
    assert not at.exception and not at.error
    assert took < 30.0, f"{took:.1f} s"
    layout = {m.label: m.value for m in at.metric}["Layout t x p x d"]
    assert layout.startswith("8 x ") and "cp=" in layout  # a number: the narrowed search's best layout
    notice = [w.value for w in at.warning if w.value.startswith("Search narrowed")]
    assert len(notice) == 1
    assert "this question asks for 9,086,256" in notice[0] and "micro-batch sizes 1, 2, 4, 8" in notice[0]
    assert "offload searched only on the" in notice[0]


def test_a_refused_search_names_what_to_pin_and_keeps_the_inputs(monkeypatch):
    monkeypatch.setattr(planner, "BUDGET", replace(planner.BUDGET, default=100))  # the page plans with the spec's
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/planner.py")
    at.query_params.update({"model": "llama3-70b", "gpus": "1000", "batch": "1000"})
    at.run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        "These inputs cannot be planned: this search has 2,337 candidates even narrowed (micro-batch size 1 only), "
        "above the work budget of 100 per plan: pin p (10 values), t (4 values) (page: 'Search space'; command "
        "line: --fix t=8,p=16), or set zero, schedule or recompute to one value"]
    assert at.number_input(key="fix_t") is not None  # the inputs stay, to pin


def test_the_csv_and_exports_come_from_the_view_not_a_new_plan(monkeypatch):
    q = PlannerParams(model="llama3-70b", gpus=64, batch=512)
    result = planner.plan(q)
    view = pv.PlanView.of(result)

    def no_plan(*args, **kwargs):
        raise AssertionError("planned again")

    monkeypatch.setattr(planner, "plan", no_plan)
    monkeypatch.setattr(pv, "planned", no_plan)
    text = pv.candidates_csv(view)
    assert text == result.csv()  # every column, every candidate (fewer than CSV_ROWS here)
    frame = pd.read_csv(io.StringIO(text))
    assert len(frame) == len(result.frame) == view.csv_rows
    assert frame["step_time_s"].iloc[0] == result.frame["step_time_s"].iloc[0]
    exports = pv.exports_of(q, view.feasible_row(2))  # rank 2's configs: from the view's row, no plan
    assert set(exports) == {"deepspeed", "megatron", "fsdp"}
    # every switch the row was timed and counted with reaches its export (TP overlap once did not: not in the view)
    overlap = view.top_feasible[view.top_feasible["tp_comm_overlap"]]
    assert len(overlap)
    rank = int(overlap["rank"].iloc[0])
    assert "--tp-comm-overlap" in pv.exports_of(q, view.feasible_row(rank))["megatron"].text


def test_the_csv_is_bounded_and_says_how_many(monkeypatch):
    monkeypatch.setattr(pv, "CSV_ROWS", 100)
    result = planner.plan(PlannerParams(model="llama3-70b", gpus=64, batch=512))
    view = pv.PlanView.of(result)
    assert view.csv_rows == 100 < view.candidates
    frame = pd.read_csv(io.StringIO(pv.candidates_csv(view)))
    assert len(frame) == 100 and list(frame["rank"][:3]) == [1, 2, 3]


def test_the_page_download_reads_the_cached_view(monkeypatch):
    """ui.planner.cache.candidates_csv (the page's "All candidates (CSV)") plans once, for the view, not again."""
    from ui.planner import cache as cp

    calls = []
    real = planner.plan
    monkeypatch.setattr(planner, "plan", lambda q, *a, **k: calls.append(q) or real(q, *a, **k))
    q = PlannerParams(model="llama3-8b", gpus=32, batch=128)
    view = cp.plan_view(q)
    before = len(calls)
    text = cp.candidates_csv(q)
    assert len(calls) == before <= 1
    assert len(pd.read_csv(io.StringIO(text))) == view.candidates
