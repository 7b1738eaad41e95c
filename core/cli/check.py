"""`python -m core check FILE...`: a run you already have, read from its config, evaluated as a planner row.

    python -m core check train_llama3_8b.sh --gpu h100-80gb
    python -m core check llama3_70b.toml --gpus 256
    python -m core check config_registry.py --entry llama3_8b --gpus 8
    python -m core check config_registry.py launch.sh   (CONFIG=llama3_8b NGPU=8 ./run_train.sh ...)
    python -m core check ds_config.json config.json --gpus 64 --json
    python -m core check megatron_gpt_config.yaml --set dp_overlap=0.5

Reads a Megatron-LM command or launch script, a torchtitan TOML or Python config registry, a DeepSpeed JSON
(with the model's Hugging Face config.json), a Hugging Face config.json alone, a NeMo 1 YAML or NeMo 2 recipe, or
the planner's own PyTorch script; nothing in a file is executed. Prints the row (memory per GPU with its parts,
fits or not, step time, MFU, bubble), then every field of the file: read, no effect, unsupported, and what was
assumed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from core.cli import spec_args
from core.cli.plan import parse_fix
from core.cli.text import print_json
from core.configs import check as checker
from core.configs.account import KINDS
from core.configs.formats import KINDS as FORMATS
from core.configs.formats import MAX_BYTES
from core.errors import InputError
from core.params.planner import BUDGET, GPU_FLAGS, PLAN, TRAIN_FLAGS
from core.views.config_check import parse_overrides, summary_lines

GIVEN = {"gpus": "--gpus", "gpu": "--gpu", "gpu_mem": GPU_FLAGS["gpu_mem"], "batch": TRAIN_FLAGS["batch"],
         "seq": "--seq", "model": "--model"}


def build(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="one run: a config file, or a DeepSpeed JSON (and its pipeline setup .py) with the "
                             "model's Hugging Face config.json; at most 4 files of 1 MB each")
    parser.add_argument("--format", choices=FORMATS, default="auto", help="the file's format (default: detected)")
    parser.add_argument("--entry", default="", metavar="NAME",
                        help="the run of a torchtitan config registry or a Megatron-Bridge recipe file (its "
                             "function name: torchtitan's --config, Megatron-Bridge's --recipe); not needed when the "
                             "file has one, or when its launch command is given with it")
    for key, flag in GIVEN.items():
        spec_args.add(parser, PLAN[key], flag)
    parser.add_argument("--fix", default="", metavar="KEY=VALUE,...",
                        help="layout values the files do not give (or that you want changed), as in plan --fix")
    parser.add_argument("--set", default="", metavar="KEY=VALUE,...",
                        help="any other planner input by its key (e.g. dp_overlap=0.5,precision=fp8)")
    spec_args.add(parser, BUDGET)
    spec_args.switch(parser, "--json", help="Print the row and the account of every field as JSON.")


def overrides(args: argparse.Namespace) -> dict[str, str]:
    out = {k: str(getattr(args, k)) for k in GIVEN if getattr(args, k, None) is not None}
    out.update(parse_fix(args.fix))
    try:  # the page's "what the file cannot say" box reads the same text
        out.update(parse_overrides(args.set))
    except InputError as exc:
        raise InputError(f"--set: {exc}") from None
    return out


def run(args: argparse.Namespace) -> int:
    if not args.files:
        raise InputError("give the config FILE to check (a launch script, TOML, JSON or YAML)")
    texts = []
    for name in args.files:
        path = Path(name)
        if not path.is_file():
            raise InputError(f"{name[:80]}: no such file")
        if path.stat().st_size > MAX_BYTES:
            raise InputError(f"{name[:80]}: larger than {MAX_BYTES // 1000:,} KB; not a training config")
        texts.append((path.name, path.read_text(encoding="utf-8", errors="replace")))
    budget = int(BUDGET.parse(args.budget)) if args.budget is not None else None
    if len(args.entry) > 120 or (args.entry and not args.entry.isidentifier()):
        raise InputError(f"--entry: {args.entry[:40]!r} is not a Python function name")
    done = checker.check(texts, overrides(args), args.format, budget, args.entry)
    if args.json:
        print_json(as_json(done))
    else:
        print(as_text(done))
    return 0


def as_json(done: checker.Checked) -> dict:
    rows = done.result.records(top=1)
    return {"format": done.reading.kind, "framework": done.reading.framework, "row": rows[0] if rows else None,
            "why_empty": done.result.why_empty(), "refused_by_framework": done.refusals(),
            "account": [e.__dict__ for e in done.reading.entries], "counts": done.reading.counts(),
            "typed": done.typed, "better": done.better()}


def as_text(done: checker.Checked) -> str:
    reading = done.reading
    lines = summary_lines(done)
    counts = reading.counts()
    for kind in KINDS:
        entries = [e for e in reading.entries if e.kind == kind]
        if entries:
            lines += ["", f"{kind.capitalize()} ({counts[kind]}):"]
            lines += [f"  {e.name}{' = ' + e.value if e.value else ''}: {e.meaning}" for e in entries]
    lines += ["", "The same run typed by hand:", "  " + done.typed,
              "Better layouts for this run:", "  " + done.better()]
    return "\n".join(lines)
