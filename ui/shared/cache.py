"""The one way pages call core: bounded, silent st.cache_data wrappers around a page's view model.

Each page has its wrappers in `ui/<page>/cache.py`, around the functions of its view, core.views.<page>:

    from core.views.pipeline import PipelineParams, PipelineView, pipeline_view
    from ui.shared.cache import cached

    @cached(max_entries=48, max_size="300MB")
    def view(params: PipelineParams) -> PipelineView:
        '''Cached core.views.pipeline.pipeline_view for the Pipeline page.'''
        return pipeline_view(params)

Rules:
- A wrapper's arguments are the frozen, validated parameter dataclass (or a few plain values): they
  are what the cache keys on. An argument whose name starts with "_" is not hashed (Streamlit rule).
- Return core's result (numpy / pandas / dataclasses), not widgets. st.cache_data pickles the value
  and hands every caller a fresh copy, so callers may not mutate a shared object by accident; keep
  results modest in size (aggregate very long timelines in core) since the copy is paid on every hit.
- Every wrapper is bounded (max_entries, and max_size if results can be large) and shows no spinner
  (calls are meant to be fast; a spinner flashing on every slider move is noise).
- core raises InputError for inputs it refuses: st.cache_data does not cache exceptions, so the page
  catches it and shows the message (st.error(str(exc)) is fine: core's messages are our own text).
- A call that can be large says how large (`work=`, a core.views.work counter taking the same arguments): a miss
  then runs in a worker process (ui/shared/workers.py), heavy work in one of the server's few slots
  (ui/shared/work_limit.py), and the page shows what it computes. Its arguments and result cross processes
  pickled: plain values and core's dataclasses, not callables.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import streamlit as st

from core.views.work import Work
from ui.shared import work_limit, workers

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_MAX_ENTRIES = 64


def cached(max_entries: int = DEFAULT_MAX_ENTRIES, *, max_size: int | str | None = None,
           ttl: float | None = None, hash_funcs: dict | None = None,
           work: Callable[..., Work] | None = None, route: Callable[..., Any] | None = None) -> Callable[[F], F]:
    """Decorator: st.cache_data(max_entries=..., show_spinner=False) with our bounds (hash_funcs: as
    st.cache_data's, e.g. a parameter dataclass keyed by its repr instead of Streamlit's field-by-field hash;
    work: the call's size, see ui/shared/work_limit.py; route: of the same arguments, a hashable value that sends
    calls sharing it to the same worker process while it is idle, where their common part is cached)."""
    if max_entries < 1:
        raise ValueError("max_entries must be at least 1")

    def wrap(func: F) -> F:
        if work is None:
            return st.cache_data(func, max_entries=max_entries, max_size=max_size, ttl=ttl, show_spinner=False,
                                 hash_funcs=hash_funcs)

        key = workers.register(func)

        @functools.wraps(func)
        def limited(*args, **kwargs):  # what the cache runs on a miss: in a worker process, heavy work in a slot
            size = work(*args, **kwargs)
            with work_limit.slot(size):
                return workers.run(key, size.release, args, kwargs, work_limit.yield_check(),
                                   route(*args, **kwargs) if route is not None else None)

        inner = st.cache_data(limited, max_entries=max_entries, max_size=max_size, ttl=ttl, show_spinner=False,
                              hash_funcs=hash_funcs)

        @functools.wraps(func)
        def call(*args, **kwargs):  # what the page calls: heavy work shows what it computes while it runs
            with work_limit.progress(work(*args, **kwargs)):
                return inner(*args, **kwargs)

        call.clear = inner.clear
        return call  # type: ignore[return-value]

    return wrap


def clear_all() -> None:
    """Drop every cached core result (tests, or after presets change on disk)."""
    st.cache_data.clear()
