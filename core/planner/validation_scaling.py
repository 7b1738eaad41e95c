"""The planner's step time across published scaling series (assets/scaling.json): one model and layout on more
and more GPUs. Each point is a row of the validation table (core.planner.validation), predicted by the same call, so
the two tables cannot disagree on a published number.

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
from core.planner import validation

RING_GRID = (0.0, 0.02, 0.04, 0.06, 0.08, 0.10, 0.12)
# What grows or shrinks along a series: step-time terms as validation.step_row names them
GROWING = ("bubble", "straggler", "dp_latency", "dp_bandwidth")


@lru_cache(maxsize=1)
def data() -> dict[str, Any]:
    """assets/scaling.json as read: each series names its points by their assets/validation.json keys."""
    return document("scaling.json")


def _point(key: str) -> dict:
    rows = {r["key"]: r for r in validation.data()["rows"]}
    if key not in rows or rows[key].get("unmatched"):
        raise ValueError(f"assets/scaling.json names {key!r}, which is not a predicted row of assets/validation.json")
    return rows[key]


def rows(assumptions: dict | None = None, roles: tuple[str, ...] = ("calibration", "held-out")) -> pd.DataFrame:
    """One row per published point (of series with those roles), predicted as the validation table predicts it:
    series, GPUs, published and predicted seconds, error, the parts that grow."""
    out = []
    for s in (s for s in data()["series"] if s["role"] in roles):
        for key in s["rows"]:
            row = _point(key)
            got = validation.step_row(row, assumptions)
            out.append({"series": s["key"], "label": s["label"], "role": s["role"], "source": row["source"],
                        "key": key, "gpus": got["gpus"], "d": got["d"], "batch": got["batch"], "m": got["m"],
                        "published_s": got["published_s"], "derived": got["measure"] != "step_time_s",
                        "predicted_s": got["predicted_s"], "error": got["error"], "fits": got["fits"],
                        **{f"{k}_s": got[k] for k in GROWING}})
    return pd.DataFrame(out)


def drift_floor(m, published, d, grid: int = 241) -> float:
    """The least drift (max / min - 1 of predicted / published) any step time c x m + F + g x log2(d) with c > 0 and
    F, g >= 0 reaches on these points (m: the work each pipeline runs, in sequences, so a series whose micro-batch
    size changes stays comparable): the scatter of the published numbers themselves, which no model of a
    per-micro-batch cost plus a per-step cost growing with the data-parallel group can remove."""
    m, pub = np.asarray(m, dtype=float), np.asarray(published, dtype=float)
    logd = np.log2(np.maximum(np.asarray(d, dtype=float), 1.0))
    f = np.concatenate([[0.0], np.geomspace(1e-3, 1e3, grid - 1)])[:, None, None] * m.max()  # F / c
    g = np.concatenate([[0.0], np.geomspace(1e-3, 1e3, grid - 1)])[None, :, None] * m.max()  # g / c
    r = (m + f + g * logd) / pub
    return float((r.max(axis=-1) / r.min(axis=-1)).min() - 1.0)


@dataclass(frozen=True)
class Series:
    key: str
    role: str
    points: int
    mean_abs_error: float
    signed_mean_error: float
    drift: float  # max error - min error along the series
    floor: float  # drift_floor: the least drift the published points allow a per-sequence + per-step model


def summarize(frame: pd.DataFrame) -> list[Series]:
    """Per series: mean |error|, signed mean and drift."""
    out = []
    for key, part in frame.groupby("series", sort=False):
        e = part["error"].to_numpy()
        floor = drift_floor(part["batch"] / part["d"], part["published_s"], part["d"])  # sequences per pipeline
        out.append(Series(str(key), str(part["role"].iloc[0]), int(e.size), float(np.abs(e).mean()), float(e.mean()),
                          float(e.max() - e.min()), floor))
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
                "series": [vars(s) for s in self.summary()], "ring_fit": self.fit,
                "sources": {k: validation.data()["sources"][k] for k in sorted(set(self.steps["source"]))}}


def validate(assumptions: dict | None = None) -> Scaling:
    return Scaling(rows(assumptions), ring_fit())
