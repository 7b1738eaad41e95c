"""The server-wide work limit (ui/shared/work_limit.py) and the work counts it acts on (core.views.work).

Heavy work runs one at a time while light work goes on; a thread holding a slot is not made to wait for another;
what a page computes is said in words; memory freed by finished work goes back to the system.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from core.params.planner import PlannerParams
from core.runtime import keep_freed_memory, release_freed_memory
from core.views import work
from core.views.pipeline import PipelineParams
from ui.shared.work_limit import Limiter, progress_text

COSTLY = PlannerParams(model="deepseek-v3", gpus=61440, seq=1048576, mb_sizes=(1, 2, 3, 4, 5, 6, 7, 8), offload="all")
HEAVY = work.Work("heavy", 1, True)
LIGHT = work.Work("light", 1, False)


def test_the_issues_costly_question_is_heavy_and_the_default_one_is_not():
    costly, default = work.planner_work(COSTLY), work.planner_work(PlannerParams())
    assert costly.heavy and costly.units > 1_000_000
    assert "deepseek-v3 on 61,440 GPUs" in costly.what and f"{costly.units:,}" in costly.what
    assert not default.heavy and 1_000 < default.units < work.HEAVY_CANDIDATES


def test_pipeline_counts_are_the_simulators_operations():
    big = PipelineParams(schedule="interleaved", p=64, m=1024, v=8)
    assert work.pipeline_work(big).units == 64 * 8 * 1024 * 2 and work.pipeline_work(big).heavy
    assert work.pipeline_work(PipelineParams()).units == 4 * 8 * 2  # 1F1B p=4 m=8: a forward and a backward each
    assert not work.pipeline_work(PipelineParams()).heavy
    assert not work.frontier_work(PipelineParams(p=8, m=32)).heavy
    assert work.frontier_work(PipelineParams(p=64, m=1024)).heavy  # every schedule at 64 x 1024
    assert work.match_work(big, "zb-h1").units == 64 * 1024 * 3


def _hold(limiter: Limiter, w: work.Work, started: threading.Event, release: threading.Event, log: list, name: str):
    with limiter.slot(w):
        log.append(f"{name} in")
        started.set()
        release.wait(10)
        log.append(f"{name} out")


def test_heavy_work_waits_for_the_slot_while_light_work_runs_at_once():
    limiter, log = Limiter(1, idle_release_s=60), []
    first_in, first_go, second_in, second_go = (threading.Event() for _ in range(4))
    a = threading.Thread(target=_hold, args=(limiter, HEAVY, first_in, first_go, log, "a"))
    a.start()
    assert first_in.wait(5)
    b = threading.Thread(target=_hold, args=(limiter, HEAVY, second_in, second_go, log, "b"))
    b.start()
    time.sleep(0.3)
    assert not second_in.is_set() and limiter.ahead() == 2  # one running, one waiting
    t0 = time.perf_counter()
    with limiter.slot(LIGHT):  # another student's page: not queued behind the heavy ones
        log.append("light")
    assert time.perf_counter() - t0 < 0.1
    first_go.set()
    assert second_in.wait(5)
    second_go.set()
    a.join(5), b.join(5)
    assert log == ["a in", "light", "a out", "b in", "b out"]
    assert limiter.heavy_done == 2 and limiter.ahead() == 0


def test_a_thread_holding_a_slot_does_not_wait_for_another():
    limiter = Limiter(1, idle_release_s=60)
    with limiter.slot(HEAVY), limiter.slot(HEAVY):  # a heavy call inside a heavy call: no self-deadlock
        assert limiter.ahead() == 1
    assert limiter.ahead() == 0 and limiter.heavy_done == 1


def test_the_progress_text_says_what_is_computed_and_the_queue():
    w = work.planner_work(COSTLY)
    assert progress_text(w, 0) == w.what + "."
    assert "2 heavy questions ahead of it" in progress_text(w, 2) and "1 at a time" in progress_text(w, 2)


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def test_freed_memory_goes_back_to_the_system():
    if not keep_freed_memory():
        return  # not glibc: nothing is kept, nothing to give back
    before = _rss_mb()
    blocks = [np.ones(8_000_000) for _ in range(8)]  # 8 x 64 MB, each below the 256 MB block the process keeps
    del blocks
    kept = _rss_mb()  # glibc keeps up to 256 MB of it at the heap's top
    assert release_freed_memory()
    assert _rss_mb() < kept - 150 and _rss_mb() < before + 100


def test_plans_queue_in_their_own_lane_and_other_light_work_in_none():
    from ui.shared import work_limit

    assert work.planner_work(PlannerParams()).lane == "plans" and work.planner_work(COSTLY).lane == "heavy"
    assert work.pipeline_work(PipelineParams()).lane == "" and work.planner_work(PlannerParams()).release
    assert set(work_limit.LANES) == {"heavy", "plans"} and work_limit.LANES["heavy"] is work_limit.LIMITER
    plans = work_limit.LANES["plans"]
    with work_limit.slot(work.planner_work(PlannerParams())):
        assert plans.ahead() == 1 and work_limit.LIMITER.ahead() == 0
        with work_limit.slot(work.pipeline_work(PipelineParams())):  # light: no lane, no wait
            assert plans.ahead() == 1
    assert plans.ahead() == 0
    assert "question of this kind" in progress_text(work.planner_work(PlannerParams()), 1, 1)
