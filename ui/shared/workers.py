"""Heavy page work in worker processes, so that the process serving the pages keeps answering.

Python runs one thread at a time in a process: a Streamlit server that plans, simulates and draws in its own
interpreter uses one core however many the machine has, and one student's plan holds every other student's page.
A cached core call that declares its work (ui/shared/cache.py `cached(work=...)`) therefore runs, on a cache miss,
in a worker process (one single-process `concurrent.futures.ProcessPoolExecutor` each, started by a fork server so
no worker inherits the server's threads); its result comes back pickled and is cached in the server as before, per
parameter set and shared by every session. A call may name a route (ui/shared/cache.py `route=`): calls sharing it
go to the same worker while it is idle, where what they share is still cached (a plan's re-plans under other
step-time assumptions). The server process only waits, and while it waits it serves other pages.

DASHBOARD_WORKERS sets the pool: `auto` (the default) = the CPUs this process may use (its affinity, capped by a
container's CPU quota: `docker run --cpus 4` gives 4), a number = that many (at most MAX_WORKERS), 0 = no pool (the
work runs in the serving process, as before). Work waits for an idle worker in the server, so a session that is
closed or rerun while its work waits withdraws it; work already running finishes (its result is not used). The
workers run at a lower priority than the serving process (NICE), which answers every page.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import importlib
import math
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV = "DASHBOARD_WORKERS"
MAX_WORKERS = 64
NICE = 5  # workers' scheduling priority below the serving process's
WAIT_POLL_S = 0.1  # how often a waiting session checks whether its page was closed or changed
# Imported once by the fork server, so a worker starts with them loaded (about 1 s of imports a worker otherwise):
# the core views, and the page modules whose cached calls run here (importing one registers its functions; it
# brings Streamlit, 0.4 s that each worker's first plan otherwise waited for).
PRELOAD = ("numpy", "pandas", "core.views.planner", "core.views.pipeline", "core.views.zero", "ui.planner.cache",
           "ui.pipeline.cache", "ui.pipeline.memory", "ui.zero.cache")
CGROUP_V2 = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1 = (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))

_FUNCS: dict[str, Callable[..., Any]] = {}  # every pooled function by key, in the server and in each worker
_lock = threading.Lock()
_idle = threading.Condition()  # a worker became idle (and guards _busy)
_pools: list[cf.ProcessPoolExecutor] | None = None  # one single-process executor per worker, so work can pick one
_busy: list[bool] = []
_generation = 0  # counts pool starts: a finished future of a dropped pool does not free a worker of the new one
_warmed = False


def cpu_quota(v2: Path = CGROUP_V2, v1: tuple[Path, Path] = CGROUP_V1) -> float | None:
    """The container's CPU limit in CPUs (cgroup v2 cpu.max, or v1's quota over period); None when unlimited."""
    try:
        quota, period = v2.read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError, ZeroDivisionError):
        pass
    try:
        quota, period = (int(p.read_text()) for p in v1)
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def cpu_limit(quota: float | None = None) -> int:
    """CPUs this process may use: its affinity, capped by the container's quota (rounded up: 1.5 CPUs -> 2)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    quota = cpu_quota() if quota is None else quota
    return max(1, min(n, math.ceil(quota)) if quota else n)


def pool_size(raw: str | None = None) -> tuple[int, str]:
    """(workers, what to tell the operator when the setting was refused) from DASHBOARD_WORKERS."""
    raw = (os.environ.get(ENV, "auto") if raw is None else raw).strip().lower()
    if raw in ("", "auto"):
        return min(cpu_limit(), MAX_WORKERS), ""
    if raw.isdigit() and int(raw) <= MAX_WORKERS:
        return int(raw), ""
    return min(cpu_limit(), MAX_WORKERS), f"{ENV}={raw[:20]!r} is not auto or 0 to {MAX_WORKERS}; using auto"


WORKERS, SETTING_NOTE = pool_size()


def register(func: Callable[..., Any]) -> str:
    """Make `func` callable in a worker by key: its module is imported there, which registers it again."""
    key = f"{func.__module__}:{func.__qualname__}"
    _FUNCS[key] = func
    return key


def _run(key: str, release: bool, args: tuple, kwargs: dict) -> Any:
    """In a worker: the registered function, imported on first use; memory handed back after large work."""
    if key not in _FUNCS:  # importing a ui module registers its wrappers' functions; a core function is its own
        module, name = key.split(":", 1)
        found = importlib.import_module(module)
        if key not in _FUNCS:
            for part in name.split("."):
                found = getattr(found, part)
            _FUNCS[key] = found
    try:
        return _FUNCS[key](*args, **kwargs)
    finally:
        if release:
            from core.views.work import release_memory

            release_memory()


def _ready() -> int:
    return os.getpid()


def _lower_priority() -> None:
    """In each worker: yield the CPU to the serving process, which answers every page (a plan can wait 50 ms)."""
    with contextlib.suppress(OSError):
        os.nice(NICE)


def pool() -> list[cf.ProcessPoolExecutor] | None:
    """The server's workers (one executor each), started on first use; None when DASHBOARD_WORKERS is 0."""
    return _started()


def _started() -> list[cf.ProcessPoolExecutor] | None:
    """The workers' executors, started on first use (all idle, a new generation)."""
    global _pools, _busy, _generation
    if WORKERS == 0:
        return None
    with _lock:
        if _pools is None:
            if SETTING_NOTE:
                print(f"dashboard: {SETTING_NOTE}", file=sys.stderr)  # the operator's log, once per pool
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(list(PRELOAD))
            with _idle:
                _busy = [False] * WORKERS
                _generation += 1
            _pools = [cf.ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=_lower_priority)
                      for _ in range(WORKERS)]
        return _pools


def warm() -> None:
    """Start the workers now (one trivial task each), so the first student does not wait for process start."""
    global _warmed
    with _lock:
        if _warmed:
            return
        _warmed = True
    pools = pool()
    if pools is not None:
        threading.Thread(target=lambda: [f.result() for f in [p.submit(_ready) for p in pools]],
                         name="workers-warm", daemon=True).start()


def _take(route: object, check: Callable[[], None] | None) -> tuple[int, int]:
    """An idle worker, marked busy: the one `route` names (hash modulo the workers) when it is idle, else any idle
    one. A question's re-plans share their route, so they find the worker whose caches (the plan's kept structure,
    its simulations; core.planner.plan_cache) already hold it. Waits until a worker is idle, checking `check`."""
    with _idle:
        n = len(_busy)
        first = hash(route) % n if route is not None else 0
        while True:
            for i in [first, *(j for j in range(n) if j != first)]:
                if not _busy[i]:
                    _busy[i] = True
                    return i, _generation
            _idle.wait(WAIT_POLL_S)  # the executor would pass queued work to a worker ahead of time, out of
            if check is not None:  # Future.cancel's reach: it waits here until a worker is idle
                check()


def _give_back(i: int, generation: int) -> None:
    with _idle:
        if generation == _generation:
            _busy[i] = False
        _idle.notify_all()


def run(key: str, release: bool, args: tuple, kwargs: dict, check: Callable[[], None] | None = None,
        route: object = None) -> Any:
    """The registered function's result, computed in a worker (in this process when there is no pool). `check`
    raises when the waiting session's page was closed or changed: queued work is then withdrawn. `route` (hashable)
    sends work with the same route to the same worker while it is idle (`_take`)."""
    pools = _started()
    if pools is None:
        return _run(key, False, args, kwargs)
    i, generation = _take(route, check)
    try:
        future = pools[i].submit(_run, key, release, args, kwargs)
    except BaseException as exc:
        _give_back(i, generation)
        if isinstance(exc, cf.process.BrokenProcessPool):
            _broken()
        raise
    future.add_done_callback(lambda _: _give_back(i, generation))
    while True:
        try:
            return future.result(timeout=WAIT_POLL_S)
        except cf.TimeoutError:
            if check is None:
                continue
            check()  # raises: the work runs on, its result unused, and its worker is free again when it ends
        except cf.process.BrokenProcessPool:
            _broken()


def _broken() -> None:
    """A worker was killed (out of memory, a signal): drop the pool, the next call starts a new one; tell the page."""
    shutdown(wait=False)
    raise RuntimeError("a worker process stopped unexpectedly (out of memory?); reload the page") from None


def shutdown(wait: bool = True) -> None:
    """Stop the workers (tests; a broken pool); queued work is withdrawn."""
    global _pools
    with _lock:
        if _pools is not None:
            for p in _pools:
                p.shutdown(wait=wait, cancel_futures=True)
            _pools = None
