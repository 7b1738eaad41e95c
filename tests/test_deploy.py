"""deploy/nginx.conf, the lecture hall's reverse proxy (docs/serving.md): nginx accepts it (`nginx -t`), its upload
limit passes what the dashboard accepts, and it keeps a visitor on one replica (two stand-in replicas answer with
their name). Skips with a message where nginx is not installed, except in CI (REQUIRE_NGINX=1, set by .ci/run).
"""

from __future__ import annotations

import http.server
import re
import shutil
import subprocess
import threading
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port, required

CONF = ROOT / "deploy" / "nginx.conf"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


@pytest.fixture
def nginx() -> str:
    if NGINX is None:
        message = "nginx is not installed (apt-get install nginx): deploy/nginx.conf is not checked"
        if required("REQUIRE_NGINX"):
            pytest.fail(message + " (REQUIRE_NGINX=1)")
        pytest.skip(message)
    return NGINX


def _prefix(tmp_path: Path) -> Path:
    (tmp_path / "temp").mkdir()
    return tmp_path


def test_nginx_accepts_the_config(nginx, tmp_path):
    done = subprocess.run([nginx, "-t", "-p", str(_prefix(tmp_path)), "-c", str(CONF)], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert "test is successful" in done.stderr


def test_the_proxy_passes_the_dashboards_largest_upload():
    limit_mb = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"].get("maxUploadSize", 200)
    found = re.search(r"client_max_body_size\s+(\d+)m;", CONF.read_text())
    assert found and int(found.group(1)) > limit_mb  # the multipart envelope comes on top of the file


def _replica(name: str) -> tuple[http.server.ThreadingHTTPServer, int]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            body = name.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def _get(url: str, cookie: str | None = None) -> tuple[str, str | None]:
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    with urllib.request.urlopen(request, timeout=5) as r:
        return r.read().decode(), r.headers.get("Set-Cookie")


def test_a_visitor_stays_on_one_replica_and_visitors_spread(nginx, tmp_path):
    (a, port_a), (b, port_b) = _replica("a"), _replica("b")
    listen = free_port()
    text = CONF.read_text().replace("127.0.0.1:8501", f"127.0.0.1:{port_a}").replace(
        "127.0.0.1:8502", f"127.0.0.1:{port_b}").replace("listen 8080;", f"listen 127.0.0.1:{listen};")
    conf = tmp_path / "nginx.conf"
    conf.write_text(text)
    proc = subprocess.Popen([nginx, "-p", str(_prefix(tmp_path)), "-c", str(conf), "-g", "daemon off;"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{listen}"
        deadline = time.monotonic() + 10
        while True:
            try:
                _get(base + "/")
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        seen = set()
        for _ in range(12):  # twelve new visitors: each gets a cookie, then every request of theirs goes one way
            first, cookie = _get(base + "/")
            assert cookie and cookie.startswith("lecture_replica=")
            key = cookie.split(";")[0]
            assert {_get(base + path, key)[0] for path in ("/", "/_stcore/stream", "/media/x", "/")} == {first}
            seen.add(first)
        assert seen == {"a", "b"}  # twelve random keys land on both replicas (a 1 in 2,048 chance they do not)
    finally:
        proc.terminate()
        proc.wait(10)
        a.shutdown(), b.shutdown()
