"""The Pipeline page in a real Chromium: a slider redraws the chart and rewrites the URL, and that URL
reopens the same view in a fresh browser context.

The figure is read from the page itself: Plotly keeps `data` and `layout` on its graph div. Every step
waits on a real condition (selector, URL, figure state), never on a fixed sleep.
"""

import re

import pytest

from tests.conftest import ARTIFACTS, free_port, serve, server_command

pytestmark = [pytest.mark.browser, pytest.mark.server]

GANTT = ".st-key-gantt .js-plotly-plot"
LANES = f"document.querySelector('{GANTT}')?.layout?.yaxis?.tickvals?.length"
SHAPES = f"(document.querySelector('{GANTT}')?.layout?.shapes || []).length"


def open_page(page, url):
    page.goto(url)
    page.wait_for_selector(".st-key-present")  # app.py's frame ran, even for a deep link
    page.wait_for_selector(GANTT)


def metric(page, label):
    box = page.locator('[data-testid="stMetric"]', has_text=label)
    return box.locator('[data-testid="stMetricValue"]').inner_text()


def lanes_become(page, n):
    page.wait_for_function(f"{LANES} === {n}")


def test_slider_redraws_the_chart_and_the_url_reopens_the_same_view(page, browser, streamlit_server):
    open_page(page, streamlit_server + "/pipeline?m=8")
    lanes_become(page, 4)
    assert metric(page, "Makespan") == "33"

    thumb = page.locator(".st-key-p input[type=range]")
    thumb.focus()
    thumb.press("ArrowRight")
    thumb.press("ArrowRight")
    page.wait_for_url(re.compile(r"[?&]p=6\b"))
    lanes_become(page, 6)  # the chart was redrawn with two more devices
    page.wait_for_function("[...document.querySelectorAll('[data-testid=stMetricValue]')]"
                           ".some(e => e.innerText === '39')")  # (m + p - 1)(t_f + t_b) = 13 x 3
    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "pipeline.png"), full_page=True)
    shared = page.url

    fresh = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        other = fresh.new_page()
        open_page(other, shared)
        lanes_become(other, 6)
        assert other.locator(".st-key-p input[type=range]").input_value() == "6"
        assert metric(other, "Makespan") == "39"
        assert other.url == shared
    finally:
        fresh.close()


def test_time_cursor_steps_and_lands_in_the_url(page, streamlit_server):
    open_page(page, streamlit_server + "/pipeline?schedule=gpipe")
    assert page.evaluate(SHAPES) == 0
    page.locator(".st-key-cursor_back").get_by_role("button", name="◀").click()  # from 100 % back to t = 31 of 33
    page.wait_for_url(re.compile(r"[?&]cursor=93\.9394\b"))
    page.wait_for_function(f"{SHAPES} === 2")  # the veil and the cursor line
    x0 = page.evaluate(f"document.querySelector('{GANTT}').layout.shapes[1].x0")
    assert x0 == pytest.approx(31, abs=1e-3)
    page.get_by_text("At t = 31: device 0: B7").wait_for()


def test_direct_link_on_a_fresh_server_runs_the_app_frame(page):
    # Streamlit would run a pages/ file on its own until some session ran app.py; ui.shared.layout's
    # run_through_app makes the first visitor of a shared link get the whole app (presentation mode).
    with serve(server_command(free_port()), "pipeline-fresh-server.log") as base:
        page.goto(base + "/pipeline?present=true")
        page.wait_for_selector(GANTT)
        page.locator(".st-key-present").wait_for()
        assert page.locator(".st-key-present").get_by_role("switch").is_checked()


def test_downloads_are_made_on_click(page, streamlit_server):
    open_page(page, streamlit_server + "/pipeline?schedule=zb-h1&p=2&m=2&img=svg")
    with page.expect_download() as csv:
        page.get_by_role("button", name="PyTorch action CSV").click()
    assert csv.value.suggested_filename == "zb-h1-p2-m2.csv"
    rows = open(csv.value.path()).read().splitlines()
    assert rows[0] == "0F0,0F1,0I0,0W0,0I1,0W1" and sorted(rows[1].split(",")) == ["1F0", "1F1", "1I0", "1I1",
                                                                                  "1W0", "1W1"]
    page.hover(GANTT)
    with page.expect_download() as image:  # the modebar's camera, in the format chosen on the page
        page.locator(".st-key-gantt .modebar-btn[data-title^='Download']").click()
    assert image.value.suggested_filename == "pipeline-zb-h1-p2-m2.svg"
    assert open(image.value.path()).read().startswith("<svg")
