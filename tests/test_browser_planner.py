"""The Planner page in a real Chromium: it plans from a shared URL, widgets rewrite the URL, the row links open the
Pipeline page with the candidate's settings, and URL text is never rendered as markup."""

import re

import pytest

from core.params.planner import PlannerParams
from core.planner import plan as planner
from tests.browser_layout import settle
from tests.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.server]

BLOOM = ("/planner?model=bloom-176b&gpu=a100-80gb&gpus=384&batch=2048&fix_t=4&fix_p=12&zero=1&mb_sizes=2"
         "&recompute=full&sp=off&schedule=1f1b")
PINNED = PlannerParams(model="bloom-176b", gpu="a100-80gb", gpus=384, batch=2048, fix_t=4, fix_p=12, zero="1",
                       mb_sizes=(2,), recompute="full", sp="off", schedule="1f1b")
MAIN = '[data-testid="stMain"]'


def open_planner(page, url):
    page.goto(url)
    page.wait_for_selector('[data-testid="stApp"]')
    page.wait_for_selector('[data-testid="stDataFrame"]', timeout=60_000)
    page.locator(MAIN).get_by_text("Layout t x p x d").wait_for()


def test_full_search_from_a_shared_link(page, streamlit_server):
    q = PlannerParams(model="bloom-176b", gpu="a100-80gb", gpus=384, batch=2048)
    best = planner.plan(q).best()
    open_planner(page, streamlit_server + BLOOM.split("&fix_t")[0])
    main = page.locator(MAIN)
    main.get_by_text(f"{best['t']} x {best['p']} x {best['d']}", exact=True).wait_for()
    main.get_by_text(f"{best['step_time_s']:,.2f} s", exact=True).wait_for()
    main.get_by_text("Recommended for BLOOM-176B on 384 x NVIDIA A100 80GB SXM").wait_for()
    page.wait_for_selector(".js-plotly-plot")
    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1400, "height": 4200})
    page.wait_for_timeout(500)  # let the chart re-layout at the new size
    page.screenshot(path=str(shots / "planner.png"), full_page=True)


def test_published_layout_pinned(page, streamlit_server):
    open_planner(page, streamlit_server + BLOOM)
    main = page.locator(MAIN)
    main.get_by_text("4 x 12 x 8", exact=True).wait_for()
    main.get_by_text(f"{planner.plan(PINNED).best()['step_time_s']:,.2f} s", exact=True).wait_for()


def test_a_widget_change_replans_and_rewrites_the_url(page, streamlit_server):
    open_planner(page, streamlit_server + BLOOM)
    box = page.locator(".st-key-batch input")
    box.fill("1024")
    box.press("Enter")
    page.wait_for_url(re.compile(r"[?&]batch=1024\b"))
    page.locator(MAIN).get_by_text("(m = 64)").first.wait_for()


def test_the_pipeline_link_opens_the_candidates_schedule(page, streamlit_server):
    open_planner(page, streamlit_server + BLOOM)
    link = page.get_by_role("link", name="Its schedule on the Pipeline page")
    href = link.get_attribute("href")
    assert "pipeline?" in href and "p=12" in href and "m=128" in href  # in-app page link, defaults left out
    settle(page)  # a click while the run redraws the link can land on the element being replaced
    link.click()
    page.wait_for_url(re.compile(r"/pipeline\?.*p=12"), timeout=60_000)
    page.get_by_text("Bubble: idle share").wait_for()
    # the planner's simulated bubble: 11 / 139 of the schedule plus the idle time the heavier last stage (BLOOM's
    # 250,880-token output layer) forces on the others, the same on the Pipeline page
    bubble = planner.plan(PINNED).best()["bubble_fraction"]
    assert 11 / 139 < bubble
    page.locator(MAIN).get_by_text(f"{100 * bubble:.2f} %").first.wait_for()


def test_url_text_is_shown_as_text(page, streamlit_server):
    page.goto(streamlit_server + "/planner?model=%3Cb%3Ebold%3C/b%3E")
    page.get_by_text("could not be used").wait_for()
    page.get_by_text("model: '<b>bold</b>' is not allowed").wait_for()
    assert page.locator(f"{MAIN} b", has_text="bold").count() == 0
