"""Shared test fixtures: the Streamlit server (as the Dockerfile runs it) and a headless Chromium.

- `streamlit_server` (session): starts the Dockerfile's CMD on a free port, waits for
  /_stcore/health, yields the base URL ("http://127.0.0.1:PORT"), stops the server afterwards.
- `browser` (session): Playwright driving Debian's /usr/bin/chromium (`playwright install` cannot
  download browsers here). Without Chromium the browser tests skip, unless REQUIRE_BROWSER=1 (CI),
  then they fail.
- `page` (function): a fresh browser context and page (no cookies or state shared between tests).

Also: AppTest reads .streamlit/config.toml, whose production setting client.showErrorDetails="none"
would redact exception messages in `at.exception`; tests see them in full.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update"]
SERVER_START_TIMEOUT = 60.0  # seconds; a cold start takes ~3 s on the 2-core dev machine


def pytest_configure(config: pytest.Config) -> None:
    # AppTest runs the pages in this process: their cached work runs here too, not in a pool of worker processes
    # per test run (tests/test_workers.py tests the pool; the servers `serve` starts use it as deployed).
    os.environ.setdefault("DASHBOARD_WORKERS", "0")
    from streamlit import config as st_config

    st_config.get_config_options()  # parse .streamlit/config.toml now, so our override wins
    st_config.set_option("client.showErrorDetails", "full", "tests/conftest.py")
    import core.pipeline.schedules  # noqa: F401  registers the schedules, whose names core.params reads (as the CLI
    from ui.shared import layout  # and the pages do: a test of core.params alone sees them too)

    layout.FIRST_PAINT_S = layout.RERUN_PAINT_S = 0.0  # AppTest runs need no pause for a browser's paint
    import ui.pipeline.inputs

    ui.pipeline.inputs.PLAY_TICK_S = 0.0  # Play's steps follow each other at once (no one watches them)
    for name in REQUIRED:  # a typo in CI's switches stops the run here, not silently skips
        required(name)


def shared_link(at) -> str:
    """The link to share that a page shows (ui.shared.links.copy_link_box), from an AppTest run."""
    for md in at.markdown:
        found = re.match(r"Link to this view: \[`([^`]*)`\]", md.value)
        if found:
            return found.group(1)
    raise AssertionError("no link to share on the page")


# --- the server, as the Dockerfile runs it -----------------------------------------------------

def dockerfile_cmd(dockerfile: Path = ROOT / "Dockerfile") -> list[str]:
    """The Dockerfile's last CMD, exec form (a JSON list) or shell form, continuation lines joined."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    cmds = [line.strip()[4:].strip() for line in text.splitlines() if line.strip().upper().startswith("CMD ")]
    if not cmds:
        raise AssertionError("the Dockerfile has no CMD")
    cmd = cmds[-1]
    return json.loads(cmd) if cmd.startswith("[") else shlex.split(cmd)


def server_command(port: int) -> list[str]:
    """The Dockerfile's CMD, run with this interpreter, on `port`.

    `streamlit` becomes `python -m streamlit` (same program, but surely this interpreter's install).
    The port is changed by appending `--server.port=PORT`: the CMD already passes --server.port, and
    in Streamlit a command-line flag beats the STREAMLIT_SERVER_PORT variable, while a repeated flag
    takes its last value. Everything else is exactly the CMD.
    """
    cmd = dockerfile_cmd()
    if cmd[:2] != ["streamlit", "run"]:
        raise AssertionError(f"unexpected CMD {cmd}")
    return [sys.executable, "-m", "streamlit", *cmd[1:], f"--server.port={port}"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str, str]:
    """(status, content type, body) of a GET."""
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode("utf-8", "replace")


def _wait_healthy(proc: subprocess.Popen, base: str, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"streamlit exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if http_get(base + "/_stcore/health", timeout=2)[2].strip() == "ok":
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"no health answer within {SERVER_START_TIMEOUT:.0f} s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    """Stop the server's own process group (it was started in a new session)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@contextlib.contextmanager
def serve(command: list[str], log_name: str, workers: str = "auto") -> Iterator[str]:
    """Run a streamlit server command (its last argument sets the port) with `workers` worker processes
    (DASHBOARD_WORKERS: auto as deployed); yield its base URL; stop it."""
    port = int(command[-1].rsplit("=", 1)[1])
    ARTIFACTS.mkdir(exist_ok=True)
    log = ARTIFACTS / log_name
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, "DASHBOARD_WORKERS": workers})
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(proc, base, log)
        yield base
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def streamlit_server() -> Iterator[str]:
    """The app as the Dockerfile runs it."""
    with serve(server_command(free_port()), "streamlit-server.log") as base:
        yield base


REQUIRED = ("REQUIRE_BROWSER", "REQUIRE_NGINX", "REQUIRE_ENGINES")


def required(name: str) -> bool:
    """Whether the environment variable `name` (REQUIRED) turns a skip into a failure: true or 1 yes, false, 0 or
    unset no; anything else is a typo, refused when the session starts (pytest_configure)."""
    value = os.environ.get(name, "").strip().lower()
    if value not in ("", "0", "1", "true", "false"):
        raise pytest.UsageError(f"{name}={value[:20]!r}: use true or false (or 1 / 0)")
    return value in ("1", "true")


# --- the browser -------------------------------------------------------------------------------

def _no_browser(reason: str) -> None:
    message = f"browser tests need Chromium at {CHROMIUM} and the playwright package: {reason}"
    if required("REQUIRE_BROWSER"):
        pytest.fail(message + " (REQUIRE_BROWSER=1)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        _no_browser("not found")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _no_browser(str(exc))
    with sync_playwright() as pw:
        try:
            chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        except Exception as exc:  # a broken install: same rule as a missing one
            _no_browser(f"launch failed: {exc}")
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(20_000)
    try:
        yield context.new_page()
    finally:
        context.close()
