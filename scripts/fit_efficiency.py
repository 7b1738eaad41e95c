#!/usr/bin/env python
"""Fit each calibration record of assets/efficiency.json on its own calibration set (rows of assets/validation.json).

    python scripts/fit_efficiency.py                 # print every record's fit and the errors it gives
    python scripts/fit_efficiency.py --write         # store them in assets/efficiency.json
    python scripts/fit_efficiency.py --record h100-16bit

A record (core.cost.calibration) is one GPU family at one precision. Its calibration set is every row whose role is
"calibration", whose GPU preset uses that family (assets/gpus.json `calibration`) and whose precision the record
covers (fp16 and bf16: 16-bit; fp8); the A100 record also sees Korthikanti et al.'s per-layer times. The held-out
rows are only predicted afterwards. RECORDS says which parameters each record fits and within which physical bounds;
the rest stay at their sourced values. The objective is the mean squared log error within each source, summed over
sources (no publication outvotes another by row count). The search is a coarse grid over the bounds, then finer
grids around the best point (deterministic, no solver needed). 16-bit records are fitted before the FP8 record that
builds on them.
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

from core.cost import calibration  # noqa: E402
from core.model import presets  # noqa: E402
from core.planner import validation  # noqa: E402

# Per record: the parameters fitted, their physical bounds and coarse grid points, and the set in words.
RECORDS = {
    "a100-16bit": {
        "bounds": {"gemm_eff": (0.5, 0.95, 10), "mem_eff": (0.5, 0.95, 10), "gemm_k0": (0.0, 1024.0, 9)},
        "set": "Narayanan et al. 2021 Table 1 rows 3.6B, 7.5B, 39.1B, 76.1B, 310.1B and 529.6B (step times) and "
               "Korthikanti et al. 2022 Table 4 (22B layer times, forward and backward where printed); the twelve "
               "validation rows (Narayanan 1.7B, 18.4B, 145.6B, 1T; Korthikanti Table 5) are held out",
    },
}
FINE = 5  # points per parameter in each refinement, over two steps of the previous grid around the best
ROUNDS = 2


def record_of(row: dict) -> str:
    """The calibration record a published row belongs to: its GPU preset's family at its precision."""
    return calibration.for_family(presets.gpu(row["gpu"]).calibration, row["precision"]).key


def calibration_rows(key: str) -> list[dict]:
    return [r for r in validation.data()["rows"]
            if r["role"] == "calibration" and not r.get("unmatched") and record_of(r) == key]


def _paper(source: str) -> str:
    return source.split("-")[0]


def calibration_errors(key: str, values: dict[str, float]) -> dict[str, np.ndarray]:
    """Errors of record `key`'s calibration rows under `values`, grouped by publication."""
    wanted = {r["key"] for r in calibration_rows(key)}
    with calibration.trial(key, **values):
        steps = validation.step_rows(roles=("calibration",), keep=lambda r: r["key"] in wanted)
        layers = validation.layer_rows() if key == "a100-16bit" else None
    out: dict[str, list] = {}
    for source, error in zip(steps.get("source", []), steps.get("error", []), strict=True):
        out.setdefault(_paper(source), []).append(error)
    if layers is not None:  # forward and backward where published
        for row in layers[layers["role"] == "calibration"].to_dict("records"):
            finite = row["forward_error"] is not None and np.isfinite(row["forward_error"])
            split = [row["forward_error"], row["backward_error"]] if finite else [row["error"]]
            out.setdefault(_paper(row["source"]), []).extend(split)
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}


def objective(key: str, values: dict[str, float]) -> float:
    """Mean squared log error within each source, summed over sources."""
    return float(sum(np.mean(np.log1p(e) ** 2) for e in calibration_errors(key, values).values()))


def _grid(bounds: dict, centre: dict | None, steps: dict | None) -> list[dict[str, float]]:
    axes = {}
    for k, (lo, hi, n) in bounds.items():
        axes[k] = (np.linspace(lo, hi, n) if centre is None
                   else np.unique(np.clip(np.linspace(centre[k] - steps[k], centre[k] + steps[k], FINE), lo, hi)))
    return [dict(zip(axes, map(float, pt), strict=True)) for pt in itertools.product(*axes.values())]


def fit(key: str) -> tuple[dict[str, float], float]:
    """The record's fitted values (rounded as stored) and the objective there."""
    bounds = RECORDS[key]["bounds"]
    steps = {k: (hi - lo) / (n - 1) for k, (lo, hi, n) in bounds.items()}
    best, best_cost, centre = None, np.inf, None
    for _ in range(ROUNDS + 1):
        for values in _grid(bounds, centre, None if centre is None else steps):
            cost = objective(key, values)
            if cost < best_cost:
                best, best_cost = values, cost
        centre, steps = best, {k: 2 * v / (FINE - 1) for k, v in steps.items()}
    rounded = {k: round(v) if k == "gemm_k0" else round(v, 3) for k, v in best.items()}
    return rounded, objective(key, rounded)


def _summary(result: validation.Validation, key: str) -> dict:
    """Calibration and held-out errors of the rows that use record `key`."""
    steps = result.matched
    mine = steps[[record_of(r) == key for r in (next(x for x in validation.data()["rows"] if x["key"] == k)
                                                 for k in steps["key"])]]
    out = {}
    for role in validation.ROLES:
        s = validation.summarize(mine.loc[mine["role"] == role, "error"], mine.loc[mine["role"] == role, "source"])
        if s.rows:
            out[role] = {"rows": s.rows, "mean_abs_error": round(s.mean_abs_error, 4),
                         "max_abs_error": round(s.max_abs_error, 4), "signed_mean_error": round(s.signed_mean_error, 4)}
    if key == "a100-16bit":
        s = validation.summarize(result.layers["error"])
        out["per-layer (calibration)"] = {"rows": s.rows, "mean_abs_error": round(s.mean_abs_error, 4),
                                          "max_abs_error": round(s.max_abs_error, 4),
                                          "signed_mean_error": round(s.signed_mean_error, 4)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store the fits in assets/efficiency.json")
    parser.add_argument("--record", choices=tuple(RECORDS), action="append",
                        help="fit only this record (repeatable; default all, 16-bit ones first)")
    args = parser.parse_args()
    keys = sorted(args.record or RECORDS, key=lambda k: calibration.record(k).precision == "fp8")
    path = ROOT / "assets" / "efficiency.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    for key in keys:
        values, cost = fit(key)
        entry = calibration.entry(key)  # the loaded copy: later records build on this fit
        entry["values"].update(values)
        calibration.record.cache_clear()
        result = validation.validate()
        record = {
            "fitted": sorted(values), "set": RECORDS[key]["set"],
            "rows": [r["key"] for r in calibration_rows(key)]
                    + ([r["key"] for r in validation.data()["per_layer"]] if key == "a100-16bit" else []),
            "objective": "mean squared log(predicted / published) within each source, summed over sources (no "
                         "publication outvotes another by row count)",
            "bounds": {k: [lo, hi] for k, (lo, hi, _) in RECORDS[key]["bounds"].items()},
            "cost": round(cost, 6), "summary": _summary(result, key), "script": "scripts/fit_efficiency.py",
        }
        print(json.dumps({key: {"values": values, **record}}, indent=2))
        target = doc["calibrations"][key]
        target["values"].update(values)
        target.update(record)
    if args.write:
        path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
