"""What a projector shows wrongly, read from the page in a real Chromium: the layout checks of the browser tests
(tests/test_browser_projector.py), and the walk through every tab and expander of a page.

LAYOUT_PROBLEMS (tests/browser_layout.js) runs in the page and lists, in words:
- two leaf elements of the main area that overlap (charts, tables, inputs, text; hidden ones are skipped);
- a chart's legend, title or annotation outside the chart, and text inside a chart that overlaps other text
  (tick labels, axis titles, legend entries, annotations, title, buttons);
- a label, metric, selected option, tab, button or paragraph whose text is cut (scrolls: wider than its box), and an
  input whose value does not fit;
- an element wider than the window.
"""

from __future__ import annotations

from pathlib import Path

LAYOUT_PROBLEMS = (Path(__file__).parent / "browser_layout.js").read_text(encoding="utf-8").split("\n", 1)[1]

# A run is over: no element left stale from the previous run, the "running" indicator gone, every chart drawn and
# no animation running (an expander opening slides its content in: mid-way, it overlaps what follows).
SETTLED = ("() => !document.querySelector('[data-stale=\"true\"]') && "
           "!document.querySelector('[data-testid=\"stStatusWidget\"]') && "
           "[...document.querySelectorAll('.js-plotly-plot')].every(p => p._fullLayout) && "
           "document.getAnimations().every(a => a.playState !== 'running')")
CLOSED = "[data-testid='stMain'] [data-testid='stExpander'] details:not([open]) > summary"
TABS = "[data-testid='stMain'] [data-testid='stTab']"


def settle(page) -> None:
    page.wait_for_function(SETTLED, timeout=60_000)


def open_expanders(page) -> None:
    """Open every expander on screen (inside the tab shown), waiting for each one's run."""
    for summary in page.locator(CLOSED).all():
        if summary.is_visible():
            summary.click()  # a URL-bound expander reruns the page: its element may be drawn anew
            settle(page)


def each_tab(page):
    """Yield the label of each main-area tab after clicking it and opening its expanders ('' when there is none)."""
    open_expanders(page)
    tabs = page.locator(TABS)
    if not tabs.count():
        yield ""
        return
    for i in range(tabs.count()):
        tab = tabs.nth(i)
        tab.click()
        page.wait_for_function("e => e.getAttribute('aria-selected') === 'true'", arg=tab.element_handle())
        settle(page)
        open_expanders(page)
        yield tab.inner_text()
