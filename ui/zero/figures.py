"""Plotly figures and display tables of the ZeRO page; its curve against N_d, which the Lecture page draws too,
is ui.shared.memory_curve's.

Builders take core's results in bytes and only convert them for display, through core.units (GB = 1e9 or
GiB = 2^30, always named on the axis). No formula lives here: totals, floors, fits and ratios all arrive
from core. Fonts grow in presentation mode (ui.shared.figure_style) so a projector stays readable.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core import units
from core.views.zero import PAPER_NAMES, STAGE_KEYS, STAGE_LABELS
from ui.shared.figure_style import font_size, style
from ui.shared.memory_curve import GPU_COLOR, UNIT_AXIS, to_unit

# Okabe-Ito colours: distinguishable with the common colour-vision deficiencies, and on a projector.
COLORS = {"params": "#0072B2", "grads": "#E69F00", "optimizer": "#009E73", "working": "#CC79A7",
          "gathered": "#56B4E9", "activations": "#D55E00", "framework": "#999999", "gpu": GPU_COLOR,
          "usable": "#777777"}
PARTS = (("params", "parameters"), ("grads", "gradients"), ("optimizer", "optimizer state"),
         ("working", "streamed layer (offloaded params)"), ("gathered", "ZeRO-3 gathered layers"),
         ("activations", "activations"), ("framework", "framework buffers, allocator reserve, CUDA context"))
EXPERT_PARTS = (("expert_params", "params", "expert parameters"), ("expert_grads", "grads", "expert gradients"),
                ("expert_optimizer", "optimizer", "expert optimizer state"))  # hatched, in their dense colour


def both_units(nbytes: float) -> str:
    """'31.41 GB (29.25 GiB)': the headline numbers name both units."""
    return f"{units.fmt_bytes(nbytes, 'GB')} ({units.fmt_bytes(nbytes, 'GiB')})"


def memory_bars(bars, unit: str, gpu_bytes: float, usable: float, selected: str = "all") -> go.Figure:
    """Stacked bytes per GPU for DP and ZeRO 1-3, the GPU's memory as a line, and fit / no fit per bar.

    The bars are labelled by stage number (DP, ZeRO-1, ...: four short labels that fit a projector's half page);
    the ZeRO paper's names are in the hover and the table. The memory lines are legend entries, not labels on the
    plot, where they would collide with the fit labels above the bars."""
    labels = [b.label for b in bars]
    titles = [b.title or b.label for b in bars]
    chosen = None if selected == "all" else STAGE_LABELS[int(selected)]
    opacity = [1.0 if chosen in (None, b.label) else 0.35 for b in bars]
    fig = go.Figure()
    for field, name in PARTS:
        values = np.array([getattr(b, field) for b in bars])
        if not values.any():
            continue
        fig.add_bar(x=labels, y=to_unit(values, unit), name=name, marker={"color": COLORS[field], "opacity": opacity},
                    customdata=titles, hovertemplate=f"%{{customdata}} {name}: %{{y:,.2f}} {unit}<extra></extra>")
    for field, colour, name in EXPERT_PARTS:
        values = np.array([getattr(b, field) for b in bars])
        if values.any():
            fig.add_bar(x=labels, y=to_unit(values, unit), name=name, customdata=titles,
                        marker={"color": COLORS[colour], "opacity": opacity,
                                "pattern": {"shape": "/", "fgcolor": "#ffffff", "solidity": 0.35}},
                        hovertemplate=f"%{{customdata}} {name}: %{{y:,.2f}} {unit}<extra></extra>")
    lines = [(gpu_bytes, f"GPU memory {to_unit(gpu_bytes, unit):,.2f} {unit}", {"color": COLORS["gpu"], "width": 3})]
    if usable < gpu_bytes:
        lines.append((usable, f"usable after reserve {to_unit(usable, unit):,.2f} {unit}",
                      {"color": COLORS["usable"], "width": 2, "dash": "dash"}))
    for value, name, line in lines:  # across the category axis: from the first bar's left edge to the last's right
        fig.add_scatter(x=[-0.5, len(bars) - 0.5], y=[to_unit(value, unit)] * 2, mode="lines", name=name, line=line,
                        hoverinfo="skip", xaxis="x2")
    line = to_unit(gpu_bytes, unit)
    for x, b in zip(labels, bars, strict=True):
        mark = "fits" if b.fits else "does not fit"
        y = to_unit(b.total, unit)
        near = 0.8 * line <= y < line  # just under the GPU line: the label would sit on the line; put it above
        fig.add_annotation(x=x, y=line if near else y, yanchor="bottom", showarrow=False, yshift=3 if near else 0,
                           text=f"<b>{'✓' if b.fits else '✗'} {to_unit(b.total, unit):,.2f}</b><br>{mark}",
                           font={"color": "#1b7f3b" if b.fits else "#b3261e", "size": font_size() - 2})
    top = max(max(to_unit(b.total, unit) for b in bars), to_unit(gpu_bytes, unit))
    fig.update_yaxes(title=f"per GPU, {UNIT_AXIS[unit]}", range=[0, top * 1.3], rangemode="tozero")
    style(fig, "Memory per GPU by stage")
    fig.update_layout(barmode="stack", xaxis={"type": "category", "tickangle": 0},
                      xaxis2={"overlaying": "x", "visible": False, "type": "linear", "range": [-0.5, len(bars) - 0.5]})
    return fig


def fsdp_bars(frame: pd.DataFrame, unit: str, usable: float) -> go.Figure:
    """Peak bytes per GPU of each FSDP wrap policy, by term (core.memory.fsdp.wrap_comparison)."""
    terms = (("sharded states [bytes]", "sharded states", COLORS["optimizer"]),
             ("root params [bytes]", "root unit, gathered", COLORS["params"]),
             ("gathered params [bytes]", "gathered unit(s)", COLORS["working"]),
             ("unsharded grads [bytes]", "unsharded gradients", COLORS["grads"]))
    fig = go.Figure()
    for col, name, color in terms:
        fig.add_bar(y=frame["policy"], x=to_unit(frame[col].to_numpy(), unit), name=name, orientation="h",
                    marker_color=color, hovertemplate=f"%{{y}} {name}: %{{x:,.2f}} {unit}<extra></extra>")
    fig.add_vline(x=to_unit(usable, unit), line={"color": COLORS["gpu"], "width": 3},
                  annotation_text=f"usable {to_unit(usable, unit):,.1f} {unit}", annotation_position="top")
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title=f"peak per GPU, {UNIT_AXIS[unit]}")
    fig.update_yaxes(type="category", title="wrap policy")
    return style(fig, "FSDP peak memory by wrap policy", height=340, width=880)


# --- display tables -----------------------------------------------------------------------------------------


def stage_table(bars, stages: dict, unit: str) -> pd.DataFrame:
    """One row per stage: bytes on the GPU by component, the total, fit, smallest N_d, reduction, traffic."""
    rows = []
    for b in bars:
        r = stages[b.key]
        rows.append({
            "stage": b.label, "ZeRO paper": PAPER_NAMES[STAGE_KEYS.index(b.key)], "offload": b.offload,
            "params [bytes]": b.params, "grads [bytes]": b.grads,
            "optimizer [bytes]": b.optimizer, "expert states [bytes]": b.expert_params + b.expert_grads
            + b.expert_optimizer, "streamed layer [bytes]": b.working, "ZeRO-3 gathered [bytes]": b.gathered,
            "activations [bytes]": b.activations, "framework and allocator [bytes]": b.framework,
            "total on GPU [bytes]": b.total,
            "CPU per node [bytes]": b.cpu_per_node, "NVMe per node [bytes]": b.nvme_per_node,
            "NVMe time per step [s]": r["nvme_seconds"], "headroom [bytes]": b.headroom,
            "fits": "yes" if b.fits else "no",
            "smallest N_d that fits": _nd_text(b.smallest_nd),
            "states vs DP [x less]": r["reduction_vs_dp"], "comm [x Psi]": r["comm_psi"],
            "sent per rank [bytes]": r["comm_bytes"], "comm time [s]": r["comm_seconds"],
        } | ({"DeepSpeed GPU [bytes]": r.get("deepspeed_gpu", np.nan),
              "DeepSpeed CPU per node [bytes]": r.get("deepspeed_cpu_per_node", np.nan)}
             if any("deepspeed_gpu" in x for x in stages.values()) else {}))
    frame = pd.DataFrame(rows)
    unused = [c for c in ("expert states [bytes]", "streamed layer [bytes]", "ZeRO-3 gathered [bytes]",
                          "activations [bytes]", "framework and allocator [bytes]",
                          "CPU per node [bytes]",
                          "NVMe per node [bytes]", "NVMe time per step [s]") if not frame[c].any()]
    return units.frame_in(frame.drop(columns=unused), unit)


def _nd_text(value: float) -> str:
    if value != value:  # nan: offloaded stages are not sized by N_d here
        return "-"
    return "never" if math.isinf(value) else f"{value:,.0f}"


def in_unit(frame: pd.DataFrame, unit: str) -> pd.DataFrame:
    return units.frame_in(frame, unit)


def modes_table(modes: dict[str, float], unit: str) -> pd.DataFrame:
    """Per-layer activation bytes of every Korthikanti mode (core.memory.activations.report's "modes")."""
    return in_unit(pd.DataFrame([{"mode": k, "per layer [bytes]": x} for k, x in modes.items()]), unit)


def decimals(values, digits: int = 2) -> int:
    """Decimals for a column: `digits`, or more where a value is small but not zero (0.0004 GB is not "0.00")."""
    x = np.abs(np.asarray(values, dtype=float))
    small = x[np.isfinite(x) & (x > 0)]
    if not small.size:
        return digits
    return int(min(6, max(digits, 1 - math.floor(math.log10(float(small.min()))))))


def number_format(frame: pd.DataFrame, digits: int = 2) -> dict:
    """st.dataframe column_config: decimals for every float column, enough that no small part reads 0 (strings and
    ints untouched)."""
    return {c: st.column_config.NumberColumn(format="%d" if c.endswith("[params]") else
                                             f"%.{decimals(frame[c], digits)}f")
            for c in frame.columns if pd.api.types.is_float_dtype(frame[c])}


def amount(nbytes: float, unit: str) -> str:
    """A headline number: two decimals, none from 1,000 up (so it fits a metric on a projector)."""
    value = to_unit(nbytes, unit)
    return f"{value:,.0f} {unit}" if value >= 1000 else f"{value:,.2f} {unit}"
