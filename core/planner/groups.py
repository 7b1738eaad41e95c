"""Distinct rows of a few integer columns, fast: candidates that share a simulation key, a framework's refusal or a
reason's numbers are computed once per distinct row and broadcast back.

np.unique(axis=0) sorts rows field by field; packing the columns into one integer (mixed radix, each column
shifted to start at zero) sorts the same rows in the same lexicographic order with one plain integer sort.
"""

from __future__ import annotations

import numpy as np

_MAX_CODE = 1 << 62


def distinct(columns) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the distinct rows in lexicographic order, each one's first position, each input row's distinct row) of
    the integer columns `columns` (equal lengths): np.unique(np.stack(columns, 1), axis=0, return_index=True,
    return_inverse=True)."""
    cols = [np.asarray(x).astype(np.int64, copy=False) for x in columns]
    code = np.zeros(cols[0].shape, dtype=np.int64)
    radix = 1
    for x in cols:
        lo = int(x.min()) if x.size else 0
        span = (int(x.max()) - lo + 1) if x.size else 1
        radix *= span
        if radix >= _MAX_CODE:  # too many combinations to pack: sort the rows themselves
            rows, first, inverse = np.unique(np.stack(cols, axis=1), axis=0, return_index=True, return_inverse=True)
            return rows, first, inverse.ravel()
        code = code * span + (x - lo)
    _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    return np.stack([x[first] for x in cols], axis=1).reshape(len(first), len(cols)), first, inverse.ravel()
