"""The floor a dashboard page is measured against: one URL-bound slider and one st.metric, nothing else."""

import streamlit as st

n = st.slider("n", 1, 64, 8, key="n", bind="query-params")
st.metric("n squared", n * n)
