"""A widget step reruns only the page's fragment (pages/*.py `body`), not app.py: what that must not break.

The link to share lives in app.py's sidebar slot (ui.shared.links.share_slot) but is written by the fragment. After a
step that reran only the fragment, the slot must hold exactly one link, in its place under the presentation
toggle, carrying the new value; and the headline must follow the input.
"""

import re

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.server]

LINKS = "[data-testid='stSidebarUserContent'] [data-testid='stMarkdownContainer']:has-text('Link to this view')"


def sidebar_text(page) -> str:
    return page.locator("[data-testid='stSidebarUserContent']").inner_text()


def link_in_place(page, fragment: str) -> None:
    page.locator("[data-testid='stSidebarUserContent']").get_by_text("Presentation mode").wait_for()
    # (the frame's toggle is drawn after the link on a first load: its script loads later)
    page.wait_for_function(
        f"""() => {{
            const links = [...document.querySelectorAll("[data-testid='stSidebarUserContent'] a")]
                .filter(a => a.innerText.includes('http'));
            return links.length === 1 && links[0].innerText.includes({fragment!r});
        }}""")
    text = sidebar_text(page)
    assert text.count("Link to this view") == 1, text
    between = text.split("Presentation mode", 1)[1].split("Link to this view", 1)[0]
    assert between.strip() == "", text  # the link is right under the toggle, above the page's own inputs


def metric(page, label):
    return page.locator("[data-testid='stMain'] [data-testid='stMetric']", has_text=label) \
        .locator("[data-testid='stMetricValue']").inner_text()


def test_a_slider_step_keeps_one_link_in_its_slot_with_the_new_value(page, streamlit_server):
    page.goto(streamlit_server + "/pipeline?m=12")
    link_in_place(page, "m=12")
    assert metric(page, "Makespan") == "45"  # (m + p - 1)(t_f + t_b) = 15 x 3
    thumb = page.locator(".st-key-p input[type=range]")
    for expected in ("p=5", "p=6"):
        thumb.focus()
        thumb.press("ArrowRight")
        page.wait_for_url(re.compile(rf"[?&]{expected}\b"))
        link_in_place(page, expected)
    page.wait_for_function("[...document.querySelectorAll('[data-testid=stMetricValue]')]"
                           ".some(e => e.innerText === '51')")  # 17 x 3


def test_a_number_box_step_on_zero_keeps_the_link_and_the_totals_in_step(page, streamlit_server):
    page.goto(streamlit_server + "/zero?nd=1024&unit=GiB")
    link_in_place(page, "nd=1024")
    before = metric(page, "ZeRO-3 per GPU")
    box = page.locator(".st-key-nd input")
    box.fill("512")
    box.press("Enter")
    page.wait_for_url(re.compile(r"[?&]nd=512\b"))
    link_in_place(page, "nd=512")
    page.wait_for_function(
        f"""() => [...document.querySelectorAll("[data-testid='stMetric']")]
            .some(m => m.innerText.includes('ZeRO-3 per GPU') && !m.innerText.includes({before!r}))""")


def test_the_presentation_toggle_still_reruns_the_whole_app(page, streamlit_server):
    page.goto(streamlit_server + "/lecture")
    link_in_place(page, "/lecture")
    page.locator(".st-key-present label").click()
    page.wait_for_url(re.compile(r"[?&]present=true\b"))
    link_in_place(page, "present=true")
    thumb = page.locator(".st-key-e1_p input[type=range]")
    thumb.focus()
    thumb.press("ArrowRight")
    page.wait_for_url(re.compile(r"[?&]e1_p=\d+"))
    link_in_place(page, "present=true")  # a fragment step keeps the frame's own input in the link
