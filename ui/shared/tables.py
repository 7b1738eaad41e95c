"""Small tables as markdown: drawn with the page's text, no table script for the browser to load.

st.dataframe makes the browser load about 1.3 MB of scripts (the grid and Arrow) on first use; a table of a
few rows reads as well in markdown, shows a missing value as a dash instead of "None", and wraps instead of
clipping its last column. Large or sortable tables stay st.dataframe.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

DASH = "—"


def plural(n: float, one: str, many: str | None = None, bold: bool = False) -> str:
    """'1 GPU', '16 GPUs', '1.5 micro-batches': the noun follows the number as printed (bold: the number in **)."""
    text = f"{n:,}" if isinstance(n, int) else f"{n:,.4g}"
    number = f"**{text}**" if bold else text
    return f"{number} {one if text == '1' else many or one + 's'}"


def percent(x: float) -> str:
    return f"{100 * x:.2f} %"


def number(x: Any) -> str:
    """Shortest readable text of a cell: 6 significant digits for floats, a dash for None or NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return DASH
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: Sequence[Mapping[str, Any]], formats: Mapping[str, Callable[[Any], str]] | None = None,
                   columns: Sequence[str] | None = None) -> str:
    """A markdown table of `rows` (dicts with the same keys); `formats` per column, else `number`."""
    if not rows:
        return ""
    formats = formats or {}
    columns = list(columns or rows[0].keys())

    def fmt(key: str, value: Any) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return DASH
        return formats.get(key, number)(value)

    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(fmt(c, r.get(c))) for c in columns) + " |" for r in rows]
    return "\n".join(lines)
