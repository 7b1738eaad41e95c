"""The Planner page's cached core calls, kept modest in size.

`plan_view` runs core.planner.plan once per parameter set and keeps what the page draws: the first TOP_ROWS
candidates (overall and feasible), a bounded set of chart points, the recommendation, the exports of the best
candidate and the notes. The full candidate frame (up to a few hundred thousand rows for odd cluster sizes)
is not cached through st.cache_data: the CSV download rebuilds it on click (`candidates_csv`, run by the
download button in its own thread), where the planner's simulation cache makes the re-plan cheap.

Links to the Pipeline and ZeRO pages are built here from a candidate's settings, in those pages' URL keys
(core.params.pipeline.PIPELINE; core.params.memory.ZERO plus the ZeRO page's own keys in core.params.zero_page), so
they are checked against the target page's specs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from core.cost.step_time import COLUMN
from core.errors import InputError
from core.params import zero_page
from core.params.memory import ZERO
from core.params.pipeline import PIPELINE
from core.params.planner import GPU_KEYS, PlannerParams
from core.planner import plan as planner
from core.planner import result as plan_result
from core.planner.exports import Export, export_all
from core.planner.rank_memory import embedding_params
from core.planner.recommend import Recommendation, recommend
from core.planner.simulation import simulated_costs
from ui import figures_planner as fp
from ui.cache import cached
from ui.links import page_link_with_params

EXPORT_KINDS = ("deepspeed", "megatron", "fsdp")
TOP_ROWS = 1000  # candidates kept per list (the VIEW spec `rows` stops here)
CHART_POINTS = 1500  # per group (feasible, infeasible) on the chart
KEEP = ("rank", "t", "p", "d", "cp", "ep", "etp", "micro_batch_size", "m", "schedule", "v", "zero_stage", "recompute",
        "sequence_parallel", "offload", "memory_bytes", "model_state_bytes", "activation_bytes", "headroom_bytes",
        "fits", "bubble_fraction", "step_time_s", "tokens_per_s", "mfu", "tp_ratio", *COLUMN.values(), "tf", "tb", "tw",
        "first_stage_factor", "last_stage_factor", "feasible", "reasons", "warnings", "frameworks",
        "expert_state_bytes")
ZERO_PAGE_SPECS = {**ZERO, **zero_page.PAGE, **zero_page.CUSTOM, **zero_page.ACT}
# A parameter set is keyed by its repr (every field, exactly): Streamlit's own hash walks the dataclass field by
# field, ~0.7 ms, paid by each of the page's five cached calls on every rerun.
BY_REPR = {PlannerParams: repr}


@dataclass(frozen=True)
class PlanView:
    title: str
    gpu_mem_bytes: float
    usable_bytes: float
    candidates: int
    feasible: int
    simulations: int
    top: pd.DataFrame  # first TOP_ROWS candidates, ranked (infeasible after feasible)
    top_feasible: pd.DataFrame
    points: pd.DataFrame  # chart points: memory_bytes, step_time_s, mfu, feasible, rank
    recommendation: Recommendation
    exports: dict[str, Export]  # of the best feasible candidate
    notes: tuple[str, ...]
    zero_link_base: dict[str, Any]  # the ZeRO page's model/GPU keys for this plan


def _points(frame: pd.DataFrame) -> pd.DataFrame:
    """Candidates with a time and a memory, at most CHART_POINTS feasible (the best) and CHART_POINTS
    infeasible (evenly spaced through the rank order): enough to see the shape of the trade-off."""
    cols = ["memory_bytes", "step_time_s", "mfu", "feasible", "rank", "t", "p", "d", "zero_stage", "recompute"]
    drawn = frame[frame["step_time_s"].notna() & frame["memory_bytes"].notna()]
    feasible = drawn[drawn["feasible"]].head(CHART_POINTS)
    other = drawn[~drawn["feasible"]]
    if len(other) > CHART_POINTS:
        other = other.iloc[:: -(-len(other) // CHART_POINTS)]
    return pd.concat([feasible, other])[cols].reset_index(drop=True)


def _zero_base(result: planner.PlanResult) -> dict[str, Any]:
    q, m = result.params, result.model
    base: dict[str, Any] = {"model": q.model, "gpu": q.gpu, "split": "embedding-on-ends",
                            "embedding": round(embedding_params(m)), "reserve_frac": q.reserve_frac,
                            "act": True}
    if q.model == "custom":
        base |= {"params": round(m.params), "hidden": m.hidden, "heads": m.heads, "layers": m.layers, "seq": m.seq,
                 "vocab": m.vocab}
        if m.is_moe:
            base["expert_params"] = round(m.expert_params)
    elif q.seq:
        base["seq"] = m.seq  # a preset at another length: the ZeRO page's activations use it
    g = result.gpu
    if q.gpu == "custom" or g.key == "custom" or any(getattr(q, k) for k in GPU_KEYS if k != "calibration"):
        base |= {"gpu": "custom", "gpu_mem": g.mem_gb, "gpus_per_node": g.gpus_per_node, "bw": g.inter_gbs}
    return base


@cached(max_entries=16, hash_funcs=BY_REPR)
def plan_view(q: PlannerParams) -> PlanView:
    """core.planner.plan.plan and core.planner.recommend.recommend for one parameter set, trimmed for the page."""
    result = planner.plan(q)
    frame = result.frame[list(KEEP)]
    rec = recommend(result)
    exports = {kind: result.export(kind) for kind in EXPORT_KINDS} if rec.feasible else {}
    m, g = result.model, result.gpu
    active = (f" ({m.params / 1e9:,.1f}B parameters, {m.params_active / 1e9:,.1f}B active per token)"
              if m.is_moe else "")
    return PlanView(
        title=f"{m.name}{active} on {q.gpus:,} x {g.name}, global batch {q.batch:,} sequences of {m.seq:,} tokens",
        gpu_mem_bytes=g.mem_bytes, usable_bytes=result.usable, candidates=len(frame),
        feasible=len(result.feasible), simulations=result.simulations, top=frame.head(TOP_ROWS).copy(),
        top_feasible=frame[frame["feasible"]].head(TOP_ROWS).copy(), points=_points(frame),
        recommendation=rec, exports=exports, notes=result.notes, zero_link_base=_zero_base(result),
    )


def tradeoff_figure(q: PlannerParams, y: str, presentation: bool) -> fp.Built:
    """ui.figures_planner.tradeoff of the plan's chart points, built once per plan, metric and mode."""
    return fp.Built(_tradeoff_spec(q, y, presentation))


def breakdown_figure(q: PlannerParams, presentation: bool) -> fp.Built:
    """ui.figures_planner.breakdown of the first feasible candidates (or the first candidates when none is)."""
    return fp.Built(_breakdown_spec(q, presentation))


@cached(max_entries=32, hash_funcs=BY_REPR)
def _tradeoff_spec(q: PlannerParams, y: str, presentation: bool) -> dict:
    view = plan_view(q)
    return fp.tradeoff(view.points, y, view.gpu_mem_bytes, view.usable_bytes, presentation).to_dict()


@cached(max_entries=32, hash_funcs=BY_REPR)
def _breakdown_spec(q: PlannerParams, presentation: bool) -> dict:
    view = plan_view(q)
    return fp.breakdown(view.top_feasible if view.feasible else view.top, presentation=presentation).to_dict()


@cached(max_entries=32, hash_funcs=BY_REPR)
def export_of(q: PlannerParams, rank: int) -> dict[str, Export]:
    """DeepSpeed, Megatron-LM and FSDP2 exports of the feasible candidate of a given rank (no re-planning: the
    row comes from the cached view)."""
    feasible = plan_view(q).top_feasible
    if not 1 <= rank <= len(feasible):
        raise InputError(f"rank {rank}: choose 1 to {len(feasible):,} (the feasible candidates kept)")
    layout = plan_result.layout_for(q, feasible.iloc[rank - 1])
    return {kind: export for kind, export in zip(EXPORT_KINDS, _all(layout), strict=True)}


def _all(layout) -> tuple[Export, ...]:
    found = export_all(layout)
    return tuple(found[plan_result.EXPORT_KINDS[kind]] for kind in EXPORT_KINDS)


@cached(max_entries=32, hash_funcs=BY_REPR)
def table_rows(q: PlannerParams, feasible_only: bool, rows: int) -> pd.DataFrame:
    """The first `rows` candidates with their Pipeline and ZeRO links (cached: links cost ~0.2 ms a row)."""
    view = plan_view(q)
    return with_links((view.top_feasible if feasible_only else view.top).head(rows), view.zero_link_base)


def candidates_csv(q: PlannerParams) -> str:
    """Every candidate as CSV (core.planner.PlanResult.csv); run when the download is clicked."""
    return planner.plan(q).csv()


def pipeline_params(row: pd.Series | dict) -> dict[str, Any]:
    """The Pipeline page's keys for this candidate's schedule, p, m (and v) with the costs the planner simulated it
    with (core.planner.simulation.simulated_costs): its forward time in milliseconds (seconds when that would not fit
    the page's range), the backward and weight-gradient times and the end stages' cost factors as rounded for
    the simulation, so the page shows the same bubble."""
    q = simulated_costs(row["schedule"], row["tf"], row["tb"], row["tw"], row["first_stage_factor"],
                                row["last_stage_factor"], row["p"])
    ms = 1e3 * float(row["tf"])
    tf = round(ms if ms <= 100.0 else ms / 1e3, 3)
    tf = float(min(max(tf, PIPELINE["tf"].lo), 100.0))

    def clip(key: str, value) -> float:
        return float(min(max(float(value), PIPELINE[key].lo), PIPELINE[key].hi))

    params = {"schedule": row["schedule"], "p": int(row["p"]), "m": int(row["m"]), "tf": tf,
              "tb": clip("tb", round(tf * float(q["tb"]), 6)), "tw": clip("tw", round(tf * float(q["tw"]), 6)),
              "first_stage": clip("first_stage", q["first"]), "last_stage": clip("last_stage", q["last"])}
    if row["schedule"] == "interleaved":
        params["v"] = int(row["v"])
    return params


def zero_params(row: pd.Series | dict, base: dict[str, Any]) -> dict[str, Any]:
    """The ZeRO page's keys for this candidate's model, GPU, N_d = d x cp (the dense weights' ZeRO group), stage,
    t x p split, experts over ep (where the ZeRO page's expert-tp = t matches) and activations at cp."""
    nd, ep = int(row["d"]) * int(row["cp"]), int(row["ep"])
    out = base | {"nd": nd, "stage": str(int(row["zero_stage"])), "t": int(row["t"]), "p": int(row["p"]),
                  "offload": row["offload"], "mb": int(row["micro_batch_size"]),
                  "sequence_parallel": bool(row["sequence_parallel"]), "recompute": row["recompute"],
                  "schedule": row["schedule"], "m": int(row["m"]), "v": int(row["v"]), "cp": int(row["cp"])}
    if ep > 1 and nd % ep == 0 and int(row["etp"]) == int(row["t"]):
        out["ep"] = ep
    return out


def pipeline_link(row: pd.Series | dict) -> str:
    return page_link_with_params("pipeline", pipeline_params(row), PIPELINE)


def zero_link(row: pd.Series | dict, base: dict[str, Any]) -> str:
    return page_link_with_params("zero", zero_params(row, base), ZERO_PAGE_SPECS)


def with_links(frame: pd.DataFrame, base: dict[str, Any]) -> pd.DataFrame:
    """`frame` plus a Pipeline and a ZeRO link per row (rows without m, i.e. no batch split, get none; rows
    excluded before any timing, with no costs to simulate, get no Pipeline link)."""
    out = frame.copy()
    rows = out.to_dict("records")  # plain values: a Series per row (iterrows) cost more than the links
    out["pipeline_link"] = [pipeline_link(r) if r["m"] > 0 and math.isfinite(r["tf"]) else None for r in rows]
    out["zero_link"] = [zero_link(r, base) if r["m"] > 0 else None for r in rows]
    return out
