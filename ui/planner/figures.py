"""The Planner page's table and chart: core's candidate columns renamed with their units, and the trade-off of
step time (or MFU) against memory per GPU. No formula here: bytes become GB through core.units, shares are
shown with Streamlit's percent format.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core import units
from core.views.planner import BREAKDOWN_COLUMNS as COLUMN
from core.views.planner import BREAKDOWN_LABELS as LABELS
from ui.shared.layout import is_presentation

FEASIBLE, INFEASIBLE, BEST, LIMIT = "#0072B2", "#BBBBBB", "#D55E00", "#555555"  # Okabe-Ito + grey
PARTS = {"gemm": "#0072B2", "attention": "#56B4E9", "memory_bound": "#009E73", "tp": "#E69F00", "pp": "#F0E442",
         "bubble": "#BBBBBB", "straggler": "#888888", "dp_latency": "#8C2D04", "dp_bandwidth": "#D55E00",
         "a2a": "#882255", "ring": "#44AA99", "optimizer": "#CC79A7", "offload": "#000000",
         "margin": "#DDCC77"}  # step-time parts
X_SPAN = 2.0  # the memory axis shows up to this many times the GPU's memory

COLUMNS = {  # core column -> header with its unit, in display order
    "rank": "Rank", "t": "t", "p": "p", "d": "d", "cp": "cp", "ep": "ep", "replicate": "Copies (HSDP)",
    "step_time_s": "Step time [s]",
    "timing": "Timing", "mfu": "MFU [%]",
    "memory_gb": "Memory per GPU [GB]", "reasons": "Why infeasible", "schedule": "Schedule", "v": "v",
    "micro_batch_size": "Micro-batch [seq]", "m": "m", "zero_stage": "ZeRO", "recompute": "Recompute",
    "sequence_parallel": "SP", "offload": "Offload", "bubble_fraction": "Bubble [% of timeline]",
    "headroom_gb": "Headroom [GB]", "frameworks": "Runs on", "tokens_per_s": "Tokens/s",
    "tp_ratio": "TP comm/compute",
    "pipeline_link": "Pipeline page", "zero_link": "ZeRO page",
}


def mfu_text(mfu: float) -> str:
    """MFU as the page prints it everywhere (the headline, the table, the recommendation): one decimal, in %."""
    return f"{100 * mfu:.1f} %"


def table(frame: pd.DataFrame, gpu_mem_bytes: float) -> tuple[pd.DataFrame, dict]:
    """(display frame, column_config) for st.dataframe: memory as a bar against the whole GPU."""
    out = frame.assign(memory_gb=units.to_gb(frame["memory_bytes"]), headroom_gb=units.to_gb(frame["headroom_bytes"]),
                       mfu=100 * frame["mfu"],
                       reasons=frame["reasons"].map("; ".join), frameworks=frame["frameworks"].map(", ".join))
    if "timing" in out.columns and not out["timing"].astype(bool).any():
        out = out.drop(columns="timing")  # every row timed (feasible only): nothing to say
    if "replicate" in out.columns and not (out["replicate"] > 1).any():
        out = out.drop(columns="replicate")  # no hybrid sharding asked: nothing to say
    out = out[[c for c in COLUMNS if c in out.columns]].rename(columns=COLUMNS)
    cc = st.column_config
    gpu_gb = float(units.to_gb(gpu_mem_bytes))
    config = {
        "Rank": cc.NumberColumn(format="%d", help="Fastest feasible first; memory headroom breaks ties."),
        COLUMNS["memory_gb"]: cc.ProgressColumn(min_value=0.0, max_value=gpu_gb, format="%.1f",
                                                help=f"Model states + ZeRO-3 gathered layers + activations (and, "
                                                     f"counted as a framework stores them, its buffers, allocator "
                                                     f"reserve and CUDA context), against the GPU's {gpu_gb:.1f} GB "
                                                     f"(GB = 1e9 bytes)."),
        COLUMNS["headroom_gb"]: cc.NumberColumn(format="%.1f", help="Usable memory (after the reserve) minus use."),
        COLUMNS["bubble_fraction"]: cc.NumberColumn(format="percent", help="Idle share of the pipeline timeline, "
                                                                           "measured by the simulator."),
        COLUMNS["step_time_s"]: cc.NumberColumn(format="%.2f"),
        COLUMNS["timing"]: cc.TextColumn(help="Empty when the step time is simulated. Only candidates that can be "
                                              "feasible are simulated: those only memory rules out keep every term "
                                              "but the pipeline bubble (CSV); every untimed row says why."),
        COLUMNS["tokens_per_s"]: cc.NumberColumn(format="localized"),
        COLUMNS["mfu"]: cc.NumberColumn(format="%.1f", help="Model FLOPs (causal attention, no recompute) / "
                                        "(step x G x dense peak of the GEMMs' precision)."),
        COLUMNS["tp_ratio"]: cc.NumberColumn(format="%.3f", help="Tensor-parallel bytes / bandwidth over a layer's "
                                                                 "FLOPs / t / rate (Megatron's 2 + 2 all-reduces)."),
        COLUMNS["sequence_parallel"]: cc.CheckboxColumn(),
        "cp": cc.NumberColumn(format="%d", help="Context parallelism: each sequence over cp ranks (G = t p d cp)."),
        "ep": cc.NumberColumn(format="%d", help="Expert parallelism: each MoE layer's routed experts over ep ranks "
                                                "(it regroups t x d x cp, no extra GPUs)."),
        COLUMNS["replicate"]: cc.NumberColumn(format="%d", help="Hybrid sharding: ZeRO shards within d x cp / "
                                                                "copies ranks and keeps that many copies."),
        COLUMNS["reasons"]: cc.TextColumn(width="medium", help="Empty when feasible."),
        COLUMNS["frameworks"]: cc.TextColumn(help="Frameworks that run this layout exactly (megatron, deepspeed, "
                                                  "torch; core/frameworks/<framework>.py names each rule's source)."),
        COLUMNS["pipeline_link"]: cc.LinkColumn(display_text="schedule", help="Open this schedule, p and m on "
                                                                               "the Pipeline page."),
        COLUMNS["zero_link"]: cc.LinkColumn(display_text="memory", help="Open this model, d, ZeRO stage and "
                                                                        "t x p split on the ZeRO page."),
    }
    return out, config


class Built(go.Figure):
    """A figure already built and validated, held as its dict (ui.planner.cache caches these): st.plotly_chart
    serialises a figure through to_dict(), so the dict goes out as it is, without Plotly validating every property
    of it again on each rerun (that took longer than the rest of a Planner rerun)."""

    def __init__(self, spec: dict):
        super().__init__()
        self._spec = spec  # Plotly figures accept new attributes only with a leading underscore

    def to_dict(self) -> dict:
        return self._spec


def tradeoff(points: pd.DataFrame, y: str, gpu_mem_bytes: float, usable_bytes: float,
             presentation: bool | None = None) -> go.Figure:
    """Step time (y = "time") or MFU (y = "mfu") against memory per GPU; infeasible grey, the recommended marked."""
    metric = {"time": "step_time_s", "mfu": "mfu"}[y]
    presentation = is_presentation() if presentation is None else presentation
    size = 22 if presentation else 14
    y_title = "Step time [s]" if metric == "step_time_s" else "MFU [%]"
    traces = []
    for feasible, name, color in ((False, "infeasible", INFEASIBLE), (True, "feasible", FEASIBLE)):
        part = points[points["feasible"] == feasible]
        y = part[metric] if metric == "step_time_s" else part[metric] * 100
        text = [f"#{r:.0f}" if r == r else "infeasible" for r in part["rank"]]
        traces.append(go.Scattergl(
            x=units.to_gb(part["memory_bytes"]), y=y, mode="markers", name=name,
            marker={"color": color, "size": 7 if feasible else 5, "opacity": 0.85 if feasible else 0.5},
            customdata=part[["t", "p", "d", "zero_stage", "recompute"]].to_numpy(), text=text,
            hovertemplate="%{text}: t=%{customdata[0]} p=%{customdata[1]} d=%{customdata[2]} "
                          "ZeRO-%{customdata[3]} %{customdata[4]}<br>%{x:.1f} GB, %{y:.3g}<extra></extra>"))
    best = points[points["rank"] == 1]
    if len(best):
        y = best[metric] if metric == "step_time_s" else best[metric] * 100
        traces.append(go.Scatter(x=units.to_gb(best["memory_bytes"]), y=y, mode="markers", name="recommended",
                                 marker={"color": BEST, "size": 16, "symbol": "star"}))
    # The usable and GPU memory as dashed vertical lines with their labels: what fig.add_vline makes, written out
    # (add_vline costs ~10 ms a line in Plotly's shape handling).
    shapes, notes = [], []
    lines = ((usable_bytes, "usable", "right"), (gpu_mem_bytes, "GPU", "left"))
    if usable_bytes >= 0.99 * gpu_mem_bytes:  # no extra reserve: one line (two labels would sit on each other)
        lines = ((gpu_mem_bytes, "GPU (usable)", "left"),)
    for x, label, side in lines:
        gb = float(units.to_gb(x))
        shapes.append({"type": "line", "x0": gb, "x1": gb, "xref": "x", "y0": 0, "y1": 1, "yref": "y domain",
                       "line": {"color": LIMIT, "dash": "dash"}})
        notes.append({"text": label, "x": gb, "xref": "x", "y": 1, "yref": "y domain", "xanchor": side,
                      "yanchor": "top", "showarrow": False, "font": {"size": size}})
    gpu_gb = float(units.to_gb(gpu_mem_bytes))
    return go.Figure(data=traces, layout={
        "shapes": shapes, "annotations": notes,
        "font": {"size": size}, "height": int(460 * (1.25 if presentation else 1.0)), "margin": {"t": 40, "b": 10},
        "xaxis": {"title": {"text": f"Memory per GPU [GB, 1e9 bytes]; beyond {X_SPAN:g} x the GPU off the chart"},
                  "range": [0, X_SPAN * gpu_gb]},
        "yaxis": {"title": {"text": y_title}},
        "legend": {"orientation": "h", "y": -0.2}, "title": {"text": f"{y_title} against memory per GPU"},
    })


def breakdown(frame: pd.DataFrame, rows: int = 10, presentation: bool | None = None) -> go.Figure:
    """Where each of the first `rows` candidates' step goes: one horizontal bar per candidate, stacked by component
    (core.cost.step_time.BREAKDOWN; the parts add up to the step time)."""
    part = frame[frame["step_time_s"].notna()].head(rows).iloc[::-1]
    labels = [f"#{r['rank']:.0f} {r['t']}x{r['p']}x{r['d']} b{r['micro_batch_size']} Z{r['zero_stage']} "
              f"{r['recompute']}" if r["rank"] == r["rank"] else f"{r['t']}x{r['p']}x{r['d']} (infeasible)"
              for r in part.to_dict("records")]
    presentation = is_presentation() if presentation is None else presentation
    size = 22 if presentation else 14
    traces = []
    for key, color in PARTS.items():
        values = part[COLUMN[key]]
        if not (values > 0).any():
            continue
        traces.append(go.Bar(y=labels, x=values, name=LABELS[key], orientation="h", marker={"color": color},
                             hovertemplate=f"{LABELS[key]}: %{{x:.3g}} s<extra></extra>"))
    return go.Figure(data=traces, layout={  # one constructor call: Plotly validates the layout once
        "barmode": "stack", "font": {"size": size},
        "height": int((120 + 34 * len(part)) * (1.25 if presentation else 1.0)),
        "margin": {"t": 90 if presentation else 70, "b": 10},
        "xaxis": {"title": {"text": "Seconds per step (the parts add up to the step time)"}},
        "legend": {"orientation": "h", "y": -0.25},
        "title": {"text": "Where the step goes<br><sup>the busiest device's operations, its bubble, then what runs "
                          "after the pipeline</sup>"},
    })
