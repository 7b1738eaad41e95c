"""A run read from config files, evaluated as the planner evaluates a row, with the account of every field.

The files become planner inputs with every layout dimension pinned, so the one row evaluated is exactly the row a
user gets by typing the same run into `plan` (the command is part of the answer: `typed`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from core.configs.account import Entry, Reading
from core.configs.formats import read_any
from core.errors import InputError
from core.params.planner import (
    ANY_MODEL_FLAGS,
    ARCH_FLAGS,
    BUDGET,
    FIX_KEYS,
    GPU_FLAGS,
    PLAN,
    TRAIN_FLAGS,
    PlannerParams,
)
from core.planner import frameworks
from core.planner import plan as planner
from core.planner.frameworks import Setting

PINNED = ("fix_t", "fix_p", "fix_cp", "fix_ep", "zero", "schedule", "v", "mb_sizes", "recompute", "sp", "offload",
          "reshard", "tp_comm_overlap", "fix_replicate")
FIX_FLAGS = {key: typed for typed, key in FIX_KEYS.items()}  # planner input -> its `plan --fix` key


@dataclass(frozen=True, eq=False)
class Checked:
    reading: Reading
    params: PlannerParams
    result: planner.PlanResult
    typed: str  # the same run as a `python -m core plan` command

    @property
    def row(self) -> pd.Series | None:
        frame = self.result.frame
        return None if frame.empty else frame.iloc[0]

    def refusals(self) -> list[str]:
        """Why the file's own framework cannot run the layout as the planner reads it (empty when it can)."""
        row, key = self.row, self.reading.framework
        if row is None or key not in frameworks.TABLE:
            return []
        m = self.result.model
        return frameworks.framework(key).refusals(Setting(
            t=int(row["t"]), p=int(row["p"]), zero=int(row["zero_stage"]), schedule=str(row["schedule"]),
            sp=bool(row["sequence_parallel"]), recompute=str(row["recompute"]), offload=str(row["offload"]),
            cp=int(row["cp"]), ep=int(row["ep"]), fp8=self.result.precision == "fp8",
            moe=m.moe is not None or m.mla is not None, replicate=int(row["replicate"]),
            recompute_layers=int(row["recompute_layers"])), export=False)

    def better_inputs(self) -> dict[str, str]:
        """The planner inputs that search around this run: the model, GPUs, batch and switches kept, the layout
        free (PLAN key -> text)."""
        return {k: v for k, v in self.reading.raw.items() if k not in PINNED and k not in ("fix_d", "fix_etp")}

    def better(self) -> str:
        """`better_inputs` as a `plan` command."""
        return command(self.better_inputs(), self.reading.framework)


def check(texts: list[tuple[str, str]], overrides: dict[str, str] | None = None, kind: str = "auto",
          budget: int | None = None, entry: str = "") -> Checked:
    """Evaluates the run in `texts` ((name, content) pairs: one config, or a DeepSpeed JSON with a Hugging Face
    config.json); `overrides` (PLAN key -> string, e.g. from the command line) win over the files; `entry` names
    the run of a torchtitan config registry or a Megatron-Bridge recipe file."""
    if not texts:
        raise InputError("no config given")
    given = str((overrides or {}).get("gpus", ""))
    reading = read_any(texts, kind, entry, int(given) if given.isdigit() else 0)
    for key, value in (overrides or {}).items():
        if key not in PLAN:
            raise InputError(f"{key}: not a planner input")
        was = reading.raw.get(key)
        reading.raw[key] = str(value)
        said = "" if was is None else f" (the file said {was})"
        reading.entries.append(Entry("read", key, str(value), f"given with the check{said}", "command line"))
    _fill(reading)
    params = PlannerParams.from_strings(dict(reading.raw))
    result = planner.plan(params, int(budget or BUDGET.default))
    return Checked(reading, params, result, command(reading.raw, reading.framework))


def _fill(r: Reading) -> None:
    """Planner inputs no file gives, each assumed in so many words."""
    if "model" not in r.raw and "layers" not in r.raw:
        r.assume("model", PLAN["model"].default, "no config file gives the model (a DeepSpeed JSON or an Accelerate "
                 "YAML holds none); the planner's default: give its Hugging Face config.json with the file, or --model")
    if "gpu" not in r.raw:
        r.assume("gpu", PLAN["gpu"].default, "no config file names the GPU; the planner's default (give --gpu)")
    t, p, cp = (int(r.raw.get(k, 1) or 1) for k in ("fix_t", "fix_p", "fix_cp"))
    if "gpus" not in r.raw:
        experts = int(r.raw.get("fix_ep", 1) or 1) * int(r.raw.get("fix_etp", 0) or t)
        d = int(r.raw.get("fix_d", 0) or 0) or experts // math.gcd(experts, t * cp)
        r.assume("gpus", t * p * cp * d, "the file does not give the number of GPUs; the fewest its layout needs "
                                         f"(d = {d}; give --gpus)")
    if "batch" not in r.raw:
        d = int(r.raw["gpus"]) // max(1, t * p * cp)
        mbs = int(str(r.raw.get("mb_sizes", "1")).split(",")[0])
        steps = r.accumulation
        r.assume("batch", mbs * steps * max(d, 1), f"no global batch: micro-batch x {steps} accumulation steps x d "
                 f"(the file's)" if steps > 1 else "no global batch: one micro-batch per data-parallel rank "
                 "(Megatron-LM's default)")
    if r.framework and "memory_framework" not in r.raw:
        r.raw["memory_framework"] = r.framework
    r.raw.setdefault("framework", "any")
    for key, value in (("schedule", "1f1b"), ("v", "1"), ("reshard", "on"), ("tp_comm_overlap", "off"),
                       ("offload", "none"), ("sp", "off"), ("recompute", "none"), ("zero", "0"),
                       ("mb_sizes", "1"), ("fix_t", "1"), ("fix_p", "1"), ("fix_cp", "1"), ("fix_ep", "1")):
        if key not in r.raw:
            r.assume(key, value, "the file does not say; the framework's plain default")


def command(raw: dict[str, str], framework: str = "") -> str:
    """`python -m core plan ...` for planner inputs (PLAN key -> string)."""
    flag_of = {**ARCH_FLAGS, **ANY_MODEL_FLAGS, **GPU_FLAGS, **TRAIN_FLAGS}
    parts = ["python -m core plan"]
    fix = [f"{FIX_FLAGS[k]}={raw[k]}" for k in FIX_FLAGS if k in raw]
    for key, value in raw.items():
        if key in FIX_FLAGS or key in ("framework",) or (key == "model" and value == "custom"):
            continue
        parts.append(f"{flag_of.get(key, '--' + key.replace('_', '-'))} {_quote(value)}")
    if fix:
        parts.append("--fix " + ",".join(fix))
    return " ".join(parts)


def _quote(value: str) -> str:
    return value if value and all(c.isalnum() or c in "._-,+:/" for c in value) else repr(value)
