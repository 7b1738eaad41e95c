"""The planner's step time across published scaling series (assets/scaling.json): one model and layout on more
and more GPUs, each row planned with its layout pinned, as `python -m core plan --fix ...` would.

What a series tests is the drift: losses that grow with the cluster (per-layer collectives over more ranks, the
network's bandwidth falling with the servers a ring spans, the slowest of more GPUs) show as an error that moves
along the series, whatever the absolute level the GPU's efficiency fit sets. `ring_fit` reports the ring_loss
that would leave the calibration series without a trend, beside the sourced default it checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from core.params.catalog import document
from core.params.planner import PlannerParams
from core.planner import plan as planner

RING_GRID = (0.0, 0.02, 0.04, 0.06, 0.08, 0.10, 0.12)


@lru_cache(maxsize=1)
def data() -> dict[str, Any]:
    """assets/scaling.json as read."""
    return document("scaling.json")


def params_of(series: dict, row: dict, assumptions: dict | None = None) -> PlannerParams:
    """The PlannerParams pinning one row of a series: its model, GPUs, batch and layout, its software's switches."""
    lay, spec = series["layout"], dict(series["model"])
    model = {"model": spec.pop("preset")} if "preset" in spec else {"model": "custom", **spec}
    t, p = lay["t"], lay["p"]
    return PlannerParams(
        **model, gpu=series["gpu"], precision=series["precision"], gpus=row["gpus"], batch=row["batch"],
        mb_sizes=(float(lay["micro_batch"]),), fix_t=t, fix_p=p, fix_d=row["gpus"] // (t * p), zero=lay["zero"],
        schedule=lay["schedule"], v=max(lay["v"], 2), recompute=lay["recompute"],
        sp="on" if lay["sequence_parallel"] else "off", offload="none", reshard="on",
        **{**series.get("software", {}), **(assumptions or {})})


def rows(assumptions: dict | None = None, roles: tuple[str, ...] = ("calibration", "held-out")) -> pd.DataFrame:
    """One row per published point (of series with those roles): series, GPUs, published and predicted seconds,
    error, the parts that grow."""
    out = []
    for s in (s for s in data()["series"] if s["role"] in roles):
        for r in s["rows"]:
            got = planner.plan(params_of(s, r, assumptions)).frame.iloc[0]
            out.append({"series": s["key"], "label": s["label"], "role": s["role"], "source": s["source"],
                        "gpus": r["gpus"], "batch": r["batch"], "m": int(got["m"]), "published_s": r["published_s"],
                        "derived": bool(r.get("derived", False)), "predicted_s": float(got["step_time_s"]),
                        "error": float(got["step_time_s"]) / r["published_s"] - 1.0, "fits": bool(got["fits"]),
                        "bubble_s": float(got["bubble_s"]), "straggler_s": float(got["straggler_s"]),
                        "dp_exposed_s": float(got["dp_exposed_s"]), "dp_latency_s": float(got["dp_latency_s"])})
    return pd.DataFrame(out)


@dataclass(frozen=True)
class Series:
    key: str
    role: str
    points: int
    mean_abs_error: float
    signed_mean_error: float
    drift: float  # max error - min error along the series


def summarize(frame: pd.DataFrame) -> list[Series]:
    """Per series: mean |error|, signed mean and drift."""
    out = []
    for key, part in frame.groupby("series", sort=False):
        e = part["error"].to_numpy()
        out.append(Series(str(key), str(part["role"].iloc[0]), int(e.size), float(np.abs(e).mean()), float(e.mean()),
                          float(e.max() - e.min())))
    return out


def ring_fit(grid: tuple[float, ...] = RING_GRID) -> dict[str, float]:
    """The ring_loss (of `grid`) whose calibration-series errors have the least trend against log2(GPUs), and the
    trend (error per doubling of GPUs) it leaves, beside the default's."""
    def trend(value: float) -> float:
        cal = rows({"ring_loss": value}, roles=("calibration",))
        return float(np.polyfit(np.log2(cal["gpus"].to_numpy(float)), cal["error"].to_numpy(), 1)[0])

    trends = {v: trend(v) for v in grid}
    best = min(trends, key=lambda v: abs(trends[v]))
    return {"fitted_ring_loss": best, "fitted_trend_per_doubling": trends[best],
            "trends": {f"{v:g}": t for v, t in trends.items()}}


@dataclass(frozen=True)
class Scaling:
    steps: pd.DataFrame
    fit: dict  # ring_fit: the ring_loss the calibration series asks for, beside the default

    def summary(self) -> list[Series]:
        return summarize(self.steps)

    def to_json(self) -> dict[str, Any]:
        def plain(v: Any) -> Any:
            return v.item() if isinstance(v, np.generic) else v
        return {"rows": [{k: plain(v) for k, v in r.items()} for r in self.steps.to_dict("records")],
                "series": [vars(s) for s in self.summary()], "ring_fit": self.fit, "sources": data()["sources"]}


def validate(assumptions: dict | None = None) -> Scaling:
    return Scaling(rows(assumptions), ring_fit())
