"""The Planner page's "Check a run you have" and `python -m core check`'s text: one checked config (core.configs)
as the words, numbers and tables both show, and the planner inputs that open the run (or better layouts for it)
on the Planner page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import pandas as pd

from core.configs import check as checker
from core.configs.formats import MAX_BYTES, MAX_FILES
from core.errors import InputError
from core.params.planner import FIX_KEYS, PLAN, PlannerParams
from core.units import GB

MAX_OVERRIDES = 400  # characters of "KEY=VALUE, ..." given beside the files
ACCOUNT_COLUMNS = ("kind", "field", "value", "meaning", "file")


@dataclass(frozen=True)
class CheckView:
    """What the page draws of one checked config (numbers first, then every field of the file)."""

    headline: str
    lines: tuple[str, ...]  # the row in words, as `python -m core check` prints it
    metrics: dict[str, Any]  # memory_gb, usable_gb, fits, step_s, mfu, bubble (NaN where there is no number)
    account: pd.DataFrame  # one row per field of the file: ACCOUNT_COLUMNS
    counts: dict[str, int]
    run_inputs: dict[str, Any]  # the planner's inputs for this run (PLAN key -> value), the layout pinned
    better_inputs: dict[str, Any]  # the same with the layout free
    typed: str
    better: str


def summary_lines(done: checker.Checked) -> list[str]:
    """The checked row in words: layout, memory per GPU with its parts, fits or why not, step time, whether the
    file's framework runs it."""
    res, row, reading = done.result, done.row, done.reading
    m, g = res.model, res.gpu
    lines = [f"Checked {reading.source} ({reading.kind}): {m.name} on {res.params.gpus:,} x {g.name}, global batch "
             f"{res.params.batch:,} x {m.seq:,} tokens."]
    if row is None:
        return lines + [res.why_empty()]
    sched = row["schedule"] + (f" v={row['v']}" if row["v"] > 1 else "")
    hybrid = f" in {row['replicate']} copies (hybrid sharding)" if row["replicate"] > 1 else ""
    lines.append(f"Layout: t={row['t']} p={row['p']} d={row['d']} cp={row['cp']} ep={row['ep']}, "
                 f"{sched if row['p'] > 1 else 'no pipeline'}, micro-batch {row['micro_batch_size']} x "
                 f"{row['m']} per step, ZeRO-{row['zero_stage']}{hybrid}, recompute {row['recompute']}, SP "
                 f"{'on' if row['sequence_parallel'] else 'off'}, offload {row['offload']}.")
    parts = ", ".join(f"{name} {row[col] / GB:,.1f}" for name, col in (
        ("model states", "states_on_gpu_bytes"), ("activations", "activation_bytes"),
        ("ZeRO-3 working", "zero3_working_bytes"), ("buffers", "buffer_bytes"), ("allocator reserve", "reserve_bytes"),
        ("outside PyTorch", "outside_bytes")) if row[col] and row[col] == row[col])
    if math.isfinite(row["memory_bytes"]):
        fits = "fits" if row["fits"] else "does NOT fit"
        lines.append(f"Memory per GPU: {row['memory_bytes'] / GB:,.1f} GB ({row['memory_accounting']} accounting; "
                     f"{parts}) of {row['usable_bytes'] / GB:,.1f} GB usable: {fits}.")
    elif row["m"] < 1:  # no micro-batch per replica: nothing to count the activations of
        lines.append(f"Memory per GPU: not counted: the batch gives no micro-batch to each replica "
                     f"({row['memory_accounting']} accounting; {parts}).")
    else:
        lines.append(f"Memory per GPU: does NOT fit in {row['usable_bytes'] / GB:,.1f} GB usable "
                     f"({row['memory_accounting']} accounting; {parts}).")
    if row["reasons"]:
        lines.append("Why not feasible: " + "; ".join(row["reasons"]))
    if math.isfinite(row["step_time_s"]):
        lines.append(f"Step time {row['step_time_s']:,.2f} s, {row['tokens_per_s']:,.0f} tokens/s, MFU "
                     f"{100 * row['mfu']:.1f} %, bubble {100 * row['bubble_fraction']:.1f} % (idle share of the "
                     "timeline).")
    refusals = done.refusals()
    if reading.framework:
        lines.append(f"{reading.framework} runs this layout: " + ("yes." if not refusals else
                                                                  "no: " + "; ".join(refusals)))
    return lines


def parse_overrides(text: str) -> dict[str, str]:
    """"KEY=VALUE, ..." (planner inputs by their key, or the `plan --fix` keys) into check's overrides."""
    if len(text) > MAX_OVERRIDES:
        raise InputError(f"what the file cannot say: at most {MAX_OVERRIDES} characters")
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in text.replace(";", ",").split(","))):
        key, sep, value = (x.strip() for x in item.partition("="))
        key = FIX_KEYS.get(key, key)
        if not sep or key not in PLAN:
            raise InputError(f"{item[:40]!r} is not KEY=VALUE with KEY a planner input (gpu, gpus, batch, seq, "
                             "model, t, p, d, ...)")
        out[key] = value
    return out


def checked(files: tuple[tuple[str, bytes], ...], overrides: str = "") -> CheckView:
    """A pasted or uploaded config (at most MAX_FILES of MAX_BYTES each; decoded here) checked as a planner row."""
    if not files:
        raise InputError("paste a config or upload one (a launch script, TOML, JSON or YAML)")
    if len(files) > MAX_FILES:
        raise InputError(f"at most {MAX_FILES} files: one run's config (and a DeepSpeed JSON's model and setup)")
    texts = []
    for name, data in files:
        if len(data) > MAX_BYTES:
            raise InputError(f"{name[:80]}: larger than {MAX_BYTES // 1000:,} KB; not a training config")
        texts.append((name[:120] or "pasted", data.decode("utf-8", errors="replace")))
    done = checker.check(texts, parse_overrides(overrides))
    return view_of(done)


def view_of(done: checker.Checked) -> CheckView:
    row = done.row
    nan = float("nan")
    metrics = {"memory_gb": nan, "usable_gb": nan, "fits": False, "step_s": nan, "mfu": nan, "bubble": nan}
    if row is not None:
        metrics = {"memory_gb": row["memory_bytes"] / GB, "usable_gb": row["usable_bytes"] / GB,
                   "fits": bool(row["fits"]), "step_s": row["step_time_s"], "mfu": row["mfu"],
                   "bubble": row["bubble_fraction"]}
    account = pd.DataFrame([(e.kind, e.name, e.value, e.meaning, e.source) for e in done.reading.entries],
                           columns=list(ACCOUNT_COLUMNS))
    lines = summary_lines(done)
    return CheckView(lines[0], tuple(lines[1:]), metrics, account, done.reading.counts(),
                     _inputs(done.params, done.reading.raw), _inputs(_params(done.better_inputs()),
                                                                     done.better_inputs()),
                     done.typed, done.better())


def _params(raw: dict[str, str]) -> PlannerParams:
    return PlannerParams.from_strings(dict(raw))


def _inputs(q: PlannerParams, raw: dict[str, str]) -> dict[str, Any]:
    """The planner inputs the file (or the check) set, typed, for the page's link (defaults are left out there)."""
    names = {f.name for f in fields(q)}
    return {k: getattr(q, k) for k in raw if k in PLAN and k in names}
