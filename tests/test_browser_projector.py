"""Issue 11 in a real Chromium: the lecture on a projector (1280 x 720, presentation mode), the Play button and
hover of the Gantt, interleaved while dragging p, a phone's width, and the share link in one place on every page.

Every step waits on a real condition (selector, figure state), never on a fixed sleep.
"""

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.server]

GANTT = ".st-key-gantt .js-plotly-plot"
CUT = """() => [...document.querySelectorAll("[data-testid='stMetricLabel'], [data-testid='stMetricValue']")]
  .flatMap(m => [m, ...m.querySelectorAll('*')]).filter(e => e.scrollWidth > e.clientWidth + 1)
  .map(e => e.innerText)"""


def open_page(page, url, ready="[data-testid='stMetricValue']"):
    page.goto(url)
    page.wait_for_selector(".st-key-present")  # app.py's frame ran
    page.wait_for_selector(ready)


@pytest.mark.parametrize("path", ["/pipeline?present=true", "/pipeline?present=true&schedule=pipedream&iterations=2",
                                  "/zero?present=true", "/planner?present=true&model=llama3-70b&gpus=64"])
def test_projector_1280x720_cuts_no_metric_label_or_value(browser, streamlit_server, path):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    try:
        page = context.new_page()
        open_page(page, streamlit_server + path)
        page.wait_for_function("() => !document.querySelector('[data-stale=\"true\"]')")
        assert page.evaluate(CUT) == []
    finally:
        context.close()


def test_play_moves_the_time_cursor_and_hover_names_the_op(page, streamlit_server):
    open_page(page, streamlit_server + "/pipeline", GANTT)
    page.wait_for_function(f"document.querySelector('{GANTT}').layout !== undefined")
    assert page.evaluate(f"(document.querySelector('{GANTT}').layout.shapes || []).length") == 0
    page.locator(".st-key-gantt .updatemenu-button").filter(has_text="Play").click()
    x0 = f"(document.querySelector('{GANTT}').layout.shapes || [])[0]?.x0"
    page.wait_for_function(f"{x0} > 2")  # the veil's edge moves right, in the browser, without a rerun
    first = page.evaluate(x0)
    page.wait_for_function(f"{x0} > {first}")
    page.locator(".st-key-gantt .updatemenu-button").filter(has_text="Pause").click()

    box = page.locator(f"{GANTT} .barlayer .point").nth(40).bounding_box()  # an op bar
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_function(f"document.querySelector('{GANTT} .hoverlayer').textContent.includes('micro-batch')")
    hover = page.locator(f"{GANTT} .hoverlayer").text_content()
    for word in ("micro-batch", "stage", "chunk", "start", "end"):
        assert word in hover


def test_interleaved_while_dragging_p_never_blanks_the_page(page, streamlit_server):
    open_page(page, streamlit_server + "/pipeline?schedule=interleaved&m=8", GANTT)
    thumb = page.locator(".st-key-p input[type=range]")
    for p, drawn_m in ((5, 10), (6, 6), (7, 7), (8, None)):  # m = 8 must be a multiple of p
        thumb.focus()
        thumb.press("ArrowRight")
        page.wait_for_url(f"**p={p}**")
        page.wait_for_function(f"document.querySelector('{GANTT}')?.layout?.yaxis?.tickvals?.length === {p}")
        if drawn_m is not None:  # why, in place, and the nearest m that runs
            page.get_by_text(f"Drawn below with m = {drawn_m}", exact=False).wait_for()
            assert "m must be a multiple of p" in page.locator("[data-testid='stAlert']").first.inner_text()
        assert page.locator("[data-testid='stMetricValue']").count() >= 4  # the numbers stay on screen


def test_phone_width_keeps_the_sidebar_closed(browser, streamlit_server):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        page.goto(streamlit_server + "/pipeline")
        page.wait_for_selector("[data-testid='stMetricValue']")
        metric = page.locator("[data-testid='stMetricValue']").first
        box = metric.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
        # what is on top at the number's centre is the number, not the sidebar
        on_top = page.evaluate("([x, y]) => !!document.elementFromPoint(x, y)?.closest(\"[data-testid='stMain']\")",
                               [box["x"] + box["width"] / 2, box["y"] + box["height"] / 2])
        assert on_top
    finally:
        context.close()


@pytest.mark.parametrize("path", ["/", "/pipeline", "/zero", "/planner", "/lecture"])
def test_the_link_to_share_is_in_the_same_place_on_every_page(page, streamlit_server, path):
    page.goto(streamlit_server + path)
    slot = page.locator("[data-testid='stSidebar'] [data-testid='stMarkdownContainer']",
                        has_text="Link to this view")
    slot.wait_for()
    toggle = page.locator(".st-key-present").bounding_box()
    link = slot.bounding_box()
    assert -1 <= link["y"] - (toggle["y"] + toggle["height"]) < 80  # right under the presentation toggle
    assert slot.locator("a").get_attribute("href") == streamlit_server + path.rstrip("/")


def test_the_text_timeline_is_drawn_when_opened(page, streamlit_server):
    open_page(page, streamlit_server + "/pipeline", GANTT)
    page.locator("[data-testid='stExpander']", has_text="Text timeline").locator("summary").click()
    page.locator("[data-testid='stCode']").filter(has_text="0123......").wait_for()
