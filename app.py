"""Entry point of the dashboard: `streamlit run app.py`.

Page config, navigation over the pages, and the shared sidebar (project name, presentation mode).
Everything a page shows is drawn by the page itself (pages/*.py), from core through ui.
"""

import streamlit as st

from core.runtime import keep_freed_memory
from ui.shared.layout import APP_ICON, APP_NAME, presentation_toggle, sidebar_brand
from ui.shared.links import ROOT, available_pages, share_slot
from ui.shared.workers import warm

keep_freed_memory()  # see core/runtime.py: a new large configuration reuses memory instead of re-faulting it
warm()  # the worker processes start with the first visit, not with the first plan (once per server)

st.set_page_config(
    page_title=APP_NAME,
    page_icon=APP_ICON,
    layout="wide",
    initial_sidebar_state="auto",  # open on a desktop, closed on a phone (it would cover the page)
    menu_items={"About": f"**{APP_NAME}**: pipeline schedules, ZeRO/FSDP memory and t x p x d layouts."},
)

# The pages come from one registry (ui.shared.links.PAGES: file, title, url_path, icon, description). The list is
# explicit (no glob), so a stray file in pages/ never becomes a page by accident.
pages = [
    st.Page(ROOT / p.file, title=p.title, icon=p.icon, url_path=p.url_path or None, default=not p.url_path,
            help=p.description)
    for p in available_pages()
]
current = st.navigation(pages, position="sidebar")

sidebar_brand()
presentation_toggle()  # in the main script, so `present` stays in the URL on every page
share_slot(st.sidebar.container())  # every page's link to share goes here (ui.shared.links.copy_link_box)
current.run()
