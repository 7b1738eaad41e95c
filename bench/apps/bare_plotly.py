"""The chart library's floor: the bare page (bare_page.py) plus one three-bar Plotly chart.

Plotly's frontend chunk (4.7 MB in Streamlit 1.67) loads and runs only when a page first draws a chart;
this page measures what that alone costs, so a dashboard page's whole-page time can be read against it.
"""

import plotly.graph_objects as go
import streamlit as st

n = st.slider("n", 1, 64, 8, key="n", bind="query-params")
st.metric("n squared", n * n)
st.plotly_chart(go.Figure(go.Bar(x=[1, 2, 3], y=[n, 2 * n, 3 * n])))
