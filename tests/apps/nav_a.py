"""Test page A: binds p and schedule; links to B with parameters (one link shares a key with A)."""

import streamlit as st

from core.params.pipeline import PIPELINE
from tests.apps.nav_pages import PAGE_B
from ui.shared.links import link_to_page
from ui.shared.widgets import url_inputs

values = url_inputs(PIPELINE, ["p", "schedule"])
st.text(f"A p={values['p']} schedule={values['schedule']}")
link_to_page(PAGE_B, {"m": 32}, PIPELINE, label="B with m=32")  # no shared key: st.page_link
link_to_page(PAGE_B, {"p": 16, "schedule": "zb-h1"}, PIPELINE, label="B with p=16")  # shared keys: fresh load
