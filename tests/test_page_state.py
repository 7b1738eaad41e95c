"""Each page owns its inputs (issue 23 item 1), through app.py's navigation as AppTest runs it: a page switch
carries no setting to a page that has an input of the same name, and a page comes back as the user left it."""

from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT

APP = str(ROOT / "app.py")


def metrics(at):
    return {m.label: m.value for m in at.metric}


def test_a_same_named_input_does_not_travel_and_a_page_comes_back_as_left():
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/pipeline.py").run()
    at.slider(key="p").set_value(5).run()
    assert metrics(at)["Makespan"] == "36"  # (m + p - 1)(t_f + t_b) = 12 x 3
    at.switch_page("pages/zero.py").run()
    assert not at.exception
    assert at.number_input(key="p").value == 1
    assert metrics(at)["DP per GPU"] == "120.00 GB"  # the ZeRO page's own p = 1, not the Pipeline page's 5
    at.switch_page("pages/planner.py").run()
    assert not at.exception
    at.switch_page("pages/pipeline.py").run()
    assert at.slider(key="p").value == 5 and metrics(at)["Makespan"] == "36"  # as the user left it


def test_a_link_opens_a_page_exactly_even_when_it_was_visited_before():
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/zero.py").run()
    at.number_input(key="nd").set_value(1024).run()
    at.switch_page("pages/pipeline.py").run()
    at.query_params["t"] = "2"  # an explicit link to the ZeRO page with one input: that input, the rest defaults
    at.switch_page("pages/zero.py").run()
    assert at.number_input(key="nd").value == 64 and metrics(at)["DP per GPU"] == "60.00 GB"
