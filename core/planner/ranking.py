"""The planner's one ranking: feasible first, fewest reasons first, fastest first, more headroom first, then t and
p, over the searched candidates and the excluded factorisations together, as one frame.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pandas.api.internals import create_dataframe_from_blocks

from core.planner.columns import COLUMNS, EMPTY_DTYPES


def ranked(columns: dict, n: int, outside: pd.DataFrame, counts: np.ndarray) -> pd.DataFrame:
    """The candidates' columns (arrays of n, or scalars; n = 0 takes `columns` empty) and the excluded rows as one
    ranked frame, sorted as arrays and built once: the same frame as building, concatenating and sorting it in
    pandas. `counts`: how many reasons each candidate has.

    A re-plan builds this frame every time (about 60 columns of 100,000 rows), so each column is sorted straight
    into a block of its dtype and the blocks are handed to pandas whole: sorting columns and letting pandas
    consolidate them copied every value once more (into fresh memory, which costs as much as the copy)."""
    def column(v) -> np.ndarray:
        if isinstance(v, list):  # tuples per candidate (reasons, warnings): an object array of them
            return np.fromiter(v, dtype=object, count=n)
        return np.broadcast_to(v, (n,)) if np.ndim(v) == 0 else v

    arrays = {k: column(columns[k]) if n else np.empty(0, dtype=EMPTY_DTYPES.get(k, float)) for k in COLUMNS}
    more = {k: outside[k].to_numpy() for k in COLUMNS} if len(outside) else {}
    total = n + len(outside)

    def joined(k: str) -> np.ndarray:
        return np.concatenate([arrays[k], more[k]]) if more else arrays[k]

    counts = np.asarray(counts, dtype=np.int64)
    if more:
        counts = np.concatenate([counts, outside["reasons"].map(len).to_numpy(dtype=np.int64)])
    order = np.lexsort((joined("p"), joined("t"), -np.nan_to_num(joined("headroom_bytes"), nan=-np.inf),
                        np.nan_to_num(joined("step_time_s"), nan=np.inf), counts, ~joined("feasible").astype(bool)))
    # Each column's dtype after concatenating: object where the excluded rows' column is (pandas would keep it so).
    kept = {k for k in COLUMNS if more and outside[k].dtype == object}
    dtypes = {k: np.result_type(v.dtype, more[k].dtype) if more else v.dtype for k, v in arrays.items()}
    blocks = []
    for dtype in dict.fromkeys(dtypes.values()):
        names = [k for k in COLUMNS if dtypes[k] == dtype]
        block = np.empty((len(names), total), dtype=dtype)
        for row, k in enumerate(names):  # column by column: a whole unsorted block would be one more large copy
            np.take(joined(k).astype(dtype, copy=False), order, out=block[row])
        if "rank" in names:  # feasible rows come first: ranks 1, 2, ... (NaN for the infeasible)
            count = int(np.count_nonzero(joined("feasible")))
            block[names.index("rank"), :count] = np.arange(1, count + 1, dtype=float)
        if dtype.kind == "O":  # as pd.DataFrame(dict) infers them (all str: pandas' str dtype) unless kept as object
            for row, k in enumerate(names):
                inferred = None if k in kept else pd.DataFrame({k: block[row]})[k]
                blocks.append((block[row:row + 1] if inferred is None or inferred.dtype == object else inferred.array,
                               np.array([COLUMNS.index(k)], dtype=np.intp)))
            continue
        blocks.append((block, np.array([COLUMNS.index(k) for k in names], dtype=np.intp)))
    return create_dataframe_from_blocks(blocks, pd.RangeIndex(total), pd.Index(list(COLUMNS)))
