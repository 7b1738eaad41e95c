"""The ZeRO page's cached core calls: one bounded st.cache_data wrapper per core function it draws from.

The view itself is assembled in core (core.views.zero.zero_view), so the CLI, the tests and the page read the
same object; here it is only cached per parameter set.
"""

from __future__ import annotations

from core.views import zero
from core.views.work import zero_work
from ui.shared.cache import cached

zero_view = cached(max_entries=64, work=zero_work)(zero.zero_view)  # counted: a miss runs in a worker process
fsdp_view = cached(max_entries=64)(zero.fsdp_table)
equivalence_run = cached(max_entries=32)(zero.equivalence_demo)
