"""Plotly figures of the Pipeline page, drawn from core.pipeline.timeline_view's bounded views (no formulas here).

- gantt(): one lane per device, time on a numeric axis. A bar view draws every op (colour = kind,
  lighter on odd chunks, each shade its own legend entry, micro-batch number on the bar when it fits,
  micro-batch, stage, chunk, start and end on hover, idle in light grey); an aggregated view draws an
  image whose pixel (device, time bin) has the colour of the kind that takes most of the bin (fainter =
  image in which each device lane holds one thin stripe per kind, darker where that kind takes more of the
  time bin (hover gives every share). Colours never mix: a blend of two kinds would be a new colour the
  legend does not explain (forward + backward made a mauve that read as DualPipeV's F&B). Several
  views stack on one shared time axis. The time cursor is the page's one state (ui.pipeline.inputs: slider,
  steps, Play / Pause): a figure draws the cursor it is given, and has no animation of its own.
- memory(): micro-batches held per device over time (lines for up to MAX_LINES devices, else a
  heatmap aligned with the Gantt lanes); peaks(): peak held per device, one bar group per schedule.
The time cursor veils everything after it in the page's background colour, so the schedule
appears step by step on a projector.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.views.pipeline import FB, KIND_LABELS, KIND_TITLES, NUM_KINDS, Bars, Heat, TimelineView

# F B I W R F&B: Okabe & Ito's colour-blind-safe palette (blue, orange, vermillion, bluish green, reddish purple,
# black). I (vermillion) against W (bluish green) differ in lightness as well as hue, unlike red against green.
COLORS = ("#0072B2", "#E69F00", "#D55E00", "#009E73", "#CC79A7", "#222222")
IDLE = "rgba(128, 128, 128, 0.20)"
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


# Each kind's colour and the lighter shade of its odd chunks. F&B's second shade is a mid-dark grey: a light grey
# would sit next to the idle lanes and, for deuteranopes, next to W's bluish green (tests/test_figures_pipeline.py).
_SHADES = tuple((c, _lighter(c)) for c in COLORS[:-1]) + ((COLORS[-1], "#5e5e5e"),)


def _ink(hex_color: str) -> str:
    """Text colour on a bar: near-black on light shades, white on dark ones (WCAG relative luminance)."""
    rgb = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)], dtype=float) / 255
    lin = np.where(rgb <= 0.03928, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return "#111418" if float(lin @ [0.2126, 0.7152, 0.0722]) > 0.3 else "#ffffff"


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
    shown: set = set()
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


def _idle_lanes(fig: go.Figure, view: TimelineView, row: int, shown: set) -> None:
    """A light grey lane per device: what no op covers reads as idle."""
    fig.add_trace(go.Bar(orientation="h", y=np.arange(view.p), x=np.full(view.p, view.makespan),
                         base=np.zeros(view.p), width=0.8 if view.bars is not None else 1.0,
                         marker={"color": IDLE, "line": {"width": 0}}, name="idle", hoverinfo="skip",
                         legendgroup="idle", showlegend="idle" not in shown), row=row, col=1)
    shown.add("idle")


def _bar_traces(fig: go.Figure, view: TimelineView, bars: Bars, row: int, shown: set[int], size: int) -> None:
    _idle_lanes(fig, view, row, shown)
    custom = np.column_stack([bars.micro, bars.chunk, bars.stage, bars.start, bars.end, bars.pair_micro,
                              bars.pair_stage, bars.device]).astype(float)
    odd_chunks = sorted({int(c) for c in np.unique(bars.chunk) if c % 2})
    for k in range(NUM_KINDS):
        for parity in (0, 1):
            sel = np.flatnonzero((bars.kind == k) & (bars.chunk % 2 == parity))
            if not sel.size:
                continue
            shade = _SHADES[k][parity]
            name = f"{KIND_LABELS[k]}: {KIND_TITLES[k]}"
            if parity:  # the lighter shade of odd chunks gets its own legend entry
                which = f"chunk {odd_chunks[0]}" if len(odd_chunks) == 1 else "odd chunks"
                name = f"{KIND_LABELS[k]} {which}: {KIND_TITLES[k]}, lighter"
            fig.add_trace(go.Bar(
                orientation="h", y=bars.device[sel], x=bars.dur[sel], base=bars.start[sel], width=0.8,
                marker={"color": shade, "line": {"width": 0.5, "color": "rgba(255,255,255,0.6)"}},
                text=bars.label[sel], textposition="inside", insidetextanchor="middle", textangle=0,
                textfont={"color": _ink(shade), "size": size}, constraintext="both", cliponaxis=True,
                customdata=custom[sel], hovertemplate=_hover(k), name=name,
                legendgroup=f"{KIND_LABELS[k]}{parity}", showlegend=(k, parity) not in shown), row=row, col=1)
            shown.add((k, parity))


def _hover(k: int) -> str:
    """Hover text of a bar of kind k (customdata: micro, chunk, stage, start, end, pair micro, pair stage, device)."""
    where = "device %{customdata[7]}, start %{customdata[3]:.4g}, end %{customdata[4]:.4g}<extra></extra>"
    if k == FB:
        return ("<b>F%{customdata[5]} + B%{customdata[0]}</b>: " + KIND_TITLES[k] + "<br>forward of micro-batch "
                "%{customdata[5]} (stage %{customdata[6]}) with the backward of micro-batch %{customdata[0]} "
                "(stage %{customdata[2]})<br>" + where)
    return (f"<b>{KIND_LABELS[k]}%{{customdata[0]}}</b>: {KIND_TITLES[k]} of micro-batch %{{customdata[0]}}<br>"
            "stage %{customdata[2]}, chunk %{customdata[1]}<br>" + where)


def heat_rgba(heat: Heat) -> tuple[np.ndarray, list[int]]:
    """(p * rows, bins, 4) uint8 and the kinds drawn: each device lane is one stripe per kind present (its colour,
    opaque where the kind fills the bin, clear where it is absent) and a clear gap row between devices."""
    kinds = [k for k in range(NUM_KINDS) if heat.share[:, k].any()]
    p, bins = heat.share.shape[0], heat.share.shape[2]
    rows = len(kinds) + 1
    out = np.zeros((p, rows, bins, 4), dtype=np.uint8)
    for j, k in enumerate(kinds):
        out[:, j, :, :3] = [int(COLORS[k][i:i + 2], 16) for i in (1, 3, 5)]
        out[:, j, :, 3] = np.rint(255 * np.clip(heat.share[:, k], 0, 1))
    return out.reshape(p * rows, bins, 4), kinds


def png_uri(rgba: np.ndarray) -> str:
    """A (h, w, 4) uint8 image as a PNG data URI: a few KB where the same pixels as numbers would be hundreds."""
    h, w, _ = rgba.shape
    raw = b"".join(b"\x00" + rgba[i].tobytes() for i in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _heat_traces(fig: go.Figure, view: TimelineView, heat: Heat, row: int, shown: set) -> None:
    edges = heat.edges
    dx = float(edges[1] - edges[0])
    rgba, kinds = heat_rgba(heat)
    rows = len(kinds) + 1
    _idle_lanes(fig, view, row, shown)
    fig.add_trace(go.Image(source=png_uri(rgba), x0=dx / 2, dx=dx, y0=-0.5 + 0.5 / rows, dy=1 / rows,
                           hoverinfo="skip", name="busy share"), row=row, col=1)
    percent = np.rint(np.moveaxis(heat.share[:, kinds], 1, 2) * 100).astype(np.uint8)  # (p, bins, kinds drawn)
    lines = "<br>".join(f"{KIND_LABELS[k]} %{{customdata[{j}]}}%" for j, k in enumerate(kinds))
    centers = (edges[:-1] + edges[1:]) / 2
    fig.add_trace(go.Heatmap(  # invisible, for hover: every kind's share of the bin under the pointer
        z=heat.busy, x=centers, y=np.arange(view.p), customdata=percent, opacity=0, showscale=False,
        hovertemplate=f"device %{{y}}, time %{{x:.4g}} (bin of {dx:.3g})<br>busy share:<br>{lines}<extra></extra>",
        name="shares", showlegend=False), row=row, col=1)
    for j, k in enumerate(kinds):  # legend entries (the image has none): one stripe per kind, top to bottom
        if ("heat", k) in shown:
            continue
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", marker={"color": COLORS[k], "size": 12,
                                 "symbol": "square"}, name=f"{KIND_LABELS[k]}: {KIND_TITLES[k]} (stripe {j + 1})",
                                 legendgroup=f"heat{k}"), row=row, col=1)
        shown.add(("heat", k))
    if "faint" not in shown:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="fainter: less of the bin",
                                 marker={"color": COLORS[0], "opacity": 0.35, "size": 12, "symbol": "square"},
                                 legendgroup="faint"), row=row, col=1)
        shown.add("faint")


def _veil_shapes(t: float, span: float, color: str) -> list[dict]:
    """Everything after time t veiled in the page's background colour, and the cursor line at t."""
    return [
        {"type": "rect", "xref": "x", "yref": "paper", "x0": t, "x1": span * 1.005, "y0": 0, "y1": 1,
         "fillcolor": color, "opacity": 0.78, "line": {"width": 0}, "layer": "above"},
        {"type": "line", "xref": "x", "yref": "paper", "x0": t, "x1": t, "y0": 0, "y1": 1,
         "line": {"color": CURSOR, "width": 3, "dash": "dash"}, "layer": "above"},
    ]


def _veil(fig: go.Figure, t: float, span: float, color: str) -> None:
    for shape in _veil_shapes(t, span, color):
        fig.add_shape(**shape)


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
