"""`python -m core SUBCOMMAND ...`: the command-line face of core.

Each subcommand lives in its own module with `build(parser)` and `run(args) -> int`; they call the
same core functions as the pages. Bad arguments end with one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import core.pipeline.schedules  # noqa: F401  registers the schedules before any command reads their names
from core.errors import InputError

SUBCOMMANDS = {
    "simulate": ("core.cli.simulate", "simulate a pipeline schedule (timeline, bubble, memory)"),
    "zero": ("core.cli.zero", "per-GPU model-state memory under DP and ZeRO 1-3"),
    "activations": ("core.cli.activations", "activation memory per GPU (Korthikanti et al.)"),
    "equivalence": ("core.cli.equivalence", "sharded Adam vs replicated Adam, bit for bit"),
    "plan": ("core.cli.plan", "enumerate and rank t x p x d layouts"),
    "check": ("core.cli.check", "read a run's config (Megatron-LM, torchtitan, DeepSpeed, NeMo, Megatron-Bridge, HF, "
                                "Accelerate, LLM Foundry, torchtune, NeMo Automodel, ...) and evaluate it"),
    "model": ("core.cli.model", "a model's architecture, total and active parameter counts"),
    "validate": ("core.cli.validate", "step time (or --memory: memory per GPU) against published and measured runs"),
}


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line (no usage block) and exits 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def fail(message: str) -> int:
    sys.stderr.write(f"error: {message}\n")
    return 2


def empty_option(argv: list[str]) -> str:
    """The first option given an empty value (`--from-csv ""`, `--stage-costs=`), or "": an empty value is never
    meant as "leave it out" (which a default would do silently)."""
    for i, tok in enumerate(argv):
        flag, eq, value = tok.partition("=")
        if tok.startswith("--") and eq and not value.strip():
            return flag
        if not tok.strip() and i and argv[i - 1].startswith("-") and "=" not in argv[i - 1]:
            return argv[i - 1]
    return ""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):  # asked for: stdout, 0; nothing given: a mistake, stderr, 2
        lines = [f"  {name:<12} {desc}" for name, (_, desc) in SUBCOMMANDS.items()]
        usage = "usage: python -m core SUBCOMMAND [options]\n\nsubcommands:\n" + "\n".join(lines) + "\n"
        (sys.stdout if argv else sys.stderr).write(usage)
        return 0 if argv else 2
    name = argv[0]
    if name not in SUBCOMMANDS:
        return fail(f"unknown subcommand {name[:40]!r}; choose one of {', '.join(SUBCOMMANDS)}")
    empty = empty_option(argv[1:])
    if empty:
        return fail(f"{empty[:40]}: empty value; give a value or leave the option out")
    module = importlib.import_module(SUBCOMMANDS[name][0])
    parser = OneLineParser(prog=f"python -m core {name}", description=SUBCOMMANDS[name][1])
    module.build(parser)
    args = parser.parse_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except InputError as exc:
        return fail(str(exc))
    except BrokenPipeError:
        return 0
