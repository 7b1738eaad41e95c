#!/usr/bin/env python
"""Fit the step-time model's efficiency parameters on the calibration rows of assets/validation.json.

    python scripts/fit_efficiency.py            # print the fit and the errors it gives
    python scripts/fit_efficiency.py --write    # store it in assets/efficiency.json ('fitted' and 'calibration')

Three parameters, the same for every model and GPU (core.cost.rates): gemm_eff (share of peak a large GEMM
sustains), mem_eff (share of HBM bandwidth memory-bound kernels sustain) and gemm_k0 (a GEMM's per-tile overhead in
elements of its inner dimension). They minimise the sum of squared log errors over the rows marked "calibration"
(steps and per-layer times) and nothing else: the held-out rows are only predicted afterwards. The search is a
coarse grid over physical bounds, then a finer grid around the best point (deterministic, no solver needed).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.cost.rates import fitted_values  # noqa: E402
from core.planner import validation  # noqa: E402

BOUNDS = {"gemm_eff": (0.5, 0.95), "mem_eff": (0.5, 0.95), "gemm_k0": (0.0, 1024.0)}
COARSE = {"gemm_eff": 10, "mem_eff": 10, "gemm_k0": 9}
FINE = 5  # points per parameter in the refinement, over two coarse steps around the best


def _paper(source: str) -> str:
    return source.split("-")[0]


def calibration_errors(values: dict[str, float]) -> dict[str, np.ndarray]:
    """Errors of the calibration rows, grouped by publication (Korthikanti's Tables 4 and 5 are one paper)."""
    with fitted_values(**values):
        steps = validation.step_rows(roles=("calibration",))
        layers = validation.layer_rows()
    out: dict[str, list] = {}
    for source, error in zip(steps["source"], steps["error"], strict=True):
        out.setdefault(_paper(source), []).append(error)
    for row in layers[layers["role"] == "calibration"].to_dict("records"):  # forward and backward where published
        split = [row["forward_error"], row["backward_error"]] if np.isfinite(row["forward_error"]) else [row["error"]]
        out.setdefault(_paper(row["source"]), []).extend(split)
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}


def objective(values: dict[str, float]) -> float:
    """Mean squared log error within each source, summed over sources: each publication weighs the same however
    many rows it has (the sources measured different Megatron-LM versions; neither should outvote the other)."""
    return float(sum(np.mean(np.log1p(e) ** 2) for e in calibration_errors(values).values()))


def grid(centre: dict[str, float] | None, steps: dict[str, float] | None) -> list[dict[str, float]]:
    axes = {}
    for k, (lo, hi) in BOUNDS.items():
        if centre is None:
            axes[k] = np.linspace(lo, hi, COARSE[k])
        else:
            axes[k] = np.clip(np.linspace(centre[k] - steps[k], centre[k] + steps[k], FINE), lo, hi)
    return [dict(zip(axes, map(float, pt), strict=True)) for pt in itertools.product(*axes.values())]


def fit() -> tuple[dict[str, float], float]:
    coarse_steps = {k: (hi - lo) / (COARSE[k] - 1) for k, (lo, hi) in BOUNDS.items()}
    best, best_cost = None, np.inf
    for values in grid(None, None):
        cost = objective(values)
        if cost < best_cost:
            best, best_cost = values, cost
    for values in grid(best, coarse_steps):
        cost = objective(values)
        if cost < best_cost:
            best, best_cost = values, cost
    rounded = {"gemm_eff": round(best["gemm_eff"], 3), "mem_eff": round(best["mem_eff"], 3),
               "gemm_k0": round(best["gemm_k0"])}
    return rounded, objective(rounded)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store the fit in assets/efficiency.json")
    args = parser.parse_args()
    values, cost = fit()
    with fitted_values(**values):
        result = validation.validate()
    summary = {k: vars(v) for k, v in result.summary().items()}
    calibration_keys = [r["key"] for r in validation.data()["rows"] if r["role"] == "calibration"]
    calibration_keys += [r["key"] for r in validation.data()["per_layer"] if r["role"] == "calibration"]
    record = {
        "set": "Narayanan et al. 2021 Table 1 rows 3.6B, 7.5B, 39.1B, 76.1B, 310.1B and 529.6B (step times) and "
               "Korthikanti et al. 2022 Table 4 (22B layer times, forward and backward where printed); the twelve "
               "validation rows (Narayanan 1.7B, 18.4B, 145.6B, 1T; Korthikanti Table 5) are held out",
        "rows": calibration_keys,
        "objective": "mean squared log(predicted / published) within each paper, summed over the two papers (the "
                     "papers measured different Megatron-LM versions; neither outvotes the other by row count)",
        "bounds": {k: list(v) for k, v in BOUNDS.items()},
        "cost": round(cost, 6),
        "summary": {k: {"rows": v["rows"], "mean_abs_error": round(v["mean_abs_error"], 4),
                        "max_abs_error": round(v["max_abs_error"], 4)} for k, v in summary.items()},
        "script": "scripts/fit_efficiency.py",
    }
    print(json.dumps({"fitted": values, "calibration": record}, indent=2))
    if args.write:
        path = ROOT / "assets" / "efficiency.json"
        doc = json.loads(path.read_text(encoding="utf-8"))
        doc["fitted"] = values
        doc["calibration"] = record
        path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
