"""The Lecture page in a real Chromium: move a question's slider, watch the live answer, its figure and the
URL change; reveal an answer; switch on presentation mode; reopen the URL in a fresh context and get the
same view. Every step waits on a selector or a URL, never a fixed sleep.
"""

import re

import pytest

from tests.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.server]


def open_lecture(page, url, wait_text):
    page.goto(url)
    page.wait_for_selector(".st-key-present")
    page.get_by_text(wait_text).first.wait_for()


def figure_title(page, key):
    page.locator(f".st-key-{key} .main-svg").first.wait_for()
    return page.locator(f".st-key-{key} .gtitle").text_content()


def test_slider_answer_figure_and_url_round_trip(page, browser, streamlit_server):
    open_lecture(page, streamlit_server + "/lecture?e1_ans=true", "m = 63.")
    assert figure_title(page, "fig_e1") == "GPipe bubble at p = 8"

    thumb = page.locator(".st-key-e1_p input[type=range]")
    thumb.focus()
    thumb.press("ArrowRight")  # p = 9: 8 / (m + 8) <= 10 % first at m = 72
    page.wait_for_url(re.compile(r"[?&]e1_p=9\b"))
    page.get_by_text("m = 72.").first.wait_for()
    page.wait_for_function(
        "() => document.querySelector('.st-key-fig_e1 .gtitle')?.textContent === 'GPipe bubble at p = 9'")

    page.locator(".st-key-e3_ans summary").click()  # reveal exercise 3
    page.wait_for_url(re.compile(r"[?&]e3_ans=true\b"))
    page.get_by_text("GPipe: 16 GB. 1F1B: 4 GB").wait_for()
    page.locator(".st-key-fig_e3 .main-svg").first.wait_for()

    page.locator(".st-key-present label").click()  # presentation mode: larger fonts, kept in the link
    page.wait_for_url(re.compile(r"[?&]present=true\b"))
    page.wait_for_function("getComputedStyle(document.documentElement).fontSize === '22px'")
    shared = page.url

    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1400, "height": 2400})  # the app scrolls inside; show more of it
    page.locator('[data-testid="stMain"]').evaluate("e => e.scrollTo(0, 0)")
    page.screenshot(path=str(shots / "lecture.png"), full_page=True)

    fresh = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        other = fresh.new_page()
        open_lecture(other, shared, "m = 72.")
        assert other.locator(".st-key-e1_p input[type=range]").input_value() == "9"
        other.get_by_text("GPipe: 16 GB. 1F1B: 4 GB").wait_for()
        assert figure_title(other, "fig_e1") == "GPipe bubble at p = 9"
        other.wait_for_function("getComputedStyle(document.documentElement).fontSize === '22px'")
        assert other.url == shared
    finally:
        fresh.close()


def test_quiz_tab_is_in_the_link(page, streamlit_server):
    open_lecture(page, streamlit_server + "/lecture", "1. How many micro-batches")
    page.get_by_role("tab", name="Quiz").click()
    page.wait_for_url(re.compile(r"[?&]part=Quiz\b"))
    page.locator(".st-key-q1_ans summary").click()
    page.wait_for_url(re.compile(r"[?&]q1_ans=true\b"))
    page.get_by_text("m + p - 1 slots: 11 at p = 4, m = 8.").wait_for()
