"""The ZeRO page in a real Chromium: change inputs, watch the chart and the URL follow, reopen the URL in a
fresh browser context and get the same view. Every step waits on a selector or a URL, never a fixed sleep.
"""

import re

import pytest

from tests.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.server]


def metric(page, label):
    """The value text of the st.metric whose label is `label`."""
    box = page.locator('[data-testid="stMetric"]', has=page.get_by_text(label, exact=True))
    return box.locator('[data-testid="stMetricValue"]')


def open_zero(page, url):
    page.goto(url)
    page.wait_for_selector(".st-key-present")  # the app frame (sidebar) is there
    metric(page, "ZeRO-3 per GPU").wait_for()
    page.locator(".st-key-zero_bars .main-svg").first.wait_for()


def wait_chart_text(page, key, fragment):
    """Wait until the plotly chart `key` draws a text containing `fragment` (charts redraw after a rerun)."""
    page.wait_for_function(
        "([key, fragment]) => [...document.querySelectorAll(`.st-key-${key} svg text`)]"
        ".some(t => t.textContent.includes(fragment))", arg=[key, fragment])


def chart_text(page, key):
    """Every text the plotly chart draws (bar labels, annotations, axis titles)."""
    page.locator(f".st-key-{key} .main-svg").first.wait_for()
    return page.locator(f".st-key-{key} svg text").all_text_contents()


def test_inputs_update_chart_and_url_and_the_url_reproduces_the_view(page, browser, streamlit_server):
    open_zero(page, streamlit_server + "/zero")
    assert metric(page, "ZeRO-3 per GPU").inner_text() == "1.88 GB"
    assert any("1.88" in t for t in chart_text(page, "zero_bars"))

    nd = page.locator(".st-key-nd input")
    nd.fill("1024")
    nd.press("Enter")
    page.wait_for_url(re.compile(r"[?&]nd=1024\b"))
    wait_chart_text(page, "zero_bars", "0.12")
    assert metric(page, "ZeRO-3 per GPU").inner_text() == "0.12 GB"
    assert metric(page, "ZeRO-1 per GPU").inner_text() == "30.09 GB"

    page.locator(".st-key-unit").get_by_text("GiB", exact=True).click()
    # both values in the URL: a link copied now must not lose N_d (a flaky run once reopened with N_d = 64)
    page.wait_for_url(lambda url: re.search(r"[?&]unit=GiB\b", url) and re.search(r"[?&]nd=1024\b", url))
    metric(page, "ZeRO-3 per GPU").filter(has_text="GiB").wait_for()
    wait_chart_text(page, "zero_bars", "GiB")
    page.wait_for_function(  # the rerun is over: no element is left stale from the previous run
        "() => !document.querySelector('[data-stale=\"true\"]')")
    shared, before = page.url, chart_text(page, "zero_bars")
    assert "nd=1024" in shared and "unit=GiB" in shared, shared
    assert "✓ 0.11fits" in before and "per GPU, GiB (2^30 B)" in before  # 120e9 / 1024 bytes in GiB
    assert page.locator(".st-key-nd input").input_value() == "1024"

    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1400, "height": 2400})  # the app scrolls inside; show more of it
    page.locator('[data-testid="stMain"]').evaluate("e => e.scrollTo(0, 0)")
    page.screenshot(path=str(shots / "zero.png"), full_page=True)

    fresh = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        other = fresh.new_page()
        open_zero(other, shared)
        assert other.locator(".st-key-nd input").input_value() == "1024"
        assert other.locator(".st-key-unit input[type=radio]:checked").count() == 1
        for label in ("DP per GPU", "ZeRO-1 per GPU", "ZeRO-2 per GPU", "ZeRO-3 per GPU"):
            assert metric(other, label).inner_text() == metric(page, label).inner_text()
        wait_chart_text(other, "zero_bars", "GiB")
        assert set(chart_text(other, "zero_bars")) == set(before)
        assert other.url == shared
    finally:
        fresh.close()


def test_bad_link_shows_a_notice_and_the_defaults(page, streamlit_server):
    open_zero(page, streamlit_server + "/zero?nd=-3&model=%3Cb%3Ex%3C/b%3E")
    page.get_by_text("Some values in this link could not be used").wait_for()
    page.get_by_text("nd: '-3' is out of range").wait_for()
    page.get_by_text("model: '<b>x</b>' is not allowed", exact=False).wait_for()
    assert metric(page, "ZeRO-3 per GPU").inner_text() == "1.88 GB"
    page.wait_for_url(lambda url: "nd=" not in url and "model=" not in url)


def test_model_preset_replaces_the_psi_box_and_stays_in_the_link(page, streamlit_server):
    open_zero(page, streamlit_server + "/zero")
    page.locator(".st-key-model [role=combobox]").click()
    page.get_by_role("option", name="llama3-70b", exact=True).click()
    page.wait_for_url(re.compile(r"[?&]model=llama3-70b\b"))
    page.get_by_text("70,600,000,000", exact=True).wait_for()
    metric(page, "ZeRO-3 per GPU").filter(has_text="17.65 GB").wait_for()
    assert page.locator(".st-key-params input").count() == 0
    page.locator(".st-key-act label").click()  # activations on: their inputs appear, and the link says so
    page.wait_for_url(re.compile(r"[?&]act=true\b"))
    page.locator(".st-key-schedule").wait_for()
    wait_chart_text(page, "zero_bars", "does not fit")
