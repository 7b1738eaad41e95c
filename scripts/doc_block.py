"""Replace a generated block of a Markdown file, between its begin and end markers (the table scripts' writer).

Each table lives in the doc that explains it: scripts/validation_table.py in docs/step-time.md,
scripts/memory_table.py in docs/memory.md, scripts/param_docs.py in docs/inputs.md (each script's DOC).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write(path: Path, begin: str, end: str, text: str) -> bool:
    """Put `text` (markers included) where `path`'s block is; False, saying why, when a marker is missing."""
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    doc = path.read_text(encoding="utf-8")
    if begin not in doc or end not in doc:
        print(f"{name} lacks the markers {begin} ... {end}", file=sys.stderr)
        return False
    head, rest = doc.split(begin, 1)
    path.write_text(head + text + rest.split(end, 1)[1], encoding="utf-8")
    print(f"{name} updated", file=sys.stderr)
    return True
