"""The pool of worker processes that runs the pages' counted work (ui/shared/workers.py): its size from the machine
and the container's CPU limit, the setting's range, and that work really runs in another process, errors and a
closed page's queued work included."""

from __future__ import annotations

import concurrent.futures
import os
import time

import pytest

from core.errors import InputError
from ui.shared import workers


def _pid() -> int:
    return os.getpid()


def _refuse(value: int) -> int:
    raise InputError(f"value: {value} is out of range")


def _slow(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _die() -> None:
    os._exit(3)


@pytest.fixture
def pool(monkeypatch):
    """A real pool of one worker for the test (the suite runs pages in-process: DASHBOARD_WORKERS=0)."""
    monkeypatch.setattr(workers, "WORKERS", 1)
    workers.shutdown()
    yield
    workers.shutdown()


def test_the_container_cpu_limit_caps_the_workers(tmp_path):
    v2 = tmp_path / "cpu.max"
    v2.write_text("max 100000\n")
    assert workers.cpu_quota(v2, (tmp_path / "q", tmp_path / "p")) is None
    v2.write_text("150000 100000\n")  # docker run --cpus 1.5
    assert workers.cpu_quota(v2, (tmp_path / "q", tmp_path / "p")) == 1.5
    for junk in ("", "100000 0", "lots 100000"):  # an unreadable limit is no limit, never a crash
        v2.write_text(junk)
        assert workers.cpu_quota(v2, (tmp_path / "q", tmp_path / "p")) is None
    quota, period = tmp_path / "q", tmp_path / "p"
    quota.write_text("400000")
    period.write_text("100000")
    assert workers.cpu_quota(tmp_path / "absent", (quota, period)) == 4.0  # cgroup v1
    quota.write_text("-1")
    assert workers.cpu_quota(tmp_path / "absent", (quota, period)) is None
    cpus = len(os.sched_getaffinity(0))
    assert workers.cpu_limit(quota=1.5) == min(cpus, 2)  # rounded up: 1.5 CPUs keep two processes busy
    assert workers.cpu_limit(quota=1000.0) == cpus  # never more than this process may run on


@pytest.mark.parametrize("raw,expected,refused", [
    ("auto", "cpus", False), ("", "cpus", False), ("0", 0, False), ("3", 3, False), (" 2 ", 2, False),
    ("many", "cpus", True), ("-1", "cpus", True), ("65", "cpus", True), ("true", "cpus", True)])
def test_the_setting_takes_auto_or_a_count_and_says_what_it_refused(raw, expected, refused):
    n, note = workers.pool_size(raw)
    assert n == (min(workers.cpu_limit(), workers.MAX_WORKERS) if expected == "cpus" else expected)
    assert bool(note) == refused and (not refused or workers.ENV in note)


def test_work_runs_in_another_process_and_its_errors_come_back(pool):
    key = workers.register(_pid)
    assert workers.run(key, False, (), {}) != os.getpid()
    with pytest.raises(InputError, match="value: 7 is out of range"):  # the page shows core's message as before
        workers.run(workers.register(_refuse), False, (7,), {})


def test_a_closed_page_withdraws_its_queued_work(pool):
    slow = workers.register(_slow)
    workers.run(workers.register(_pid), False, (), {})  # the worker has started
    with concurrent.futures.ThreadPoolExecutor(1) as other_page:
        busy = other_page.submit(workers.run, slow, False, (1.0,), {})  # the one worker is busy for 1 s
        time.sleep(0.3)
        calls = []

        def closed():
            calls.append(1)
            raise RuntimeError("page closed")

        with pytest.raises(RuntimeError, match="page closed"):
            workers.run(slow, False, (5.0,), {}, check=closed)  # waits for the worker, withdrawn at the first check
        assert calls == [1] and busy.result() == 1.0
    started = time.monotonic()
    assert workers.run(workers.register(_pid), False, (), {}) > 0
    assert time.monotonic() - started < 2.0  # the withdrawn 5 s never ran


def test_a_worker_that_dies_is_reported_and_replaced(pool):
    with pytest.raises(RuntimeError, match="worker process stopped"):
        workers.run(workers.register(_die), False, (), {})
    assert workers.run(workers.register(_pid), False, (), {}) != os.getpid()  # a new pool serves the next call


def test_without_a_pool_the_work_runs_here(monkeypatch):
    monkeypatch.setattr(workers, "WORKERS", 0)
    assert workers.run(workers.register(_pid), False, (), {}) == os.getpid()


def test_work_sharing_a_route_finds_its_worker_while_it_is_idle(monkeypatch):
    # A slider's re-plans share their question's route: the worker that planned it (its caches hold the question)
    # takes them; while that worker is busy another idle one does, rather than the work waiting
    monkeypatch.setattr(workers, "WORKERS", 2)
    workers.shutdown()
    try:
        pid, slow = workers.register(_pid), workers.register(_slow)
        home = workers.run(pid, False, (), {}, route="question")
        assert {workers.run(pid, False, (), {}, route="question") for _ in range(6)} == {home}
        with concurrent.futures.ThreadPoolExecutor(1) as other_page:
            busy = other_page.submit(workers.run, slow, False, (1.0,), {}, None, "question")
            time.sleep(0.3)
            assert workers.run(pid, False, (), {}, route="question") not in (home, os.getpid())
            assert busy.result() == 1.0
        assert workers.run(pid, False, (), {}, route="question") == home  # idle again: home again
    finally:
        workers.shutdown()
