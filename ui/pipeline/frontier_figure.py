"""The memory/bubble frontier of the Pipeline page: every schedule as a point (peak activation, idle share).

Points on the frontier (no other schedule holds less *and* idles less) are joined by a line; the page's
own schedule is drawn larger. Numbers come from core.pipeline.compare; nothing is computed here.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from ui.pipeline.figures import fonts


def frontier(rows: Sequence[dict], current: str, *, presentation: bool = False) -> go.Figure:
    f = fonts(presentation)
    ok = [r for r in rows if r["peak activation"] is not None]
    fig = go.Figure()
    front = sorted((r for r in ok if r.get("pareto")), key=lambda r: r["peak activation"])
    if len(front) > 1:
        fig.add_trace(go.Scatter(x=[r["peak activation"] for r in front], y=[100 * r["idle share"] for r in front],
                                 mode="lines", line={"dash": "dot", "width": 2}, name="frontier", hoverinfo="skip"))
    fig.add_trace(go.Scatter(
        x=[r["peak activation"] for r in ok], y=[100 * r["idle share"] for r in ok], mode="markers+text",
        text=[r["schedule"] for r in ok], textposition="top center", name="schedules",
        marker={"size": [20 if r["schedule"] == current else 11 for r in ok],
                "symbol": ["star" if r.get("pareto") else "circle" for r in ok]},
        customdata=[[100 * r["relative to ideal"], r["makespan"]] for r in ok],
        hovertemplate="%{text}<br>peak activation %{x:.4g} micro-batches of L/p layers<br>idle share %{y:.2f} %"
                      "<br>relative to ideal %{customdata[0]:.2f} %<br>makespan %{customdata[1]:.4g}<extra></extra>"))
    fig.update_layout(height=420 if not presentation else 560, font={"size": f["base"]}, showlegend=False,
                      margin={"l": 10, "r": 10, "t": 20, "b": 10}, hoverlabel={"font": {"size": f["base"]}},
                      xaxis={"title": {"text": "peak activation, max device (micro-batches of L/p layers)"},
                             "rangemode": "tozero"},
                      yaxis={"title": {"text": "bubble: idle share of the timeline (%)"}, "rangemode": "tozero"})
    return fig
