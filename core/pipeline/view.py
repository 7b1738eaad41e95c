"""Everything the Pipeline page shows for one parameter set, bounded in size: what the page caches.

A PipelineResult holds the whole timeline (up to 1,048,576 ops, tens of MB); the page needs numbers
and a drawing. `pipeline_view(params)` keeps the numbers (core.pipeline.result's summary, the bubble next
to its closed form in the formula's own convention), a bounded TimelineView, the text timeline when
it is short enough to read, and why an export is not offered. Nothing here pickles to more than a
few MB, so it can go through st.cache_data; the exports themselves are made on demand by
`actions_csv` / `trace_json` (a download click), from core.pipeline.result's own cache.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from core.errors import InputError
from core.params.pipeline import PIPELINE
from core.pipeline.formulas import overstatement
from core.pipeline.render import text_timeline
from core.pipeline.result import PipelineParams, PipelineResult, simulate
from core.pipeline.schedules import REGISTRY, build
from core.pipeline.schedules.ir import Schedule
from core.pipeline.stage_view import balance_hint, stage_table
from core.pipeline.timeline_view import BINS, MAX_BARS, TimelineView, timeline_view
from core.pipeline.trace_export import chrome_trace, pytorch_actions, pytorch_actions_csv

MAX_TEXT_OPS = 20_000  # the page shows the text timeline up to this many ops (the CLI prints any size)
MAX_TRACE_OPS = 200_000  # about 25 MB of trace JSON: larger traces are written by the CLI instead

CONVENTIONS = {
    "makespan": "idle within the whole timeline (0 to the makespan)",
    "span": "idle between each device's own first and last op (Zero Bubble paper)",
}


@dataclass(frozen=True, eq=False)
class PipelineView:
    params: PipelineParams
    summary: dict[str, Any]  # PipelineResult.summary(): plain numbers and lists of length p
    bubble_rows: tuple[dict[str, Any], ...]  # simulated next to the closed form, convention labelled
    timeline: TimelineView
    text: str  # the text timeline ("" when not shown: see text_note)
    text_note: str
    csv_note: str  # why the PyTorch action table is not offered ("" when it is)
    trace_note: str  # why the Chrome trace is not offered as a download ("" when it is)
    notes: tuple[str, ...]  # the schedule's own notes (recompute, no flush, ...)
    stages: tuple[dict[str, Any], ...] = ()  # per-stage layers, time and activations (core.pipeline.stage_view)
    stage_hint: str = ""  # a first/last-stage layer split that balances the embedding and output layer

    @property
    def formula_note(self) -> str:
        """Why there is no closed form ("" when there is one)."""
        return self.summary["formula_note"] or ""

    def headline(self) -> dict[str, Any]:
        """The page's top numbers: makespan, both bubble conventions, peak held and weight versions (max device)."""
        s = self.summary
        return {
            "schedule": self.params.schedule,
            "makespan": s["makespan"],
            "idle share": s["bubble_fraction"],
            "efficiency": s["pipeline_efficiency"],
            "relative to ideal": s["bubble_vs_ideal"],
            "closed form convention": s["formula_convention"],
            "closed form idle share": s["formula_bubble_fraction"],
            "simulated, same convention": s["simulated_bubble_fraction_same_convention"] if s["formula_convention"]
            else None,
            "peak held": max(s["peak_inflight"]),
            "peak activation": max(s["peak_activation"]),
            "weight versions": max(s["weight_versions"]),
            "ops": s["num_ops"],
        }

    def per_device(self) -> list[dict[str, Any]]:
        """One row per device: busy and idle time, peak micro-batches held and pending W, weight versions."""
        s = self.summary
        return [{"device": d, "busy": s["busy"][d], "idle": s["idle"][d], "peak held": s["peak_inflight"][d],
                 "peak activation": s["peak_activation"][d],
                 "peak pending W": s["peak_pending_w"][d], "weight versions": s["weight_versions"][d]}
                for d in range(self.params.p)]


def pipeline_view(params: PipelineParams, max_bars: int = MAX_BARS, bins: int = BINS) -> PipelineView:
    """Simulate `params` (core.pipeline.result's cache) and keep what the page draws. Raises InputError."""
    result = simulate(params)
    tl = result.timeline
    text, text_note = "", ""
    if tl.num_ops > MAX_TEXT_OPS:
        text_note = (f"the text view is shown here for up to {MAX_TEXT_OPS:,} ops (this timeline has "
                     f"{tl.num_ops:,}); print it with: {cli_command(params, '--ascii')}")
    else:
        try:
            text = text_timeline(tl)
        except InputError as exc:
            text_note = str(exc)
    trace_note = ""
    if tl.num_ops > MAX_TRACE_OPS:
        trace_note = (f"{tl.num_ops:,} ops make a trace too large to download here (limit {MAX_TRACE_OPS:,}); "
                      f"write it with: {cli_command(params, '--chrome-trace trace.json')}")
    return PipelineView(params, result.summary(), tuple(bubble_rows(result)), timeline_view(tl, max_bars, bins),
                        text, text_note, _csv_refusal(result.schedule), trace_note, result.schedule.notes,
                        tuple(stage_table(result)), balance_hint(result))


def nearest_runnable(params: PipelineParams, reach: int = 256) -> PipelineParams | None:
    """The same inputs with the closest micro-batch count m that the schedule accepts, or None within `reach`.

    Some schedules refuse some m (interleaved runs rounds of p micro-batches, so m must be a multiple of p;
    DualPipeV needs m >= 2p). Dragging p then refuses most positions; the page draws this instead, and says so.
    Ties go to the larger m (the next whole round).
    """
    top = int(PIPELINE["m"].hi)
    for step in range(1, reach + 1):
        for m in (params.m + step, params.m - step):
            if not 1 <= m <= top:
                continue
            try:
                build(params.schedule, params.p, m, params.v, params.iterations, params.recompute)
                return replace(params, m=m)
            except InputError:
                continue
    return None


def bubble_rows(result: PipelineResult) -> list[dict[str, Any]]:
    """Bubble time, idle share, relative-to-ideal, efficiency (1 - idle share, m/(m+p-1) for GPipe) and how much
    the relative number overstates the idle share, simulated and closed form, per convention.

    The closed form is compared in its own convention; the makespan convention is always listed
    (with no closed-form column when the formula is stated in the span convention).
    """
    formula, _ = result.formula
    order = [formula.convention] if formula else []
    order += [c for c in CONVENTIONS if c not in order]
    rows = []
    for conv in order:
        t, share, rel = result.simulated_in(conv)
        f = formula if formula is not None and formula.convention == conv else None
        for quantity, sim, closed in (
            ("bubble time, worst device", t, f and f.bubble_time),
            ("idle share: bubble / (bubble + ideal)", share, f and f.fraction),
            ("relative to ideal: bubble / ideal", rel, f and f.relative),
            ("pipeline efficiency: ideal / (bubble + ideal)", 1.0 - share, f and 1.0 - f.fraction),
            ("relative / idle share - 1: how much the relative number overstates", overstatement(share),
             f and overstatement(f.fraction)),
        ):
            rows.append({"convention": conv, "quantity": quantity, "simulated": sim,
                         "closed form": None if f is None else closed,
                         "difference": None if f is None else sim - closed})
    return rows


def _csv_refusal(s: Schedule) -> str:
    """Why torch.distributed.pipelining has no action table for `s` ("" when it has one).

    Asked of core.pipeline.trace_export on an empty copy of the schedule: its refusals depend on the schedule,
    not on its ops, and the probe costs nothing even for a million-op schedule.
    """
    probe = Schedule(s.name, s.p, s.v, s.m, tuple(rows[:0] for rows in s.devices), s.stage_map, s.iterations,
                     stages=s.stages)
    try:
        pytorch_actions(probe)
    except InputError as exc:
        return str(exc)
    return ""


def actions_csv(params: PipelineParams) -> str:
    """The PyTorch action table (one CSV row per rank); raises InputError for pipedream."""
    return pytorch_actions_csv(simulate(params).schedule)


def trace_json(params: PipelineParams) -> str:
    """The Chrome/Perfetto trace of the timeline."""
    return chrome_trace(simulate(params).timeline)


def cli_command(params: PipelineParams, extra: str = "") -> str:
    """The `python -m core simulate` command that reproduces `params` (non-default values only)."""
    parts = ["python -m core simulate"]
    for f in fields(params):
        spec, value = PIPELINE[f.name], getattr(params, f.name)
        if value == spec.default or (f.name == "v" and REGISTRY[params.schedule].chunks != "v"):
            continue  # v only counts for the schedules with v chunks per device
        flag = "--" + f.name.replace("_", "-")
        if spec.kind == "bool":
            parts.append(flag)
        elif spec.kind == "floats":
            parts.append(f"{flag} {','.join(_num(x) for x in value)}")
        else:
            parts.append(f"{flag} {_num(value) if spec.kind == 'float' else value}")
    return " ".join(parts + ([extra] if extra else []))


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))
