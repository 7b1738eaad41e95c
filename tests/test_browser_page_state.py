"""Each page owns its inputs, in a real Chromium (issue 23 items 1 and 2): the sidebar opens a page from its own state
or its defaults, never with another page's settings; a planner row's link opens the ZeRO page on the row's memory.

Every step waits on a real condition (URL, selector, the run being over), never on a fixed sleep.
"""

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from core.params import zero_page
from core.params.memory import ZERO
from core.params.pipeline import PIPELINE
from core.params.planner import PLAN
from tests.browser_layout import settle

pytestmark = [pytest.mark.browser, pytest.mark.server]

METRICS = "[data-testid='stMetricValue']"


def keys(url: str) -> set[str]:
    return set(parse_qs(urlsplit(url).query))


def values(page) -> list[str]:
    settle(page)
    return page.locator(METRICS).all_inner_texts()


def go_by_sidebar(page, title: str, path: str) -> None:
    page.locator("[data-testid='stSidebarNav'] a", has_text=title).click()
    page.wait_for_url(re.compile(rf"/{path}(\?|$)"))
    page.wait_for_selector(METRICS)


def test_the_sidebar_opens_each_page_with_its_own_inputs_only(page, browser, streamlit_server):
    page.goto(streamlit_server + "/pipeline")
    page.wait_for_selector(METRICS)
    thumb = page.locator(".st-key-p input[type=range]")
    thumb.focus()
    thumb.press("ArrowRight")  # Pipeline devices p: 4 -> 5
    page.wait_for_url(re.compile(r"[?&]p=5\b"))
    settle(page)

    go_by_sidebar(page, "ZeRO", "zero")
    page.wait_for_selector(".st-key-zero_bars .main-svg")  # drawn to the end, not only the headline
    zero_seen = values(page)
    assert not keys(page.url) & (set(PIPELINE) - set(ZERO) - set(zero_page.ACT)) and "p" not in keys(page.url)
    fresh = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        other = fresh.new_page()
        other.goto(streamlit_server + "/zero")
        other.wait_for_selector(".st-key-zero_bars .main-svg")
        assert values(other) == zero_seen  # the ZeRO page's own defaults: data parallelism 120 GB, not 24 GB
        assert zero_seen[0] == "120.00 GB"
    finally:
        fresh.close()

    go_by_sidebar(page, "Planner", "planner")
    settle(page)
    assert keys(page.url) <= set(PLAN) | {"present"}  # nothing of the Pipeline or ZeRO page
    assert not keys(page.url) & {"p", "schedule", "recompute", "nd", "stage"}

    go_by_sidebar(page, "Pipeline", "pipeline")  # back: the Pipeline page as the user left it, in its link too
    page.wait_for_url(re.compile(r"[?&]p=5\b"))
    assert page.locator(".st-key-p input[type=range]").input_value() == "5"


def test_a_planner_row_opens_the_zero_page_on_its_memory(page, streamlit_server):
    page.goto(streamlit_server + "/planner?model=llama3-70b&gpus=64&batch=512")
    memory = page.locator("[data-testid='stMetric']", has_text="Memory per GPU").locator(METRICS)
    memory.wait_for()
    settle(page)
    planned = float(memory.inner_text().split()[0])
    page.get_by_role("link", name="Its memory on the ZeRO page").click()
    page.wait_for_url(re.compile(r"/zero\?"))
    page.wait_for_selector(METRICS)
    settle(page)
    stage = parse_qs(urlsplit(page.url).query)["stage"][0]
    label = "DP per GPU" if stage == "0" else f"ZeRO-{stage} per GPU"
    shown = page.locator("[data-testid='stMetric']", has_text=label).locator(METRICS).inner_text()
    assert float(shown.split()[0]) == pytest.approx(planned, rel=0.01)  # the 65.1 GB, not 495-620 GB
