#!/usr/bin/env python
"""Fit each framework's caching-allocator reserve on its named calibration rows of assets/memory_validation.json.

    python scripts/fit_memory.py            # print each framework's fit and the errors it gives
    python scripts/fit_memory.py --write    # store them in assets/memory_fits.json (core.frameworks reads them)

Reserved memory (torch.cuda.max_memory_reserved) is the peak of tensors plus what the caching allocator holds free:
the side pools a framework's own streams keep (core.memory.framework_terms.side_pools, derived, not fitted) and a
share of the allocation that fragmentation leaves unused, which no source states for a whole run. That share, one
number per framework, is the only memory parameter fitted: on the framework's 'calibration' rows whose source
printed reserved memory, by least squared log error (a grid of 0.1 % steps from 0 to 30 %). Every other row,
allocated-memory rows included, is held out; `python -m core validate --memory` reports both.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import core.pipeline.schedules  # noqa: E402,F401  registers the schedules
from core import frameworks  # noqa: E402
from core.cli import spec_args  # noqa: E402
from core.planner import memory_validation  # noqa: E402

FITS = ROOT / "assets" / "memory_fits.json"
GRID = np.round(np.arange(0.0, 0.3001, 0.001), 4)


def calibration(key: str) -> list[dict]:
    return [r for r in memory_validation.data()["rows"] if r["role"] == "calibration" and r["framework"] == key
            and r["measured"]["kind"] == "reserved"]


def parts(row: dict) -> tuple[float, float, float]:
    """(allocated, side pools, measured) bytes of one row at a zero share."""
    got = memory_validation.memory_row(row)
    return float(got["predicted_allocated"]), float(got["predicted_pools"]), float(got["measured_bytes"])


def fit(key: str) -> dict | None:
    rows = calibration(key)
    if not rows:
        return None
    with zero_share(key):
        a, pools, measured = (np.array(x) for x in zip(*(parts(r) for r in rows), strict=True))
    err = np.log((a[None, :] * (1 + GRID[:, None]) + pools[None, :]) / measured[None, :])
    best = float(GRID[int(np.argmin((err ** 2).sum(axis=1)))])
    errors = (a * (1 + best) + pools) / measured - 1
    return {"reserve": best, "rows": [r["key"] for r in rows],
            "calibration_mean_abs_error": float(np.abs(errors).mean()),
            "calibration_signed_mean_error": float(errors.mean())}


class zero_share:
    """Evaluate a framework's rows with its fitted share at 0 (the fit's own starting point)."""

    def __init__(self, key: str) -> None:
        self.key = key

    def __enter__(self):
        acc = frameworks.ACCOUNTINGS[self.key]
        self.saved = acc
        frameworks.ACCOUNTINGS[self.key] = replace(acc, reserve=0.0)
        return self

    def __exit__(self, *exc) -> None:
        frameworks.ACCOUNTINGS[self.key] = self.saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    spec_args.switch(parser, "--write", help="Store the fits in assets/memory_fits.json.")
    args = parser.parse_args(argv)
    out, missing = {}, []
    for key in frameworks.FRAMEWORKS:
        got = fit(key)
        if got is None:
            missing.append(key)
            continue
        out[key] = got
        print(f"{key}: reserve {100 * got['reserve']:.1f} % over {len(got['rows'])} rows; calibration mean |error| "
              f"{100 * got['calibration_mean_abs_error']:.2f} %, "
              f"signed {100 * got['calibration_signed_mean_error']:+.2f} %")
    for key in missing:  # no run of it printed reserved memory: the fitted frameworks' mean, said to be borrowed
        share = round(float(np.mean([v["reserve"] for v in out.values()])), 3) if out else 0.0
        out[key] = {"reserve": share, "rows": [], "borrowed": f"the mean of {', '.join(sorted(out))}'s fits: no "
                                                                f"{key} run in the set printed reserved memory"}
        print(f"{key}: no calibration row of reserved memory; borrows {100 * share:.1f} %")
    if args.write:
        doc = {"about": "Each framework's caching-allocator reserve over the peak allocated, as a share: the one "
                        "memory parameter fitted (scripts/fit_memory.py), on the named calibration rows of "
                        "assets/memory_validation.json that printed reserved memory. core.frameworks reads it.",
               "fits": out}
        FITS.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {FITS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
