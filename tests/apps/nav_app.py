"""Test app: two pages that both bind Pipeline keys, to check links that carry parameters."""

import streamlit as st

import core.pipeline.schedules  # noqa: F401  registers the schedules, whose names the pages' PIPELINE specs read
from tests.apps.nav_pages import PAGE_A, PAGE_B
from ui.shared.links import ROOT


def home() -> None:
    st.text("nav test home")


st.navigation([
    st.Page(home, title="Home", default=True),  # the default page lives at "/", so A and B keep their paths
    st.Page(ROOT / PAGE_A.file, title=PAGE_A.title, url_path=PAGE_A.url_path),
    st.Page(ROOT / PAGE_B.file, title=PAGE_B.title, url_path=PAGE_B.url_path),
]).run()
