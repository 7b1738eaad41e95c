"""Plotly figures of the Pipeline page, drawn from core.pipeline.timeline_view's bounded views (no formulas here).

- gantt(): one lane per device, time on a numeric axis. A bar view draws every op (colour = kind,
  lighter on odd chunks, micro-batch number on the bar when it fits, op details on hover, idle in
  light grey); an aggregated view draws an image whose pixel (device, time bin) mixes the kinds'
  colours by their busy share (fainter = more idle). Several views stack on one shared time axis.
- memory(): micro-batches held per device over time (lines for up to MAX_LINES devices, else a
  heatmap aligned with the Gantt lanes); peaks(): peak held per device, one bar group per schedule.
The time cursor veils everything after it in the page's background colour, so the schedule
appears step by step on a projector.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.pipeline.timeline_view import FB, KIND_LABELS, KIND_TITLES, NUM_KINDS, Bars, Heat, TimelineView

COLORS = ("#4c78a8", "#f58518", "#e45756", "#54a24b", "#72b7b2", "#9d5fb0")  # F B I W R F&B (colour-blind safe)
IDLE = "rgba(128, 128, 128, 0.20)"
IDLE_RGBA = (128, 128, 128, 51)
CURSOR = "#d62728"
MAX_LINES = 16  # devices drawn as separate memory lines; more become a heatmap


def fonts(presentation: bool) -> dict[str, int]:
    """Font sizes (px) for normal and projector use."""
    return {"base": 22, "title": 26, "bar": 16, "min_bar": 14} if presentation else \
        {"base": 14, "title": 16, "bar": 12, "min_bar": 10}


def modebar_config(filename: str, image_format: str = "png") -> dict:
    """st.plotly_chart config: the camera button saves `filename`.png/.svg at twice the screen resolution."""
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": image_format, "filename": filename, "scale": 2},
        "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"],
    }


def _lighter(hex_color: str, amount: float = 0.45) -> str:
    rgb = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)], dtype=float)
    mixed = rgb + (255.0 - rgb) * amount
    return "#" + "".join(f"{int(round(c)):02x}" for c in mixed)


_SHADES = tuple((c, _lighter(c)) for c in COLORS)


def _lane_height(p: int, rows: int, presentation: bool) -> int:
    """Pixels per device lane: roomy for a few devices, compact for 64 (the figure stays on screen)."""
    budget = (700 if presentation else 560) / max(1, rows) ** 0.5
    return int(np.clip(budget / p, 10, 60 if presentation else 46))


def gantt(views: Sequence[tuple[str, TimelineView]], cursor: float | None = None, *, presentation: bool = False,
          veil: str = "#ffffff") -> go.Figure:
    """Stacked timelines (one subplot per titled view) sharing one numeric time axis."""
    f = fonts(presentation)
    n = len(views)
    lane = _lane_height(max(v.p for _, v in views), n, presentation)
    heights = [v.p * lane + 30 for _, v in views]
    fig = make_subplots(rows=n, cols=1, shared_xaxes=True, vertical_spacing=min(0.08, 60 / sum(heights)),
                        row_heights=heights, subplot_titles=[t for t, _ in views] if n > 1 else None)
    shown: set[int] = set()
    for row, (_, view) in enumerate(views, start=1):
        if view.bars is not None:
            _bar_traces(fig, view, view.bars, row, shown, f["bar"])
        else:
            _heat_traces(fig, view, view.heat, row, shown)
        ticks = _device_ticks(view.p)
        fig.update_yaxes(range=[view.p - 0.5, -0.5], tickvals=ticks, ticktext=[f"device {d}" for d in ticks],
                         showgrid=False, zeroline=False, scaleanchor=False, row=row, col=1)  # image: no square pixels
    span = max(v.makespan for _, v in views)
    fig.update_xaxes(range=[0, span * 1.005 if span > 0 else 1], showgrid=True, zeroline=False)
    fig.update_xaxes(title_text="time (units of t_f, t_b, t_w)", row=n, col=1)
    top = int(2 * 1.9 * f["base"]) + 12 + (f["title"] + 14 if n > 1 else 0)  # two legend rows, then subplot titles
    fig.update_layout(
        barmode="overlay", bargap=0.0, height=sum(heights) + top + 90 + 30 * n,
        margin={"l": 10, "r": 10, "t": top, "b": 10},
        font={"size": f["base"]}, uniformtext={"minsize": f["min_bar"], "mode": "hide"},
        legend={"orientation": "h", "yref": "container", "yanchor": "top", "y": 1.0, "xanchor": "left", "x": 0,
                "font": {"size": f["base"]}},
        hoverlabel={"font": {"size": f["base"]}}, plot_bgcolor="rgba(0,0,0,0)",
    )
    fig.update_annotations(font_size=f["title"])
    if cursor is not None and cursor < span:
        _veil(fig, cursor, span, veil)
    return fig


def _device_ticks(p: int) -> list[int]:
    step = 1 if p <= 16 else 2 if p <= 32 else 4
    return list(range(0, p, step))


def _bar_traces(fig: go.Figure, view: TimelineView, bars: Bars, row: int, shown: set[int], size: int) -> None:
    devices = np.arange(view.p)
    fig.add_trace(go.Bar(orientation="h", y=devices, x=np.full(view.p, view.makespan), base=np.zeros(view.p),
                         width=0.8, marker={"color": IDLE, "line": {"width": 0}}, name="idle", hoverinfo="skip",
                         legendgroup="idle", showlegend=-1 not in shown), row=row, col=1)
    shown.add(-1)
    custom = np.column_stack([bars.micro, bars.chunk, bars.stage, bars.start, bars.end, bars.pair_micro,
                              bars.pair_stage, bars.device]).astype(float)
    for k in range(NUM_KINDS):
        sel = np.flatnonzero(bars.kind == k)
        if not sel.size:
            continue
        odd = (bars.chunk[sel] % 2).astype(int)
        shade, ink = np.array(_SHADES[k])[odd], np.array(["#ffffff", "#111418"])[odd]
        fig.add_trace(go.Bar(
            orientation="h", y=bars.device[sel], x=bars.dur[sel], base=bars.start[sel], width=0.8,
            marker={"color": shade, "line": {"width": 0.5, "color": "rgba(255,255,255,0.6)"}},
            text=bars.label[sel], textposition="inside", insidetextanchor="middle", textangle=0,
            textfont={"color": ink, "size": size}, constraintext="both", cliponaxis=True,
            customdata=custom[sel], hovertemplate=_hover(k), name=f"{KIND_LABELS[k]}: {KIND_TITLES[k]}",
            legendgroup=KIND_LABELS[k], showlegend=k not in shown), row=row, col=1)
        shown.add(k)


def _hover(k: int) -> str:
    """Hover text of a bar of kind k (customdata: micro, chunk, stage, start, end, pair micro, pair stage, device)."""
    where = "device %{customdata[7]}, start %{customdata[3]:.4g}, end %{customdata[4]:.4g}<extra></extra>"
    if k == FB:
        return ("<b>F%{customdata[5]} + B%{customdata[0]}</b>: " + KIND_TITLES[k] + "<br>forward of micro-batch "
                "%{customdata[5]} (stage %{customdata[6]}) with the backward of micro-batch %{customdata[0]} "
                "(stage %{customdata[2]})<br>" + where)
    return (f"<b>{KIND_LABELS[k]}%{{customdata[0]}}</b>: {KIND_TITLES[k]} of micro-batch %{{customdata[0]}}<br>"
            "stage %{customdata[2]}, chunk %{customdata[1]}<br>" + where)


def heat_rgba(heat: Heat) -> np.ndarray:
    """(p, bins, 4) uint8: each pixel the kinds' colours mixed by share; opacity grows with the busy share."""
    colors = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in COLORS], dtype=np.float32)
    share = heat.share  # (p, kinds, bins)
    busy = share.sum(axis=1)  # (p, bins)
    mix = np.einsum("pkb,kc->pbc", share, colors) / np.maximum(busy, 1e-9)[..., None]
    rgb = np.where(busy[..., None] > 1e-6, mix, np.array(IDLE_RGBA[:3], dtype=np.float32))
    alpha = IDLE_RGBA[3] + (255 - IDLE_RGBA[3]) * np.clip(busy, 0, 1)
    return np.concatenate([rgb, alpha[..., None]], axis=-1).round().astype(np.uint8)


def _heat_traces(fig: go.Figure, view: TimelineView, heat: Heat, row: int, shown: set[int]) -> None:
    edges = heat.edges
    dx = float(edges[1] - edges[0])
    present = [k for k in range(NUM_KINDS) if heat.share[:, k].any()]
    percent = np.rint(np.moveaxis(heat.share[:, present], 1, 2) * 100).astype(np.uint8)  # (p, bins, kinds present)
    lines = "<br>".join(f"{KIND_LABELS[k]} %{{customdata[{j}]}}%" for j, k in enumerate(present))
    fig.add_trace(go.Image(
        z=heat_rgba(heat), colormodel="rgba", zmin=[0, 0, 0, 0], zmax=[255, 255, 255, 255], x0=dx / 2, dx=dx,
        y0=0, dy=1, customdata=percent,
        hovertemplate=f"device %{{y}}, time %{{x:.4g}} (bin of {dx:.3g})<br>busy share:<br>{lines}<extra></extra>",
        name="busy share"), row=row, col=1)
    for k in range(NUM_KINDS):  # legend entries: the image has none
        if k in shown or not heat.share[:, k].any():
            continue
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", marker={"color": COLORS[k], "size": 12,
                                 "symbol": "square"}, name=f"{KIND_LABELS[k]}: {KIND_TITLES[k]}",
                                 legendgroup=KIND_LABELS[k]), row=row, col=1)
        shown.add(k)


def _veil(fig: go.Figure, t: float, span: float, color: str) -> None:
    fig.add_shape(type="rect", xref="x", yref="paper", x0=t, x1=span * 1.005, y0=0, y1=1, fillcolor=color,
                  opacity=0.78, line={"width": 0}, layer="above")
    fig.add_shape(type="line", xref="x", yref="paper", x0=t, x1=t, y0=0, y1=1,
                  line={"color": CURSOR, "width": 3, "dash": "dash"}, layer="above")


def memory(view: TimelineView, cursor: float | None = None, *, presentation: bool = False,
           veil: str = "#ffffff") -> go.Figure:
    """Activation memory (micro-batches held, full-stage units) per device over time."""
    f = fonts(presentation)
    mem = view.memory
    fig = go.Figure()
    if view.p <= MAX_LINES:
        for d in range(view.p):
            if mem.steps is not None:
                x, y = mem.steps[d]
            else:  # the maximum within each bin, drawn as a step: a peak is never lost
                x, y = mem.edges, np.append(mem.peak[d], mem.peak[d, -1])
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line={"shape": "hv", "width": 2.5},
                                     name=f"device {d}",
                                     hovertemplate=f"device {d}<br>time %{{x:.4g}}<br>held %{{y:.4g}}<extra></extra>"))
        fig.update_yaxes(title_text="micro-batches held", rangemode="tozero")
        height = 320 if not presentation else 420
    else:
        centers = (mem.edges[:-1] + mem.edges[1:]) / 2
        fig.add_trace(go.Heatmap(z=mem.peak, x=centers, y=np.arange(view.p), colorscale="Viridis",
                                 colorbar={"title": {"text": "held"}},
                                 hovertemplate="device %{y}<br>time %{x:.4g}<br>held (max in bin) %{z:.4g}"
                                               "<extra></extra>"))
        ticks = _device_ticks(view.p)
        fig.update_yaxes(range=[view.p - 0.5, -0.5], tickvals=ticks, ticktext=[f"device {d}" for d in ticks])
        height = 520 if not presentation else 640
    fig.update_xaxes(title_text="time", range=[0, view.makespan * 1.005 if view.makespan > 0 else 1])
    fig.update_layout(height=height, margin={"l": 10, "r": 10, "t": 20, "b": 10}, font={"size": f["base"]},
                      legend={"font": {"size": f["base"]}}, hoverlabel={"font": {"size": f["base"]}})
    if cursor is not None and cursor < view.makespan:
        _veil(fig, cursor, view.makespan, veil)
    return fig


def peaks(rows: Sequence[tuple[str, Sequence[float]]], *, presentation: bool = False) -> go.Figure:
    """Peak micro-batches held per device, one bar group per schedule (compare mode)."""
    f = fonts(presentation)
    fig = go.Figure()
    for name, values in rows:
        fig.add_trace(go.Bar(x=np.arange(len(values)), y=np.asarray(values, dtype=float), name=name,
                             hovertemplate=f"{name}<br>device %{{x}}<br>peak held %{{y:.4g}}<extra></extra>"))
    fig.update_layout(barmode="group", height=360 if not presentation else 460, font={"size": f["base"]},
                      margin={"l": 10, "r": 10, "t": 20, "b": 10}, legend={"font": {"size": f["base"]}},
                      xaxis={"title": {"text": "device"}, "dtick": 1 if max(len(v) for _, v in rows) <= 16 else 4},
                      yaxis={"title": {"text": "peak micro-batches held"}, "rangemode": "tozero"})
    return fig
