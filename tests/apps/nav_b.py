"""Test page B: binds p, m and schedule."""

import streamlit as st

from core.params.pipeline import PIPELINE
from ui.shared.widgets import url_inputs

values = url_inputs(PIPELINE, ["p", "m", "schedule"])
st.text(f"B p={values['p']} m={values['m']} schedule={values['schedule']}")
