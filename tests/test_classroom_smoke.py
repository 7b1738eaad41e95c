"""A smoke run of the classroom benchmark (bench/classroom.py): three students open distinct links of three pages at
once, in browser pages, against the Dockerfile's server; every one sees its first number, and the server's memory
is read. The full 40-session run is a benchmark (figures in the README), not a test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import classroom
from tests.conftest import CHROMIUM, ROOT, _no_browser

pytestmark = [pytest.mark.browser, pytest.mark.server]


def test_three_students_open_three_distinct_links_at_once():
    if not Path(CHROMIUM).exists():
        _no_browser("not found")
    # its own process: the benchmark runs its own event loop, and the browser tests' playwright has one in this one
    done = subprocess.run([sys.executable, "bench/classroom.py", "--sessions", "3", "--settle", "0.5", "--cold",
                           "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["sessions"] == 3 and out["errors"] == 0, out["error_samples"]
    assert sorted(out["by_page"]) == ["pipeline", "planner", "zero"]
    assert all(v["max_s"] is not None and v["max_s"] < classroom.TIMEOUT_S for v in out["by_page"].values())
    assert 0 < out["rss_start_mb"] <= out["rss_peak_mb"] and out["server_cpu_s"] > 0
    assert out["processes_peak"] >= 3  # the server, the fork server and its worker processes (ui/shared/workers.py)


def test_the_links_are_distinct_and_cover_the_four_pages():
    links = classroom.links(40)
    assert len({x.path for x in links}) == 40
    assert {x.page for x in links} == {"pipeline", "zero", "planner", "lecture"}
    assert len({x.path for x in classroom.planner_links(24)}) == 24
