"""The Pipeline page's upload through a real server (as the Dockerfile runs it) and Chromium: the issue's crafted
0.97 MB table is refused with its message in seconds while the server's peak memory stays far from the 6 GB it
took; the app's largest export (8.08 MB, over the old 1 MB maxUploadSize) is accepted and timed.

The server's peak is its own VmHWM (/proc/PID/status): the high-water mark of its resident memory since it started.
"""

import re
import time
from pathlib import Path

import pytest

from core.params.pipeline import PIPELINE
from core.pipeline.result import PipelineParams, simulate
from core.pipeline.trace_export import pytorch_actions_csv
from tests.conftest import free_port, serve, server_command
from tests.test_trace_limits import ISSUE_TABLE

pytestmark = [pytest.mark.browser, pytest.mark.server]

UPLOAD = "Inspect a PyTorch action table"


def _server_pid(port: int) -> int:
    """The pid of the server started with --server.port=PORT (matched by that exact argument)."""
    flag = f"--server.port={port}".encode()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and flag in (proc / "cmdline").read_bytes().split(b"\0"):
                return int(proc.name)
        except OSError:
            continue
    raise AssertionError(f"no process listens with {flag!r}")


def _peak_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024


def _upload(page, path: Path) -> float:
    start = time.perf_counter()
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(path))
    return start


def test_the_page_refuses_the_crafted_table_cheaply_and_times_the_largest_export(browser, tmp_path):
    port = free_port()
    with serve(server_command(port), "streamlit-upload.log") as base:
        pid = _server_pid(port)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(60_000)
        try:
            page = context.new_page()
            page.goto(base + "/pipeline")
            page.get_by_text(UPLOAD).click()
            before = _peak_mb(pid)

            crafted = tmp_path / "crafted.csv"
            crafted.write_text(ISSUE_TABLE)
            start = _upload(page, crafted)
            page.get_by_text(re.compile("column 4097: stage 4,096 is beyond the simulator's stages")).wait_for()
            seconds, after = time.perf_counter() - start, _peak_mb(pid)
            assert seconds < 10 and after < 600, (seconds, before, after)

            largest = PipelineParams(schedule="interleaved", p=int(PIPELINE["p"].hi), m=int(PIPELINE["m"].hi),
                                     v=8)  # p x m x v x 2 = the 1,048,576-operation limit
            result = simulate(largest)
            table = tmp_path / "interleaved.csv"
            table.write_text(pytorch_actions_csv(result.schedule))
            assert table.stat().st_size > 8_000_000
            page.get_by_role("button", name=re.compile("Remove|Delete", re.I)).first.click()
            _upload(page, table)
            page.get_by_text(re.compile(r"interleaved\.csv: p = 64 ranks, m = 1024 micro-batches")).wait_for()
            box = page.locator('[data-testid="stMetric"]', has_text="Makespan")
            assert box.locator('[data-testid="stMetricValue"]').last.inner_text() == \
                f"{result.timeline.makespan:,.4g}"  # the upload's metrics come after the page's own
            print(f"crafted refused in {seconds:.2f} s; server peak {before:.0f} -> {after:.0f} MB; after the "
                  f"8.08 MB export {_peak_mb(pid):.0f} MB")
        finally:
            context.close()
