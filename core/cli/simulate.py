"""`python -m core simulate`: one schedule, its timeline and its bubble against the closed form.

`--from-csv FILE` times a PyTorch action table instead (torch.distributed.pipelining's CSV, one row per rank): the
order a job really runs, with your --tf --tb --tw --tcomm, in the same output formats (--json has the same keys).
`--frontier` and `--compare NAME [--equal-memory]` print the Pipeline page's comparisons (core/cli/compare.py).
"""

from __future__ import annotations

import argparse
import sys

from core.cli import compare, spec_args
from core.cli.text import print_json, render
from core.errors import InputError
from core.params.pipeline import PIPELINE
from core.params.upload import LIMITS
from core.pipeline.render import text_timeline
from core.pipeline.result import PipelineParams, simulate
from core.pipeline.stage_view import balance_hint, stage_table
from core.pipeline.trace_export import chrome_trace, pytorch_actions_csv
from core.pipeline.trace_import import simulate_actions

_SHORT = {"p": ("-p",), "m": ("-m",), "v": ("-v",)}


def build(parser: argparse.ArgumentParser) -> None:
    for key, spec in PIPELINE.items():
        flags = _SHORT.get(key, ()) + ("--" + key.replace("_", "-"),)
        spec_args.add(parser, spec, *flags)
    parser.add_argument("--from-csv", metavar="FILE",
                        help="time a PyTorch action table (torch.distributed.pipelining CSV, one row of actions "
                             "such as 0F1, 3B0, 2I5, 2W5 per rank) with --tf --tb --tw --tcomm; the table fixes the "
                             f"schedule, p, m and v; it holds {LIMITS.describe()}".replace("%", "%%"))
    out = parser.add_mutually_exclusive_group()
    spec_args.switch(out, "--ascii", help="print the text timeline (integer costs only)")
    spec_args.switch(out, "--json", help="print one JSON object with the metrics")
    spec_args.switch(out, "--csv-actions",
                     help="print the PyTorch torch.distributed.pipelining action table (one CSV row per rank)")
    out.add_argument("--chrome-trace", metavar="FILE", help="write a Chrome/Perfetto trace JSON to FILE")
    compare.build(parser)


COSTS = ("tf", "tb", "tw", "tcomm")


def run(args: argparse.Namespace) -> int:
    if compare.wanted(args):
        return compare.run(args, PipelineParams(**spec_args.collect(args, PIPELINE)))
    if args.from_csv:
        result = _imported(args)
    else:
        result = simulate(PipelineParams(**spec_args.collect(args, PIPELINE)))
    if args.json:
        print_json(result.summary())
    elif args.ascii:
        print(text_timeline(result.timeline))
    elif args.csv_actions:
        sys.stdout.write(pytorch_actions_csv(result.schedule))
    elif args.chrome_trace:
        try:
            with open(args.chrome_trace, "w", encoding="utf-8") as fh:
                fh.write(chrome_trace(result.timeline))
        except OSError as exc:
            raise InputError(f"cannot write {args.chrome_trace!r}: {exc.strerror}") from None
        print(f"wrote {result.timeline.num_ops:,} ops to {args.chrome_trace} (chrome://tracing or ui.perfetto.dev)")
    else:
        print(_summary_text(result))
    return 0


def _imported(args: argparse.Namespace):
    fixed = [k for k in PIPELINE if k not in COSTS and getattr(args, k, None) is not None]
    if fixed:
        raise InputError("--from-csv: the table fixes the schedule, p, m and v; give only --tf --tb --tw --tcomm "
                         f"(not --{fixed[0].replace('_', '-')})")
    try:
        with open(args.from_csv, "rb") as fh:  # bytes: core checks the limit, the encoding and a BOM
            data = fh.read(LIMITS.bytes + 1)
    except OSError as exc:
        raise InputError(f"--from-csv: cannot read {args.from_csv!r}: {getattr(exc, 'strerror', None) or exc}") \
            from None
    costs = spec_args.collect(args, {k: PIPELINE[k] for k in COSTS})
    return simulate_actions(data, **costs, source=f"csv:{args.from_csv.rsplit('/', 1)[-1][:60]}")


def _summary_text(result) -> str:
    s = result.summary()
    prm = result.params
    conv = s["formula_convention"] or "makespan"
    t, share, rel = result.simulated_in(conv)
    head = f"{s['schedule']}: p={prm.p} m={prm.m}" + (f" v={result.schedule.v}" if result.schedule.v > 1 else "")
    rows = [
        ["makespan", f"{s['makespan']:.6g}", ""],
        ["bubble, idle share of the whole timeline", f"{s['bubble_fraction']:.4f}", ""],
        ["bubble, relative to ideal time", f"{s['bubble_vs_ideal']:.4f}", ""],
        ["pipeline efficiency, 1 - idle share", f"{s['pipeline_efficiency']:.4f}",
         _fmt(s["formula_pipeline_efficiency"] if conv == "makespan" else None)],
        [f"bubble time per device ({conv} convention)", f"{t:.6g}", _fmt(s["formula_bubble_time"])],
        [f"idle share ({conv} convention)", f"{share:.4f}", _fmt(s["formula_bubble_fraction"])],
        [f"relative to ideal ({conv} convention)", f"{rel:.4f}", _fmt(s["formula_bubble_vs_ideal"])],
        ["peak micro-batches held (max device)", f"{max(s['peak_inflight']):.4g}", ""],
        ["peak activation (max device), micro-batches of L/p layers", f"{max(s['peak_activation']):.4g}", ""],
    ]
    if prm.schedule == "pipedream" or prm.iterations > 1:
        rows.append(["weight versions stashed (max device)", str(max(s["weight_versions"])), ""])
    if s["formula_expression"]:
        note = f"\nformula: {s['formula_expression']}, when {s['formula_conditions']}"
    else:
        note = f"\nno closed form: {s['formula_note']}"
    return head + "\n\n" + render(["metric", "simulated", "formula"], rows) + note + _stages_text(result)


def _stages_text(result) -> str:
    """Per-stage table when stages differ: layers, time factor, activations per micro-batch, devices."""
    rows = stage_table(result)
    if not rows:
        return ""
    body = [[str(r["stage"]), r["devices"], "—" if r["layers"] is None else str(r["layers"]), r["holds"],
             f"{r['time factor']:.4g}", f"{r['activations per micro-batch']:.4g}"] for r in rows]
    return "\n\n" + render(["stage", "device(s)", "layers", "holds", "time factor", "activations / micro-batch"],
                            body) + "\n(time factor: x an equal stage; activations: micro-batches of L/p layers)" \
        + (f"\nbalance: {hint}" if (hint := balance_hint(result)) else "")


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.4f}" if abs(x) < 10 else f"{x:.6g}"
