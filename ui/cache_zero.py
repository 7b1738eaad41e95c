"""The ZeRO page's cached core calls: one bounded st.cache_data wrapper per core function it draws from.

The view itself is assembled in core (core.views.zero.zero_view), so the CLI, the tests and the page read the
same object; here it is only cached per parameter set.
"""

from __future__ import annotations

import pandas as pd

from core.memory import equivalence, fsdp
from core.views import zero
from ui.cache import cached

zero_view = cached(max_entries=64)(zero.zero_view)


@cached(max_entries=64)
def fsdp_view(psi: int, nd: int, layers: int, block_params: float, min_params: int, prefetch: bool,
              kw: tuple[tuple[str, float], ...]) -> pd.DataFrame:
    """core.memory.fsdp.wrap_comparison: one row per wrap policy (root-only, per block, min-params)."""
    return fsdp.wrap_comparison(psi, nd, layers, block_params, min_params, prefetch, **dict(kw))


@cached(max_entries=32)
def equivalence_run(ranks: int, steps: int, size: int, seed: int, clip: float) -> equivalence.Equivalence:
    """core.memory.equivalence.demonstrate: sharded and replicated Adam side by side."""
    return equivalence.demonstrate(ranks, steps, size, seed, clip)
