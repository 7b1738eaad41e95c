"""Per-GPU model states against the data-parallel degree N_d: the ZeRO page's curve, which the Lecture page's
exercise 2 draws too. Bytes arrive from core and are only converted for display, through core.units (GB = 1e9 or
GiB = 2^30, always named on the axis)."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from core import units
from core.views.zero import STAGE_KEYS, STAGE_LABELS, stage_title
from ui.shared.figure_style import style

STAGE_COLORS = ("#444444", "#332288", "#882255", "#44AA99")  # Paul Tol's muted: unlike the ZeRO page's part colours
GPU_COLOR = "#333333"
UNIT_AXIS = {"GB": "GB (1e9 B)", "GiB": "GiB (2^30 B)"}


def to_unit(nbytes, unit: str):
    """Bytes in the display unit (core.units), arrays or scalars."""
    return units.to_gb(nbytes) if unit == "GB" else units.to_gib(nbytes)


def memory_vs_nd(curve: pd.DataFrame, limits: dict[int, float], unit: str, nd: int | None, gpu_bytes: float,
                 title: str = "Per-GPU model states against N_d") -> go.Figure:
    """Log-log totals per stage over N_d, the ZeRO-1 / ZeRO-2 floors (the 4x and 8x limits), the GPU line.

    Reference lines are traces in data coordinates (shapes on a log axis would need log10 coordinates),
    named in the legend rather than labelled on the plot, where labels would collide.
    """
    fig = go.Figure()
    x = curve["nd"].to_numpy()
    ends = [x[0], x[-1]]
    for s, key in enumerate(STAGE_KEYS):
        fig.add_scatter(x=x, y=to_unit(curve[f"{key} [bytes]"].to_numpy(), unit), mode="lines",
                        name=stage_title(s), line={"color": STAGE_COLORS[s], "width": 3},
                        hovertemplate=f"{stage_title(s)}, N_d %{{x:,}}: %{{y:,.3g}} {unit}<extra></extra>")
    for s in (1, 2):
        floor = float(curve[f"{STAGE_KEYS[s]} floor [bytes]"].iloc[0])
        if floor <= 0 or not math.isfinite(limits[s]):
            continue
        fig.add_scatter(x=ends, y=[to_unit(floor, unit)] * 2, mode="lines", hoverinfo="skip",
                        name=f"{STAGE_LABELS[s]} floor {to_unit(floor, unit):,.2f} {unit} = DP / {limits[s]:g}",
                        line={"color": STAGE_COLORS[s], "width": 2, "dash": "dot"})
    gpu = to_unit(gpu_bytes, unit)
    fig.add_scatter(x=ends, y=[gpu, gpu], mode="lines", name=f"GPU memory {gpu:,.2f} {unit}", hoverinfo="skip",
                    line={"color": GPU_COLOR, "width": 2, "dash": "dash"})
    low = to_unit(float(curve[f"{STAGE_KEYS[3]} [bytes]"].min()), unit)
    high = to_unit(float(curve[f"{STAGE_KEYS[0]} [bytes]"].max()), unit)
    if nd is not None:
        fig.add_scatter(x=[nd, nd], y=[min(low, gpu), max(high, gpu)], mode="lines", name=f"N_d = {nd:,}",
                        hoverinfo="skip", line={"color": "#888888", "width": 2, "dash": "dashdot"})
    fig.update_xaxes(type="log", dtick=1, title="data-parallel degree N_d, log")
    fig.update_yaxes(type="log", dtick=1, title=f"per GPU, {UNIT_AXIS[unit]}, log")
    return style(fig, title, height=460)
