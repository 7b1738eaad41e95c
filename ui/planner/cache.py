"""The Planner page's cached core calls: core.views.planner's view, figures and exports, each bounded.

The view model (PlanView) is core's (core.views.planner), so tests and the CLI read the same object; here it is
cached per parameter set, and the figures and the table's links are built from the cached view. The CSV of the
candidates is made from the cached view's snapshot when the download is clicked (core.views.planner.candidates_csv):
no second plan.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from core.params import zero_page
from core.params.memory import ZERO
from core.params.pipeline import PIPELINE
from core.params.planner import PlannerParams
from core.views import planner as pv
from core.views.work import planner_work
from ui.planner import figures as fp
from ui.shared.cache import cached
from ui.shared.links import page_link_with_params

ZERO_PAGE_SPECS = {**ZERO, **zero_page.PAGE, **zero_page.CUSTOM, **zero_page.MOE, **zero_page.MLA, **zero_page.ACT}
# A parameter set is keyed by its repr (every field, exactly): Streamlit's own hash walks the dataclass field by
# field, ~0.7 ms, paid by each of the page's five cached calls on every rerun.
BY_REPR = {PlannerParams: repr}
TOP_ROWS = pv.TOP_ROWS
pipeline_params = pv.pipeline_params
zero_params = pv.zero_params


@cached(max_entries=16, max_size="64MB", hash_funcs=BY_REPR, work=planner_work, route=pv.question_route)
def plan_view(q: PlannerParams) -> pv.PlanView:
    """core.views.planner.plan_view for one parameter set."""
    return pv.plan_view(q)


def tradeoff_figure(q: PlannerParams, y: str, presentation: bool) -> fp.Built:
    """ui.planner.figures.tradeoff of the plan's chart points, built once per plan, metric and mode."""
    return fp.Built(_tradeoff_spec(q, y, presentation))


def breakdown_figure(q: PlannerParams, presentation: bool) -> fp.Built:
    """ui.planner.figures.breakdown of the first feasible candidates (or the first candidates when none is)."""
    return fp.Built(_breakdown_spec(q, presentation))


@cached(max_entries=32, hash_funcs=BY_REPR)
def _tradeoff_spec(q: PlannerParams, y: str, presentation: bool) -> dict:
    view = plan_view(q)
    return fp.tradeoff(view.points, y, view.gpu_mem_bytes, view.usable_bytes, presentation).to_dict()


@cached(max_entries=32, hash_funcs=BY_REPR)
def _breakdown_spec(q: PlannerParams, presentation: bool) -> dict:
    return fp.breakdown(plan_view(q).breakdown_rows(), presentation=presentation).to_dict()


@cached(max_entries=32, hash_funcs=BY_REPR)
def export_of(q: PlannerParams, rank: int) -> dict[str, pv.Export]:
    """DeepSpeed, Megatron-LM and FSDP2 exports of the feasible candidate of a given rank (the row comes from the
    cached view: no re-planning)."""
    return pv.exports_of(q, plan_view(q).feasible_row(rank))


@cached(max_entries=32, hash_funcs=BY_REPR)
def table_rows(q: PlannerParams, feasible_only: bool, rows: int) -> pd.DataFrame:
    """The first `rows` candidates with their Pipeline and ZeRO links (cached: links cost ~0.2 ms a row)."""
    view = plan_view(q)
    return with_links(view.rows(feasible_only, rows), view.zero_link_base)


def candidates_csv(q: PlannerParams) -> str:
    """The cached view's candidates as CSV; run when the download is clicked (no plan)."""
    return pv.candidates_csv(plan_view(q))


def pipeline_link(row: pd.Series | dict) -> str:
    return page_link_with_params("pipeline", pv.pipeline_params(row), PIPELINE)


def zero_link(row: pd.Series | dict, base: dict[str, Any]) -> str:
    return page_link_with_params("zero", pv.zero_params(row, base), ZERO_PAGE_SPECS)


def with_links(frame: pd.DataFrame, base: dict[str, Any]) -> pd.DataFrame:
    """`frame` plus a Pipeline and a ZeRO link per row (rows without m, i.e. no batch split, get none; rows
    excluded before any timing, with no costs to simulate, get no Pipeline link)."""
    out = frame.copy()
    rows = out.to_dict("records")  # plain values: a Series per row (iterrows) cost more than the links
    out["pipeline_link"] = [pipeline_link(r) if r["m"] > 0 and math.isfinite(r["tf"]) else None for r in rows]
    out["zero_link"] = [zero_link(r, base) if r["m"] > 0 else None for r in rows]
    return out
