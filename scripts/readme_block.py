"""Replace a generated block of README.md, between its begin and end markers (the validation tables' scripts)."""

from __future__ import annotations

import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def write(begin: str, end: str, text: str) -> bool:
    """Put `text` (markers included) where README.md's block is; False, saying why, when a marker is missing."""
    readme = README.read_text(encoding="utf-8")
    if begin not in readme or end not in readme:
        print(f"README.md lacks the markers {begin} ... {end}", file=sys.stderr)
        return False
    head, rest = readme.split(begin, 1)
    README.write_text(head + text + rest.split(end, 1)[1], encoding="utf-8")
    print("README.md updated", file=sys.stderr)
    return True
