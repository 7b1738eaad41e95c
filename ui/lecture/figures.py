"""Small live figures for the Lecture page's exercises (plotly, no formulas: every value comes from
core.views.lecture). The memory-versus-N_d figure is the one the ZeRO page draws (ui.shared.memory_curve)."""

from __future__ import annotations

import plotly.graph_objects as go

from core.views.lecture import ConventionAnswer, FitAnswer, MicrobatchAnswer, OneFOneBAnswer
from ui.shared.figure_style import style
from ui.shared.memory_curve import memory_vs_nd

SCHEDULE_COLORS = {"gpipe": "#0072B2", "1f1b": "#D55E00"}
FORMULA_COLOR, SIM_COLOR, TARGET_COLOR, RULE_COLOR = "#444444", "#D55E00", "#009E73", "#CC79A7"


def bubble_vs_m(ans: MicrobatchAnswer) -> go.Figure:
    """Exercise 1: the GPipe idle share against m (closed form as a line, simulations as dots), the target
    and the answer."""
    fig = go.Figure()
    fig.add_scatter(x=ans.curve_m, y=ans.curve_share, mode="lines", name="(p-1)/(m+p-1)",
                    line={"color": FORMULA_COLOR, "width": 3},
                    hovertemplate="m = %{x}: %{y:.2%} idle (closed form)<extra></extra>")
    fig.add_scatter(x=ans.points_m, y=ans.points_share, mode="markers", name="simulated GPipe",
                    marker={"color": SIM_COLOR, "size": 11, "symbol": "circle-open", "line": {"width": 3}},
                    hovertemplate="m = %{x}: %{y:.2%} idle (simulated)<extra></extra>")
    ends = [ans.curve_m[0], ans.curve_m[-1]]
    fig.add_scatter(x=ends, y=[ans.target] * 2, mode="lines+text", text=["", f"target {ans.target:.1%}"],
                    textposition="top left", name="target", showlegend=False, hoverinfo="skip",
                    line={"color": TARGET_COLOR, "width": 2, "dash": "dash"})
    fig.add_scatter(x=[ans.m, ans.m], y=[0, ans.curve_share.max()], mode="lines+text",
                    text=["", f" m = {ans.m:,}"], textposition="bottom right", showlegend=False, hoverinfo="skip",
                    line={"color": TARGET_COLOR, "width": 2, "dash": "dot"})
    fig.add_scatter(x=[ans.rule_m], y=[ans.rule_share], mode="markers+text", name="GPipe's m = 4p",
                    text=[f"m = 4p = {ans.rule_m:,}"], textposition="top right",
                    marker={"color": RULE_COLOR, "size": 13, "symbol": "diamond"},
                    hovertemplate="GPipe's rule of thumb m = 4p = %{x}: %{y:.2%} idle<extra></extra>")
    fig.update_xaxes(type="log", dtick=1, title="micro-batches m (log scale)")
    fig.update_yaxes(title="idle share of the timeline", tickformat=".0%", rangemode="tozero")
    return style(fig, f"GPipe bubble at p = {ans.p}", height=380, width=880)


def zero_fit_curve(ans: FitAnswer) -> go.Figure:
    """Exercise 2: every stage against N_d with the GPU's memory, marking ZeRO-3's smallest N_d."""
    nd = ans.smallest_nd[3]
    return memory_vs_nd(ans.curve, ans.limits, "GB", nd, ans.usable,
                        title=f"Model states per GPU, {ans.psi:,.0f} parameters")


def held_over_time(ans: OneFOneBAnswer) -> go.Figure:
    """Exercise 3: micro-batches whose activations stage 0 holds, over the simulated step, per schedule."""
    fig = go.Figure()
    for sm, name in ((ans.gpipe, "GPipe"), (ans.one_f_one_b, "1F1B")):
        fig.add_scatter(x=sm.curve_time, y=sm.curve_held, mode="lines", line_shape="hv", name=name,
                        line={"color": SCHEDULE_COLORS[sm.schedule], "width": 3},
                        hovertemplate=f"{name}, t = %{{x:g}}: %{{y:g}} held<extra></extra>")
    fig.update_xaxes(title="time (t_f = 1, t_b = 2)", rangemode="tozero")
    fig.update_yaxes(title="micro-batches held", rangemode="tozero")
    return style(fig, f"Activations held by stage 0, p = {ans.p}, m = {ans.m} ({ans.gb_per_microbatch:g} GB each)",
                 height=360, width=880)


def conventions_bars(ans: ConventionAnswer) -> go.Figure:
    """Exercise 4: the quoted (p-1)/m, its conversion to an idle share, the closed form and the simulation."""
    labels = ["(p-1)/m, relative to ideal", "converted: x / (1 + x)", "(p-1)/(m+p-1)", "simulated idle share"]
    values = [ans.relative, ans.share, ans.formula_share, ans.simulated_share]
    colors = ["#888888", TARGET_COLOR, FORMULA_COLOR, SIM_COLOR]
    fig = go.Figure(go.Bar(x=labels, y=values, marker_color=colors, text=[f"{x:.4f}" for x in values],
                           textposition="outside", hovertemplate="%{x}: %{y:.6f}<extra></extra>"))
    fig.update_yaxes(title="bubble", rangemode="tozero", range=[0, max(values) * 1.25])
    fig.update_xaxes(type="category")
    return style(fig, f"One bubble, two conventions (p = {ans.p}, m = {ans.m})", height=340, width=880)
