"""The common layout of the memory figures (the ZeRO page's and the Lecture page's): title, fonts sized for the
room (larger in presentation mode, ui.shared.layout.is_presentation), the legend under the plot."""

from __future__ import annotations

import plotly.graph_objects as go

from ui.shared.layout import is_presentation


def font_size() -> int:
    return 22 if is_presentation() else 15


def style(fig: go.Figure, title: str, *, height: int = 420, legend_below: bool = True, width: int = 440) -> go.Figure:
    """Common layout: title, fonts sized for the room, legend under the plot, compact margins.

    The legend sits at the bottom of the figure (container coordinates) and the bottom margin is made tall enough
    for its rows and the x axis above it, so no legend entry lands on a tick label or the axis title, and it stays
    inside the chart. `width`: about the chart's width on a 1280-pixel projector (half the page for the ZeRO page's
    side-by-side charts), to count how many legend entries share a row.
    """
    size = font_size()
    present = is_presentation()
    rows = _legend_rows(fig, size, width) if legend_below else 0
    bottom = int(3.4 * size) + int(rows * 1.45 * size) + 10
    fig.update_layout(
        title={"text": title, "font": {"size": size + 3}},
        font={"size": size},
        height=int(height * (1.25 if present else 1.0)) + (bottom if legend_below else 0),
        margin={"l": 10, "r": 10, "t": 60, "b": bottom if legend_below else 10},
        legend={"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0, "x": 0, "xanchor": "left"}
        if legend_below else {},
        hoverlabel={"font_size": size},
    )
    # Streamlit's plotly theme sets its own axis and legend fonts: size them explicitly.
    axis = {"tickfont": {"size": size - 1}, "title": {"font": {"size": size}}}
    fig.update_xaxes(**axis)
    fig.update_yaxes(**axis)
    fig.update_layout(legend_font_size=size - 1)
    return fig


def _legend_rows(fig: go.Figure, size: int, width: int) -> int:
    """Rows a horizontal legend needs: entries (symbol + text, about 0.55 em a character) packed into `width`."""
    names = [t.name for t in fig.data if t.name and t.showlegend is not False]
    rows, used = (1 if names else 0), 0.0
    for name in names:
        entry = 40 + 0.55 * (size - 1) * len(name)
        if used and used + entry > width:
            rows, used = rows + 1, 0.0
        used += entry
    return rows
