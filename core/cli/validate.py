"""`python -m core validate`: the planner's step time (or, with --memory, its memory per GPU) against published and
measured training runs, row by row.

    python -m core validate            # the table, calibration and held-out rows apart, and the summaries
    python -m core validate --json     # the same as JSON (steps, per_layer, summary, conventions, sources)
    python -m core validate --memory   # memory per GPU against measured peaks (core.planner.memory_validation)

The rows and their sources are in assets/validation.json; core.planner.validation predicts them with the same
planner the `plan` command runs (each published layout pinned, on its own GPU and precision). Every `steps` row
carries source, gpu, precision, role, published_s, predicted_s, error, the measure the source prints under its
FLOP convention (published_value beside predicted_value) and what was assumed where the source is silent.
"""

from __future__ import annotations

import argparse

from core.cli import spec_args, validate_memory, validate_scaling
from core.cli.text import print_json, render
from core.cost import calibration
from core.planner import memory_validation, validation, validation_scaling
from core.planner.validation import signed_percent as pct


def build(parser: argparse.ArgumentParser) -> None:
    spec_args.switch(parser, "--json",
                     help="Print steps, per_layer, summary, conventions, sources and scaling (the scaling series) "
                          "as JSON (seconds, fractions); with --memory, the memory rows, summary and sources.")
    spec_args.switch(parser, "--memory",
                     help="Memory per GPU against measured peaks (assets/memory_validation.json) instead of the "
                          "step time.")


def run(args: argparse.Namespace) -> int:
    if args.memory:
        result = memory_validation.validate()
        if args.json:
            print_json(result.to_json())
        else:
            print(validate_memory.section(result))
        return 0
    result, scaling = validation.validate(), validation_scaling.validate()
    if args.json:
        print_json({**result.to_json(), "scaling": scaling.to_json()})
    else:
        print(_human(result) + "\n" + validate_scaling.section(scaling))
    return 0


def records_line() -> str:
    """The calibration records and their values, one clause each."""
    parts = []
    for key in calibration.keys():
        c = calibration.record(key)
        parts.append(f"{key}: gemm_eff {c.gemm_eff:g}, mem_eff {c.mem_eff:g}, gemm_k0 {c.gemm_k0:g}, "
                     f"flash_eff {c.flash_eff:g}")
    return "; ".join(parts)


def _value(kind: str, x: float) -> str:
    return f"{100 * x:.1f} %" if kind == "mfu" else f"{x:,.4g}"


def _batch(r: dict) -> str:
    """The micro-batch the row ran: its source's, or the one kept where the source leaves it open (marked *)."""
    chosen = r["chosen"].get("micro_batch")
    return f"{chosen}*" if chosen is not None else f"{int(r['micro_batch'])}"


def _human(result: validation.Validation) -> str:
    lines = ["Step time, published vs predicted (each source's own layout, GPU and precision; error = predicted / "
             "published - 1; a throughput is compared under its source's FLOP convention; b = micro-batch, * where the "
             "source leaves it open and the fastest that fits is kept).",
             f"Calibration records (assets/efficiency.json, scripts/fit_efficiency.py): {records_line()}."]
    headers = ["run", "gpu", "prec", "t", "p", "cp", "d", "schedule", "b", "measure", "published", "predicted",
               "published s", "predicted s", "error", "fits"]
    steps = result.matched
    for role in validation.ROLES:
        rows = steps[steps["role"] == role]
        table = [[r["label"], r["gpu"], r["precision"], r["t"], r["p"], r["cp"], r["d"],
                  r["schedule"] + (f" v={int(r['v'])}" if r["schedule"] == "interleaved" else ""), _batch(r),
                  r["measure"] + (f" ({r['flops']})" if isinstance(r["flops"], str) else ""),
                  _value(r["measure"], r["published_value"]),
                  _value(r["measure"], r["predicted_value"]), f"{r['published_s']:,.2f}", f"{r['predicted_s']:,.2f}",
                  pct(r["error"]), "yes" if r["fits"] else "NO"] for r in rows.to_dict("records")]
        lines += ["", f"{role} rows ({len(table)}):", render(headers, table)]
    unmatched = result.steps[result.steps["unmatched"].notna()]
    if len(unmatched):
        lines += ["", f"unmatched rows ({len(unmatched)}), kept with the reason:"]
        lines += [f"- {r['label']} ({r['source']}): {r['unmatched']}" for r in unmatched.to_dict("records")]
    layer = [[r["label"], f"{r['published_ms']:.1f}", f"{r['predicted_ms']:.1f}", pct(r["error"])]
             for r in result.layers.to_dict("records")]
    lines += ["", "Per-layer time (Korthikanti et al. 2022, Table 4; calibration):",
              render(["layer", "published ms", "predicted ms", "error"], layer), ""]
    lines += result.summary_lines()
    lines += ["Assumptions where a source is silent: `validate --json`, each row's `assumed`."]
    return "\n".join(lines)
