"""A server-wide limit on heavy page work, so one student's large question cannot take the server from the class.

Every cached core call that can be large declares its size (`cached(work=...)` in ui/shared/cache.py, counted by
core.views.work before anything runs). Light work runs at once, in the session's own thread, as before. Heavy work
(a plan of over 100,000 candidate layouts, a timeline of over 262,144 operations, the frontier of every schedule
over 1,048,576) takes one of HEAVY_SLOTS slots, shared by every session of the process, and waits for one when all
are taken; the page says what is being computed, with the seconds it has taken, while it waits and runs (a
spinner shown after half a second, so a cached answer flashes nothing).

The work itself runs in worker processes (ui/shared/workers.py, one per CPU), so the slots bound how many
questions of a kind run at once, and with them memory, not the serving process's time: HEAVY_SLOTS = half the
workers (1 on 2 cores: the heavy question's memory is bounded by one question's, the planner's budget), PLAN_SLOTS
= the workers (every core plans). DASHBOARD_HEAVY_SLOTS and DASHBOARD_PLAN_SLOTS override them.

Memory: glibc keeps freed memory for reuse (core.runtime.keep_freed_memory, for speed), so after a heavy question
the process would keep its high-water mark. The limiter gives it back (core.views.work.release_memory) when heavy
work finishes and after any plan (each allocates 100 MB or more), and a janitor thread does the same once the
server has been idle for IDLE_RELEASE_S seconds after any work, then shuts down the sessions closed over
disconnectedSessionTTL ago (`reap_closed_sessions`): a server the class has left holds its bounded caches, not the
largest question of the lecture nor the class's sessions.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import time
from collections.abc import Iterator

import streamlit as st

from core.views.work import Work, release_memory
from ui.shared.workers import WORKERS

HEAVY_SLOTS = max(1, int(os.environ.get("DASHBOARD_HEAVY_SLOTS", "") or max(1, WORKERS // 2)))
# Plans below the heavy threshold (0.2-2 s and 100-300 MB each) queue in a lane of their own, one at a time: forty
# students opening distinct planner links at once then get their plans one after another (the first in a second or
# two) instead of all at the end, and the server holds one plan's working memory instead of ten (bench/classroom.py).
PLAN_SLOTS = max(1, int(os.environ.get("DASHBOARD_PLAN_SLOTS", "") or max(1, WORKERS)))
IDLE_RELEASE_S = 10.0  # seconds without any page work before the freed memory goes back to the system
WAIT_POLL_S = 0.1  # how often a waiting session checks whether its page was closed or changed
REAPS_AFTER_WORK = 24  # idle rounds (every IDLE_RELEASE_S / 2) the janitor keeps reaping after the last work: 2 min


def yield_check():
    """Streamlit's check that raises when the waiting run should stop or rerun (the page closed, a slider moved);
    None outside a script run. Internal to Streamlit (pinned in requirements.txt), hence the guard."""
    try:
        from streamlit.runtime.scriptrunner_utils.script_run_context import get_run_yield_check
    except ImportError:
        return None
    return get_run_yield_check()


def _in_cached_function() -> bool:
    try:
        from streamlit.runtime.scriptrunner_utils.script_run_context import in_cached_function
    except ImportError:
        return False
    return bool(in_cached_function.get())


def reap_closed_sessions() -> int:
    """Shut down the sessions whose websocket closed over server.disconnectedSessionTTL ago; how many.

    Streamlit keeps a closed page's session for that long so a reconnect can resume it, but reaps the expired ones
    only when another session is stored: a class that leaves within one TTL stays in memory for good (measured:
    40 sessions closed at once kept 546 MB until the next visitor). Internal to Streamlit (pinned), hence the guard."""
    try:
        from streamlit import runtime

        if not runtime.exists():
            return 0
        removed = runtime.get_instance()._session_mgr._session_storage._cache.expire()
    except Exception:  # another Streamlit's internals: nothing is reaped, as before
        return 0
    for _, info in removed:
        with contextlib.suppress(Exception):
            info.session.shutdown()  # its uploads, downloads (media files) and script runner go too
    if removed:
        gc.collect()  # a session's objects refer to each other: reference counts alone do not free them
    return len(removed)


class Limiter:
    """The slots, who holds and who waits for them, and the idle-time memory release."""

    def __init__(self, slots: int, idle_release_s: float = IDLE_RELEASE_S):
        self.size = slots
        self._slots = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self._mine = threading.local()  # a thread holding a slot does not wait for another (no self-deadlock)
        self.running = self.waiting = 0
        self.heavy_done = 0  # heavy computations finished since start (tests read it)
        self.idle_release_s = idle_release_s
        self._last_work = time.monotonic()
        self._dirty = False
        self._reaps_left = 0
        self._janitor: threading.Thread | None = None

    def ahead(self) -> int:
        """Heavy computations running or waiting now (a new one waits for all but the free slots)."""
        with self._lock:
            return self.running + self.waiting

    def touch(self) -> None:
        """Some page work happened: release memory once the server has been idle a while after it."""
        with self._lock:
            self._last_work, self._dirty = time.monotonic(), True
            if self._janitor is None:
                self._janitor = threading.Thread(target=self._janitor_loop, name="work-limit-janitor", daemon=True)
                self._janitor.start()

    @contextlib.contextmanager
    def slot(self, work: Work) -> Iterator[None]:
        """Run the block as `work`: at once when it is light, in a slot when it is heavy."""
        self.touch()
        if not work.lane or getattr(self._mine, "held", False):
            try:
                yield
            finally:
                if work.release:
                    release_memory()
            return
        self._acquire()
        self._mine.held = True
        try:
            yield
        finally:
            self._mine.held = False
            with self._lock:
                self.running -= 1
                self.heavy_done += 1
            self._slots.release()
            if work.heavy or work.release:
                release_memory()
            self.touch()

    def _acquire(self) -> None:
        with self._lock:
            self.waiting += 1
        try:
            check = yield_check()
            while not self._slots.acquire(timeout=WAIT_POLL_S):
                if check is not None:
                    check()  # raises when the page was closed or changed: the wait ends, no slot is taken
        finally:
            with self._lock:
                self.waiting -= 1
        with self._lock:
            self.running += 1

    def _janitor_loop(self) -> None:
        while True:
            time.sleep(self.idle_release_s / 2)
            with self._lock:
                idle = time.monotonic() - self._last_work >= self.idle_release_s and self.running == 0
                due = idle and (self._dirty or self._reaps_left > 0)
                if due:  # after the last work: once at once, then until closed sessions have outlived their TTL
                    self._reaps_left = REAPS_AFTER_WORK if self._dirty else self._reaps_left - 1
                    self._dirty = False
            if due:
                reap_closed_sessions()
                release_memory()


LIMITER = Limiter(HEAVY_SLOTS)  # the heavy lane; its janitor releases memory for every lane
LANES = {"heavy": LIMITER, "plans": Limiter(PLAN_SLOTS)}


def slot(work: Work):
    """Inside a cached function (a miss): run `work` in its lane, at once when it has none."""
    LIMITER.touch()
    lane = LANES.get(work.lane)
    return lane.slot(work) if lane is not None else _released_after(work)


@contextlib.contextmanager
def _released_after(work: Work) -> Iterator[None]:
    try:
        yield
    finally:
        if work.release:
            release_memory()


def progress_text(work: Work, ahead: int, slots: int = HEAVY_SLOTS) -> str:
    kind = "heavy question" if work.heavy else "question of this kind"
    queue = (f"; {ahead:,} {kind}{'s' if ahead != 1 else ''} ahead of it on this server, which runs {slots} at a "
             "time so that other pages keep answering") if ahead >= slots else ""
    return f"{work.what}{queue}."


@contextlib.contextmanager
def progress(work: Work) -> Iterator[None]:
    """Around a page's cached call: for work in a lane, a spinner saying what is computed (and what it waits for),
    with its elapsed seconds; shown only if the call takes over half a second (a cached answer shows nothing)."""
    LIMITER.touch()
    lane = LANES.get(work.lane)
    if lane is None or _in_cached_function():
        yield
        return
    with st.spinner(progress_text(work, lane.ahead(), lane.size), show_time=True):
        yield
