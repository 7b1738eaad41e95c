"""The floor a dashboard page is measured against: one URL-bound slider, one number box and their st.metric."""

import streamlit as st

n = st.slider("n", 1, 64, 8, key="n", bind="query-params")
st.metric("n squared", n * n)
k = st.number_input("k", 1, 100_000, 64, key="k", bind="query-params")
st.metric("k doubled", 2 * k)
