"""Streamlit's own floor for a page of a dashboard page's size: the same kinds and number of elements, nothing
computed. `?of=pipeline` (default) or `?of=zero`.

Counted from one slider or number-box step's WebSocket messages of each page (bench/bench_browser.py):
- Pipeline (p = 6, m = 12): 14 number boxes, 4 sliders, 3 checkboxes, 2 text boxes, a select box, a radio, a
  multiselect, 2 file uploaders, 2 download and 2 plain buttons, 4 metrics, 6 headings, 10 markdown texts,
  5 expanders, 9 columns, two Plotly charts (a Gantt of 2 m p bars and a step line); inputs in the sidebar.
- ZeRO (N_d = 1024): 16 number boxes, 7 select boxes, 3 checkboxes, 2 radios, 2 sliders, 5 metrics, 7 markdown
  texts, 2 headings, 3 tables (st.dataframe), 2 expanders, 5 tabs, 29 columns, two Plotly charts; in the main area.
A step moves `p` (a slider) or `nd` (a number box); the metric and both charts follow. Whatever a dashboard
page's step costs beyond its sized floor's is the page's own work.
"""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

of = st.query_params.get("of", "pipeline")
zero = of == "zero"


def filler(kind: str, n: int, prefix: str, box=None) -> None:
    """n inputs of one kind, four to a row (the rows are the page's columns)."""
    for row in range(0, n, 4):
        for i, col in enumerate((box or st).columns(min(4, n - row))):
            key = f"{prefix}{row + i}"
            if kind == "number":
                col.number_input(key, 0.0, 100.0, 1.0, key=key)
            elif kind == "select":
                col.selectbox(key, ["a", "b", "c"], key=key)
            elif kind == "check":
                col.checkbox(key, key=key)
            elif kind == "radio":
                col.radio(key, ["a", "b"], horizontal=True, key=key)
            elif kind == "slider":
                col.slider(key, 1, 64, 4, key=key)
            else:
                col.text_input(key, key=key)


st.title("Sized floor")
st.caption(f"A page of the {of} page's size.")
if zero:
    nd = st.number_input("N_d", 1, 100_000, 64, key="nd", bind="query-params")
    x = 1 + 1e4 / nd
    cols = st.columns(4)
    for i, col in enumerate(cols):
        col.metric("Per GPU" if i == 0 else f"stage {i}", f"{x * (i + 1):,.2f} GiB")
    filler("select", 7, "s")
    filler("check", 3, "c")
    filler("radio", 2, "r")
    with st.expander("Optimizer, precision"):
        filler("number", 8, "n")
    with st.expander("Offload, reserve"):
        filler("number", 8, "o")
    filler("slider", 2, "l")
    st.metric("GPU memory", "80 GB")
    st.caption("Psi and bytes per parameter.")
    left, right = st.columns(2)
    left.plotly_chart(go.Figure(go.Bar(x=["DP", "Z1", "Z2", "Z3"], y=[x, x / 2, x / 3, x / 4])), key="bars")
    right.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 4, 8, 16], y=[x / k for k in (1, 2, 4, 8, 16)])), key="curve")
    table = pd.DataFrame({"stage": ["DP", "Z1", "Z2", "Z3"], "total": [x, x / 2, x / 3, x / 4]})
    st.dataframe(table, hide_index=True)
    st.caption("Model states follow the ZeRO paper.")
    tabs = st.tabs(["Table 1", "Activations", "DeepSpeed", "FSDP", "Equivalence"])
    with tabs[0]:
        st.subheader("Table 1")
        st.dataframe(table, hide_index=True)
        st.caption("At the paper's degrees.")
        st.subheader("Communication")
        st.dataframe(table, hide_index=True)
        st.caption("Ring collectives.")
else:
    with st.sidebar:
        st.markdown("**Sized floor**")
        st.caption("The same number of elements as the Pipeline page.")
        st.toggle("Presentation mode", key="present")
        st.header("Schedule and costs")
        st.selectbox("Schedule", ["1f1b", "gpipe"], key="schedule")
        p = st.slider("p", 1, 64, 4, key="p", bind="query-params")
        m = st.slider("m", 1, 1024, 12, key="m")
        st.slider("v", 1, 8, 2, key="v")
        for i in range(6):
            st.number_input(f"cost {i}", 0.0, 100.0, 1.0, 0.1, key=f"c{i}")
        with st.expander("Per-stage reality"):
            for i in range(4):
                st.number_input(f"stage {i}", 0.0, 100.0, 1.0, key=f"s{i}")
        st.header("Compare")
        st.multiselect("Compare with", ["gpipe", "zbv"], key="compare")
        st.checkbox("Equal memory", key="eq")
        st.checkbox("Frontier", key="fr")
        st.radio("Image", ["png", "svg"], horizontal=True, key="img")
    cols = st.columns(4)
    cols[0].metric("Makespan", 3 * (m + p - 1))
    cols[1].metric("Idle share", f"{(p - 1) / (m + p - 1):.2%}")
    cols[2].metric("Relative to ideal", f"{(p - 1) / m:.2%}")
    cols[3].metric("Peak", p)
    st.caption("Closed form next to the simulation.")
    st.subheader("Timeline")
    st.slider("cursor", 0, 100, 100, key="cursor")
    lanes = [d for d in range(p) for _ in range(2 * m)]
    starts = [d + 3 * i for d in range(p) for i in range(2 * m)]
    st.plotly_chart(go.Figure(go.Bar(y=lanes, x=[1.0] * len(lanes), base=starts, orientation="h")), key="gantt")
    st.caption("At t = 0: every device idle.")
    st.subheader("Bubble: simulated and closed form")
    st.markdown("| | simulated | closed form |\n|---|---|---|\n| idle | 1 | 1 |")
    with st.expander("Derivation"):
        st.markdown("(p - 1) / (m + p - 1)")
    st.subheader("Activation memory")
    st.plotly_chart(go.Figure(go.Scatter(x=list(range(2 * m)), y=[min(i, p) for i in range(2 * m)],
                                         line_shape="hv")), key="memory")
    st.caption("Activations a device holds.")
    with st.expander("Per device"):
        st.caption("closed")
    with st.expander("Text timeline"):
        st.caption("closed")
    st.subheader("Downloads")
    left, right = st.columns(2)
    left.download_button("CSV", data="a,b\n", file_name="a.csv")
    right.download_button("Trace", data="{}", file_name="a.json")
    st.caption("Same numbers on the command line.")
    with st.expander("Time a PyTorch action table"):
        for i in range(2):
            st.file_uploader(f"table {i}", key=f"u{i}")
            st.text_input(f"name {i}", key=f"t{i}")
            st.number_input(f"scale {i}", 0.0, 10.0, 1.0, key=f"x{i}")
            st.number_input(f"offset {i}", 0.0, 10.0, 1.0, key=f"o{i}")
        b1, b2 = st.columns(2)
        b1.button("Simulate", key="b1")
        b2.button("Clear", key="b2")
