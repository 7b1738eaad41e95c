"""argparse options generated from Spec tables, so the CLI enforces exactly the ranges the pages use.

argparse only collects strings; `collect` hands them to `parse_strict`, whose InputError the dispatcher
turns into one line and exit code 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from core.params import Spec, parse_strict


def add(parser: argparse.ArgumentParser, spec: Spec, *flags: str) -> None:
    """One option for `spec` (default flag --key with dashes). A boolean takes true or false (`--flag false`); the
    bare flag means true, so a switch that defaults on can be turned off and one that defaults off turned on."""
    flags = flags or ("--" + spec.key.replace("_", "-"),)
    default = "preset" if spec.default is None else spec.default
    unit = f" [{spec.unit}]" if spec.unit else ""
    text = f"{spec.label or spec.key}{unit}. {spec.help} Allowed: {spec.describe_range()}; default {default}."
    text = text.replace("%", "%%")
    if spec.kind == "bool":  # --flag alone is true; --flag true|false as in a URL (a default-true switch can be unset)
        parser.add_argument(*flags, dest=spec.key, nargs="?", const="true", default=None, metavar="true|false",
                            help=text)
    else:
        parser.add_argument(*flags, dest=spec.key, default=None, metavar=spec.key.upper(), help=text)


def switch(parser, flag: str, help: str) -> None:
    """A command-line switch (an output mode, a filter) that, like every boolean input, takes true or false:
    `--json`, `--json true` and `--json false` (argparse's store_true refused the value)."""
    parser.add_argument(flag, nargs="?", const=True, default=False, type=_truth, metavar="true|false",
                        help=f"{help} (true or false; alone: true)")


def _truth(text: str) -> bool:
    word = str(text).strip().lower()
    if word not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {str(text)[:40]!r}")
    return word == "true"


def collect(args: argparse.Namespace, specs: Mapping[str, Spec]) -> dict:
    """Strictly parsed values for every spec; options not given keep their defaults."""
    raw = {k: getattr(args, k) for k in specs if getattr(args, k, None) is not None}
    return parse_strict(specs, raw)
