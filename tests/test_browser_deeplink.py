"""A shared link opened first thing on a freshly started server gets the whole app, not a bare page.

Streamlit runs a deep link in its older pages/-folder mode until some session has run app.py's
st.navigation; ui.shared.layout.run_through_app switches that off. This needs a server of its own: the
shared `streamlit_server` fixture may already have served "/".
"""

import pytest

from tests.conftest import free_port, serve, server_command

pytestmark = [pytest.mark.browser, pytest.mark.server]


def test_first_visit_to_a_deep_link_runs_the_app(browser):
    with serve(server_command(free_port()), "deeplink-server.log") as base:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(30_000)
        try:
            page = context.new_page()
            page.goto(base + "/zero?nd=1024")
            nav = page.locator('[data-testid="stSidebarNav"]')
            nav.get_by_text("ZeRO memory").wait_for()  # app.py's titles, not the file names
            assert nav.get_by_text("zero", exact=True).count() == 0
            page.locator(".st-key-present").wait_for()  # the shared sidebar of app.py
            page.locator(".st-key-nd input").wait_for()
            assert page.locator(".st-key-nd input").input_value() == "1024"  # the link's value survived
            assert "nd=1024" in page.url
        finally:
            context.close()
