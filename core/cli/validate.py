"""`python -m core validate`: the planner's step time against published training runs, row by row.

    python -m core validate            # the table, calibration and held-out rows apart, and the summaries
    python -m core validate --json     # the same as JSON (steps, per_layer, summary, sources)

The rows and their sources are in assets/validation.json; core.planner.validation predicts them with the same
planner the `plan` command runs (each published layout pinned).
"""

from __future__ import annotations

import argparse

from core.cli import validate_scaling
from core.cli.text import print_json, render
from core.cost.rates import calibration
from core.planner import validation, validation_scaling
from core.planner.validation import signed_percent as pct


def build(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="Print steps, per_layer, summary, sources and scaling (the scaling series) as JSON "
                             "(seconds, fractions).")


def run(args: argparse.Namespace) -> int:
    result, scaling = validation.validate(), validation_scaling.validate()
    if args.json:
        print_json({**result.to_json(), "scaling": scaling.to_json()})
    else:
        print(_human(result) + "\n" + validate_scaling.section(scaling))
    return 0


def _human(result: validation.Validation) -> str:
    fitted = calibration()["fitted"]
    lines = ["Step time, published vs predicted (A100 80GB, each paper's own layout; error = predicted / published "
             "- 1).", f"Efficiency fit: gemm_eff {fitted['gemm_eff']:g}, mem_eff {fitted['mem_eff']:g}, gemm_k0 "
             f"{fitted['gemm_k0']:g} (assets/efficiency.json, scripts/fit_efficiency.py)."]
    headers = ["run", "t", "p", "d", "schedule", "b", "published s", "predicted s", "error", "fits"]
    for role in validation.ROLES:
        rows = result.steps[result.steps["role"] == role]
        table = [[r["label"], r["t"], r["p"], r["d"],
                  r["schedule"] + (f" v={r['v']}" if r["schedule"] == "interleaved" else ""), r["micro_batch"],
                  f"{r['published_s']:,.2f}", f"{r['predicted_s']:,.2f}", pct(r["error"]),
                  "yes" if r["fits"] else "NO"] for r in rows.to_dict("records")]
        lines += ["", f"{role} rows ({len(table)}):", render(headers, table)]
    layer = [[r["label"], f"{r['published_ms']:.1f}", f"{r['predicted_ms']:.1f}", pct(r["error"])]
             for r in result.layers.to_dict("records")]
    lines += ["", "Per-layer time (Korthikanti et al. 2022, Table 4; calibration):",
              render(["layer", "published ms", "predicted ms", "error"], layer), ""]
    lines += result.summary_lines()
    return "\n".join(lines)
