"""Byte units at the edge: core computes in bytes; GB (1e9) and GiB (2^30) appear only here, labelled.

Papers and vendors write GB for 1e9 bytes; DeepSpeed's estimator prints bytes / 2^30 and calls it "GB".
Keeping both constants named, and every formatted number suffixed, avoids a silent 7 % disagreement.
"""

from __future__ import annotations

import pandas as pd

GB = 1e9
GIB = float(1 << 30)
TB = 1e12  # NVMe drives are sold in TB = 1e12 bytes


def to_gb(nbytes):
    return nbytes / GB


def to_gib(nbytes):
    return nbytes / GIB


def fmt_bytes(nbytes: float, unit: str = "GB", digits: int = 2) -> str:
    """'31.41 GB' or '29.25 GiB'; the unit is always printed."""
    if unit == "GB":
        return f"{nbytes / GB:,.{digits}f} GB"
    if unit == "GiB":
        return f"{nbytes / GIB:,.{digits}f} GiB"
    raise ValueError(f"unit must be GB or GiB, got {unit!r}")


def frame_in(df: pd.DataFrame, unit: str = "GB") -> pd.DataFrame:
    """Copy of `df` with every '... [bytes]' column converted and renamed '... [GB]' or '... [GiB]'."""
    scale = {"GB": GB, "GiB": GIB}[unit]
    out = df.copy()
    for col in df.columns:
        if isinstance(col, str) and col.endswith("[bytes]"):
            out[col] = df[col] / scale
            out = out.rename(columns={col: col[: -len("[bytes]")] + f"[{unit}]"})
    return out
