"""A plan's answer: the ranked candidate frame with the question, model, GPU and assumptions it was computed for,
and what callers do with it (the best row, why nothing is feasible, a row as a Layout, its framework config, CSV,
JSON records).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from core.cost import releases, step_time
from core.errors import InputError
from core.memory import states as memory
from core.model import presets
from core.params.planner import PlannerParams
from core.planner import pins
from core.planner.candidates import resolve
from core.planner.columns import BREAKDOWN_COLUMNS, JSON_KEYS
from core.planner.exports import Export, export_all
from core.planner.layout import Layout

EXPORT_KINDS = {"deepspeed": "deepspeed", "megatron": "megatron", "fsdp": "fsdp2", "fsdp2": "fsdp2", "torch": "fsdp2"}
EXPORT_FRAMEWORK = {"deepspeed": "deepspeed", "megatron": "megatron", "fsdp": "torch", "fsdp2": "torch",
                    "torch": "torch"}


@dataclass(frozen=True, eq=False)
class PlanResult:
    params: PlannerParams
    model: presets.ModelConfig
    gpu: presets.GpuSpec
    precision: str
    bytes_per_param: memory.BytesPerParam
    usable: float  # bytes per GPU for states, working buffers and activations (after the reserve)
    assumptions: step_time.Assumptions
    split: str  # how the parameters are placed over t x p, in words
    frame: pd.DataFrame  # ranked candidates
    notes: tuple[str, ...]  # what the search left out, and why
    simulations: int  # distinct (schedule, p, m, v) simulated for this plan (cache misses)
    narrowed: tuple[str, ...] = ()  # what the work budget narrowed (core.planner.budget), in words
    sim_ops: int = 0  # operations of core.planner.simulation.SIM_BUDGET this plan spent (cache hits cost none)

    @property
    def feasible(self) -> pd.DataFrame:
        return self.frame[self.frame["feasible"]]

    def best(self) -> pd.Series | None:
        f = self.feasible
        return None if f.empty else f.iloc[0]

    def why_empty(self) -> str:
        """One paragraph: why no candidate is feasible (empty string when one is)."""
        if not self.feasible.empty:
            return ""
        pinned = self.conflicts()
        if pinned:
            return "No layout can satisfy these inputs: " + "; ".join(pinned) + "."
        if self.frame.empty:
            return "No candidate layout to evaluate with these inputs: " + (" ".join(self.notes) or "none exists.")
        counts = Counter(r.split(":")[0] for rs in self.frame["reasons"] for r in rs)
        top = "; ".join(f"{k} ({n:,} candidates)" for k, n in counts.most_common(4))
        return f"None of the {len(self.frame):,} candidates is feasible. Most common reasons: {top}."

    def conflicts(self) -> list[str]:
        """Each pinned value (or combination) that no layout satisfies, with its arithmetic."""
        return pins.conflicts(self.params, self.model, self.gpu, self.usable)

    def layout(self, row: pd.Series | int | None = None) -> Layout:
        """The Layout of a candidate (a frame row or its position in the frame; default the best feasible)."""
        if row is None:
            row = self.best()
            if row is None:
                raise InputError("no feasible candidate to export: " + self.why_empty())
        elif isinstance(row, int | np.integer):
            row = self.frame.iloc[int(row)]
        return layout_for(self.params, row, (self.model, self.gpu, self.precision))

    def export(self, kind: str, row: pd.Series | int | None = None) -> Export:
        """DeepSpeed JSON, Megatron-LM command or FSDP2 snippet of a candidate (default the best feasible)."""
        if kind not in EXPORT_KINDS:
            raise InputError(f"export: {kind[:40]!r} is not one of {', '.join(EXPORT_KINDS)}")
        out = export_all(self.layout(row))[EXPORT_KINDS[kind]]
        if out.refused:
            return out
        return replace(out, notes=(*out.notes, releases.timing_note(self.params.release, self.gpu.calibration)))

    def csv(self, top: int | None = None, feasible_only: bool = False) -> str:
        """Every column as CSV (reasons and warnings joined with '; '), in rank order."""
        frame = self.feasible if feasible_only else self.frame
        return frame_csv(frame if top is None else frame.head(top))

    def records(self, top: int | None = None, feasible_only: bool = False) -> list[dict[str, Any]]:
        """JSON-ready candidates (NaN -> None), in rank order."""
        frame = self.feasible if feasible_only else self.frame
        frame = frame if top is None else frame.head(top)
        return [{**{k: _plain(r[k]) for k in JSON_KEYS}, "release": self.params.release,
                 "breakdown": {k: _plain(r[col]) for k, col in BREAKDOWN_COLUMNS.items()}}
                for r in frame.to_dict("records")]


def frame_csv(frame: pd.DataFrame) -> str:
    """Candidates (the frame's rows, any number of them) as CSV: reasons and warnings joined with '; '."""
    frame = frame.copy()
    for col in ("reasons", "warnings", "frameworks"):
        frame[col] = frame[col].map("; ".join)
    frame["rank"] = frame["rank"].astype("Int64")  # 1, 2, ... (empty for infeasible), not 1.0
    return frame.to_csv(index=False)


def layout_for(q: PlannerParams, row: Any, resolved: tuple | None = None) -> Layout:
    """A candidate row (any mapping with the frame's columns) of the question `q` as a core.planner.layout.Layout."""
    model, gpu, precision = resolved or resolve(q)
    return Layout(model=model, gpu=gpu, t=int(row["t"]), p=int(row["p"]), d=int(row["d"]), global_batch=q.batch,
                  micro_batch_size=int(row["micro_batch_size"]), zero_stage=int(row["zero_stage"]),
                  schedule=str(row["schedule"]), v=int(row["v"]), recompute=str(row["recompute"]),
                  sequence_parallel=bool(row["sequence_parallel"]), offload=str(row["offload"]), precision=precision,
                  gpus_per_node=gpu.gpus_per_node, cp=int(row["cp"]), ep=int(row["ep"]), etp=int(row["etp"]),
                  replicate=int(row.get("replicate", 1)), recompute_layers=int(row.get("recompute_layers", 0)),
                  reshard=bool(row.get("reshard", True)),
                  tp_comm_overlap=bool(row.get("tp_comm_overlap", False)),
                  cp_comm=q.cp_comm, moe_dispatcher=q.moe_dispatcher,
                  moe_a2a_overlap=bool(q.moe_a2a_overlap), ends_in_split=bool(q.ends_in_split),
                  grad_dtype=q.grad_dtype, optimizer_dtype=q.optimizer_dtype, loss=q.loss,
                  grouped_gemm=bool(q.grouped_gemm), recompute_modules=q.recompute_modules)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [str(x) for x in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value

