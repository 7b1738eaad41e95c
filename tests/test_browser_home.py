"""The home page in a real Chromium: it renders, links to the pages, and its URL state round-trips.

Streamlit renders over a websocket after the HTML shell loads, so every step waits on a real selector
or URL, never on a fixed sleep.
"""

import re
import sys

import pytest

from tests.conftest import ARTIFACTS, free_port, serve
from ui.shared.layout import APP_NAME
from ui.shared.links import PAGES, available_pages

pytestmark = [pytest.mark.browser, pytest.mark.server]

TOGGLE = ".st-key-present"  # Streamlit gives each keyed element the class st-key-<key>


def open_app(page, url):
    page.goto(url)
    page.wait_for_selector('[data-testid="stApp"]')
    page.wait_for_selector('[data-testid="stMarkdown"]')
    page.wait_for_selector(TOGGLE)


def test_home_renders_with_title_and_page_links(page, streamlit_server):
    open_app(page, streamlit_server + "/")
    page.get_by_role("heading", name=APP_NAME).wait_for()
    page.wait_for_function("document.title.length > 0 && document.title !== 'Streamlit'")
    assert APP_NAME in page.title() or "Home" in page.title()
    main = page.locator('[data-testid="stMain"]')
    ready = {p.title for p in available_pages() if p.url_path}
    for entry in (p for p in PAGES if p.url_path):
        if entry.title in ready:
            main.locator('[data-testid="stPageLink"]', has_text=entry.title).wait_for()
        else:
            main.get_by_text(f"{entry.title} (coming soon)").wait_for()
        main.get_by_text(entry.description).wait_for()
    main.get_by_text("python -m core --help").wait_for()
    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "home.png"), full_page=True)


def test_presentation_mode_round_trips_through_the_url(page, browser, streamlit_server):
    open_app(page, streamlit_server + "/")
    toggle = page.locator(TOGGLE).get_by_role("switch")
    assert not toggle.is_checked()
    page.locator(TOGGLE).locator("label").click()
    page.wait_for_url(re.compile(r"[?&]present=true\b"))
    page.wait_for_function("getComputedStyle(document.documentElement).fontSize === '22px'")
    shared = page.url

    fresh = browser.new_context()
    try:
        other = fresh.new_page()
        open_app(other, shared)
        other.wait_for_function("getComputedStyle(document.documentElement).fontSize === '22px'")
        assert other.locator(TOGGLE).get_by_role("switch").is_checked()
    finally:
        fresh.close()

    # Back to the default: the parameter leaves the URL (Streamlit drops defaults).
    page.locator(TOGGLE).locator("label").click()
    page.wait_for_url(lambda url: "present=" not in url)


def test_bad_url_value_shows_a_plain_text_notice(page, streamlit_server):
    open_app(page, streamlit_server + "/?present=%3Cb%3Ebold%3C/b%3E")
    page.get_by_text("could not be used").wait_for()
    notice = page.get_by_text("present: '<b>bold</b>' is not valid")
    notice.wait_for()  # the markup is shown as text...
    assert page.locator('[data-testid="stMain"] b', has_text="bold").count() == 0  # ...never rendered
    assert not page.locator(TOGGLE).get_by_role("switch").is_checked()
    page.wait_for_url(lambda url: "present=" not in url)


@pytest.fixture(scope="module")
def nav_server():
    """A two-page test app (tests/apps/nav_app.py) whose pages bind the same URL keys."""
    port = free_port()
    command = [sys.executable, "-m", "streamlit", "run", "tests/apps/nav_app.py", "--server.headless=true",
               f"--server.port={port}"]
    with serve(command, "nav-server.log") as base:
        yield base


def test_links_between_pages_carry_their_parameters(page, nav_server):
    page.goto(nav_server + "/a?p=8")
    page.get_by_text("A p=8 schedule=1f1b").wait_for()

    # No key shared with page A: a normal in-app page switch.
    page.get_by_role("link", name="B with m=32").click()
    page.get_by_text("B p=4 m=32 schedule=1f1b").wait_for()
    page.wait_for_url(re.compile(r"/b\?m=32$"))

    # p and schedule are bound on page A too: st.page_link would lose them, the fallback keeps them.
    page.goto(nav_server + "/a?p=8")
    page.get_by_text("A p=8 schedule=1f1b").wait_for()
    link = page.get_by_role("link", name="B with p=16")
    assert link.get_attribute("href") == "/b?p=16&schedule=zb-h1"
    link.click()
    page.get_by_text("B p=16 m=8 schedule=zb-h1").wait_for()
