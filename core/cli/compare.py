"""`simulate --frontier` and `simulate --compare NAME [--equal-memory]`: the Pipeline page's comparisons in text.

The numbers are core.pipeline.compare's (frontier, match_memory) and the simulator's summary, the same
calls the page makes (ui/pipeline/memory.py), with the page's operation budget for the frontier.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from core.cli import spec_args
from core.cli.text import print_json, render
from core.errors import InputError
from core.params.pipeline_view import COMPARE, VIEW
from core.pipeline.compare import FRONTIER_OPS, frontier, match_memory
from core.pipeline.result import PipelineParams, simulate
from core.pipeline.schedules import REGISTRY

_OTHER_OUTPUTS = (("ascii", "--ascii"), ("csv_actions", "--csv-actions"), ("chrome_trace", "--chrome-trace"),
                  ("from_csv", "--from-csv"))


def build(parser: argparse.ArgumentParser) -> None:
    names = ", ".join(COMPARE.choices)
    spec_args.switch(parser, "--frontier",
                     help=f"{VIEW['frontier'].help} One row per schedule: peak activation, idle share, relative "
                          f"to ideal, makespan, whether it is on the frontier, and why a schedule is left out "
                          f"(a schedule over {FRONTIER_OPS:,} operations is skipped, as on the page). Text, or "
                          "--json.")
    parser.add_argument("--compare", action="append", metavar="NAME",
                        help=f"a schedule to print next to --schedule, at the same p, m, v and costs (makespan, "
                             f"both bubble conventions, peak memory). Repeat for each, up to {COMPARE.max_items}; one "
                             f"of {names}. Text, or --json.")
    spec_args.switch(parser, "--equal-memory",
                     help="with --compare: give each compared schedule the m' (and v') at which it holds at "
                          "most --schedule's peak activation, for the same global batch (its micro-batches are "
                          "then larger or smaller). Prints each one's m' (and v'), micro-batch size, peak "
                          "activation, bubble in both conventions, or why it cannot get there.")


def wanted(args: argparse.Namespace) -> bool:
    return bool(args.frontier or args.compare or args.equal_memory)


def run(args: argparse.Namespace, params: PipelineParams) -> int:
    names = _check(args, params.schedule)
    if args.frontier:
        rows = [_frontier_row(r) for r in frontier(replace(params, iterations=1), max_ops=FRONTIER_OPS)]
        if args.json:
            print_json({"p": params.p, "m": params.m, "v": params.v, "operation_limit": FRONTIER_OPS,
                        "schedules": rows})
        else:
            print(_frontier_text(params, rows))
        return 0
    main = simulate(params)  # the reference must run, as plain `simulate` requires
    if args.equal_memory:
        out = _equal_memory(params, main, names)
        text = _equal_text(params, out)
    else:
        rows = [_same_row(params.schedule, main)] + [_same(params, n) for n in names]
        out = {"p": params.p, "m": params.m, "v": params.v, "schedules": rows}
        text = _same_text(params, rows)
    if args.json:
        print_json(out)
    else:
        print(text)
    return 0


def _check(args: argparse.Namespace, main: str) -> list[str]:
    """The compared schedules (the main one and repeats left out), or InputError for what cannot be run."""
    for key, flag in _OTHER_OUTPUTS:
        if getattr(args, key, None):
            what = "--frontier" if args.frontier else "--compare"
            raise InputError(f"{what} prints a table (or --json); it cannot be combined with {flag}")
    if args.frontier and (args.compare or args.equal_memory):
        raise InputError("--frontier already shows every schedule; give it without --compare / --equal-memory")
    if args.equal_memory and not args.compare:
        raise InputError("--equal-memory needs at least one --compare NAME (the schedules to match to "
                         f"{main}'s memory)")
    names: list[str] = []
    for raw in args.compare or ():
        try:
            name = COMPARE.parse(raw)
        except InputError as exc:
            raise InputError(f"--{exc}") from None
        if name != main and name not in names:
            names.append(name)
    if len(names) > COMPARE.max_items:
        raise InputError(f"--compare: at most {COMPARE.max_items} schedules, got {len(names)}")
    if args.compare and not names:
        raise InputError(f"--compare: name a schedule other than {main} (the one being compared against)")
    return names


def _frontier_row(r: dict) -> dict:
    return {"schedule": r["schedule"], "peak_activation": r["peak activation"], "bubble_fraction": r["idle share"],
            "bubble_vs_ideal": r["relative to ideal"], "makespan": r["makespan"], "pareto": r.get("pareto", False),
            "note": r["note"]}


def _same_row(name: str, result) -> dict:
    s = result.summary()
    return {"schedule": name, "m": result.params.m, "v": result.params.v if REGISTRY[name].chunks == "v" else None,
            "makespan": s["makespan"], "bubble_fraction": s["bubble_fraction"],
            "bubble_vs_ideal": s["bubble_vs_ideal"], "peak_inflight": max(s["peak_inflight"]),
            "peak_activation": max(s["peak_activation"]), "note": ""}


def _refused(name: str, note: str) -> dict:
    return {"schedule": name, "m": None, "v": None, "makespan": None, "bubble_fraction": None,
            "bubble_vs_ideal": None, "peak_activation": None, "note": note}


def _same(params: PipelineParams, name: str) -> dict:
    try:
        return _same_row(name, simulate(replace(params, schedule=name)))
    except InputError as exc:
        return {**_refused(name, str(exc)), "peak_inflight": None}


def _equal_memory(params: PipelineParams, main, names: list[str]) -> dict:
    ref = _same_row(params.schedule, main)
    del ref["peak_inflight"]  # the matched rows have only what match_memory compares: activation memory
    target = ref["peak_activation"]
    rows = [{**ref, "micro_batch_scale": 1.0}]
    for name in names:
        try:
            mt = match_memory(params, name)
        except InputError as exc:
            rows.append({**_refused(name, str(exc)), "micro_batch_scale": None})
            continue
        if mt.params is None:
            rows.append({**_refused(name, mt.note), "micro_batch_scale": None})
            continue
        tl = simulate(mt.params).timeline
        rows.append({"schedule": name, "m": mt.params.m, "v": mt.params.v if REGISTRY[name].chunks == "v" else None,
                     "makespan": tl.makespan, "bubble_fraction": tl.bubble_fraction,
                     "bubble_vs_ideal": tl.bubble_vs_ideal, "peak_activation": mt.memory, "note": mt.note,
                     "micro_batch_scale": mt.scale})
    return {"reference": params.schedule, "p": params.p, "m": params.m, "v": params.v, "target": target,
            "schedules": rows}


def _notes(rows: list[dict]) -> str:
    """One line per refused schedule, named once (core's notes often start with the name already)."""
    return "".join("\n" + (r["note"] if r["note"].startswith(r["schedule"]) else f"{r['schedule']}: {r['note']}")
                   for r in rows if r["note"])


def _num(x, fmt: str = ".4g") -> str:
    return "—" if x is None else format(x, fmt)


def _head(params: PipelineParams) -> str:
    return (f"p={params.p} m={params.m} v={params.v}, tf={params.tf:g} tb={params.tb:g} tw={params.tw:g} "
            f"tcomm={params.tcomm:g}")


def _frontier_text(params: PipelineParams, rows: list[dict]) -> str:
    body = [[("> " if r["schedule"] == params.schedule else "  ") + r["schedule"], _num(r["peak_activation"]),
             _num(r["bubble_fraction"], ".4f"), _num(r["bubble_vs_ideal"], ".4f"), _num(r["makespan"], ".6g"),
             "yes" if r["pareto"] else ""] for r in rows]
    table = render(["schedule", "peak activation", "idle share", "relative to ideal", "makespan", "frontier"], body)
    return (f"memory against bubble, every schedule at {_head(params)}\n\n{table}{_notes(rows)}\n\n"
            "peak activation: max device, in micro-batches of L/p layers (1F1B's device 0 holds p).\n"
            "idle share: idle / (p x makespan); relative to ideal: idle / busy.\n"
            "frontier: no other schedule holds less and idles less. > marks --schedule.")


def _same_text(params: PipelineParams, rows: list[dict]) -> str:
    body = [[r["schedule"], _num(r["makespan"], ".6g"), _num(r["bubble_fraction"], ".4f"),
             _num(r["bubble_vs_ideal"], ".4f"), _num(r["peak_inflight"]), _num(r["peak_activation"])] for r in rows]
    table = render(["schedule", "makespan", "idle share", "relative to ideal", "peak held", "peak activation"], body)
    notes = _notes(rows)
    return f"same inputs for all: {_head(params)}\n\n{table}{notes}"


def _equal_text(params: PipelineParams, out: dict) -> str:
    rows = out["schedules"]
    body = [[r["schedule"], _num(r["m"]), _num(r["v"]), _num(r["micro_batch_scale"]), _num(r["peak_activation"]),
             _num(r["bubble_fraction"], ".4f"), _num(r["bubble_vs_ideal"], ".4f"), _num(r["makespan"], ".6g")]
            for r in rows]
    table = render(["schedule", "m'", "v'", f"micro-batch (x {params.schedule}'s)", "peak activation", "idle share",
                    "relative to ideal", "makespan"], body)
    notes = _notes(rows)
    return (f"equal memory: {params.schedule} at {_head(params)} holds {out['target']:.4g} micro-batches of L/p "
            f"layers;\neach schedule below takes the m' (and v') at which it holds at most that, for the same global "
            f"batch\n\n{table}{notes}\n\npeak activation and makespan in {params.schedule}'s micro-batches and time "
            "units (a matched schedule's costs scale with its micro-batch).\nidle share: idle / (p x makespan); "
            "relative to ideal: idle / busy. Not modelled: a GPU's lower efficiency on smaller micro-batches.")
