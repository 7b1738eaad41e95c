"""Plain-text tables for the CLI: right-aligned numbers, left-aligned first column."""

from __future__ import annotations

import json
import sys


def render(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]
    lines = []
    for row in [headers, *rows]:
        pairs = enumerate(zip(row, widths, strict=True))
        cells = [str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in pairs]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")
