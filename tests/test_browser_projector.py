"""The lecture on a projector in a real Chromium (issues 11 and 23): every page and tab at 1280 x 720 in presentation
mode with nothing overlapping, cut or outside its chart, and nothing requested beyond the server (a classroom
without internet); the one time cursor (Play, Pause, the slider) and hover of the Gantt; interleaved while dragging
p, a phone's width, and the share link in one place on every page.

Every step waits on a real condition (selector, figure state, the run being over), never on a fixed sleep.
"""

from functools import cache
from urllib.parse import urlsplit

import pytest

from tests.browser_layout import LAYOUT_PROBLEMS, each_tab, settle

pytestmark = [pytest.mark.browser, pytest.mark.server]

GANTT = ".st-key-gantt .js-plotly-plot"
# Every page, and its heavier states: compared schedules and the frontier, activations and a custom MoE model on
# the ZeRO page, a preset and a custom model on the Planner, every lecture answer revealed. Each path's tabs and
# expanders are all opened (tests.browser_layout.each_tab).
PROJECTOR = ("/?present=true", "/pipeline?present=true", "/pipeline?present=true&schedule=pipedream&iterations=2",
             "/pipeline?present=true&compare=zb-h1&frontier=true", "/zero?present=true&act=true",
             "/zero?present=true&model=custom&gpu=custom&act=true&expert_params=1000000000&experts=8",
             "/planner?present=true&model=llama3-70b&gpus=64", "/planner?present=true&model=custom&gpu=custom",
             "/lecture?present=true")


def open_page(page, url, ready="[data-testid='stMetricValue']"):
    page.goto(url)
    page.wait_for_selector(".st-key-present")  # app.py's frame ran
    page.wait_for_selector(ready)


@cache
def _walk(browser, server: str, path: str) -> tuple[dict[str, list[str]], frozenset[str], tuple[str, ...]]:
    """(layout problems per tab, every host the page requested, errors shown) of one path at 1280 x 720, walked
    once for both tests below."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    hosts: set[str] = set()
    context.on("request", lambda r: hosts.add(urlsplit(r.url).netloc or urlsplit(r.url).scheme))
    try:
        page = context.new_page()
        page.goto(server + path)
        page.wait_for_selector(".st-key-present")
        page.wait_for_selector("[data-testid='stMain'] [data-testid='stElementContainer']")
        settle(page)
        problems = {tab: page.evaluate(LAYOUT_PROBLEMS) for tab in each_tab(page)}
        errors = tuple(page.locator("[data-testid='stException'], [data-testid='stAlertContentError']")
                       .all_inner_texts())
        return problems, frozenset(hosts), errors
    finally:
        context.close()


@pytest.mark.parametrize("path", PROJECTOR)
def test_projector_1280x720_nothing_overlaps_is_cut_or_leaves_its_chart(browser, streamlit_server, path):
    problems, _, errors = _walk(browser, streamlit_server, path)
    assert not errors
    assert problems and {tab: found for tab, found in problems.items() if found} == {}


@pytest.mark.parametrize("path", PROJECTOR)
def test_every_page_requests_nothing_beyond_the_server(browser, streamlit_server, path):
    # fonts, favicon, Plotly, MathJax, images: a classroom without internet must see the whole page
    _, hosts, _ = _walk(browser, streamlit_server, path)
    server = urlsplit(streamlit_server).netloc
    assert hosts and hosts <= {server, "data", "blob"}, sorted(hosts - {server})


def test_the_layout_checks_see_an_overlap_a_cut_label_and_a_legend_outside_its_chart(page):
    page.set_content("""
      <div data-testid="stMain">
        <div data-testid="stElementContainer" style="position:absolute; left:0; top:0; width:200px; height:50px">
          <p>first</p></div>
        <div data-testid="stElementContainer" style="position:absolute; left:100px; top:20px; width:200px;
             height:50px"><div data-testid="stWidgetLabel" style="width:60px; overflow:hidden; white-space:nowrap">
             A label much longer than its box</div></div>
        <div data-testid="stElementContainer" style="position:absolute; left:0; top:200px; width:300px;
             height:100px"><div class="js-plotly-plot" style="width:300px; height:100px; position:relative">
             <svg width="300" height="100"><g class="legend"><rect x="0" y="90" width="100" height="40"/></g></svg>
             </div></div>
      </div>""")
    page.evaluate("() => { document.querySelector('.js-plotly-plot')._fullLayout = {}; }")
    found = page.evaluate(LAYOUT_PROBLEMS)
    assert any(f.startswith("overlap:") for f in found), found
    assert any(f.startswith("cut: stWidgetLabel") for f in found), found
    assert any(f.startswith("outside its chart") for f in found), found


def test_play_pause_and_the_slider_are_one_time_cursor_and_hover_names_the_op(page, streamlit_server):
    open_page(page, streamlit_server + "/pipeline", GANTT)
    page.wait_for_function(f"document.querySelector('{GANTT}').layout !== undefined")
    assert page.evaluate(f"(document.querySelector('{GANTT}').layout.shapes || []).length") == 0
    play = page.locator(".st-key-cursor_play")
    play.get_by_role("button", name="▶ Play").click()  # at the end: Play starts from the beginning
    x0 = f"(document.querySelector('{GANTT}').layout.shapes || [])[0]?.x0"
    page.wait_for_function(f"{x0} > 2")  # the veil's edge moves right, step by step
    first = page.evaluate(x0)
    page.wait_for_function(f"{x0} > {first}")
    play.get_by_role("button", name="❚❚ Pause").click()
    play.get_by_role("button", name="▶ Play").wait_for()
    settle(page)
    # one state: the slider, the Gantt's veil, the memory chart's veil and the link show the same moment
    page.wait_for_function("() => new URL(location.href).searchParams.has('cursor')")
    cursor = float(page.evaluate("new URL(location.href).searchParams.get('cursor')"))
    slider = float(page.locator(".st-key-cursor input[type=range]").input_value())
    assert slider == pytest.approx(cursor, abs=0.05 + 1e-9)  # the slider shows it to its step, 0.1 %
    makespan = page.evaluate(f"document.querySelector('{GANTT}').layout.xaxis.range[1] / 1.005")
    t = page.evaluate(x0)
    assert t == pytest.approx(makespan * cursor / 100, rel=1e-4)
    memory_x0 = page.evaluate("document.querySelector('.st-key-memory .js-plotly-plot').layout.shapes[0].x0")
    assert memory_x0 == pytest.approx(t)
    page.get_by_text(f"At t = {t:.4g}:", exact=False).wait_for()
    box = page.locator(f"{GANTT} .barlayer .point").nth(2).bounding_box()  # an early op bar, left of the veil
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
