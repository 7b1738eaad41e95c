"""The container's command really serves the app (no Docker engine here: the CMD is run directly).

Also checks the Dockerfile's shape and that every option in .streamlit/config.toml exists in the
installed Streamlit (a misspelt option is silently ignored by Streamlit).
"""

import re
import tomllib

import pytest

from tests.conftest import ROOT, dockerfile_cmd, http_get, server_command

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def test_dockerfile_cmd_is_the_documented_command():
    assert dockerfile_cmd() == [
        "streamlit", "run", "app.py", "--server.address=0.0.0.0", "--server.port=8501", "--server.headless=true",
    ]
    assert server_command(1234)[-1] == "--server.port=1234"


def test_dockerfile_shape():
    lines = [line.strip() for line in DOCKERFILE.splitlines()]
    assert next(x for x in lines if x.startswith("FROM")) == "FROM python:3.11-slim"
    steps = ("COPY requirements.txt", "RUN pip install -r requirements.txt", "COPY . .", "USER ", "CMD ")
    order = [next(i for i, x in enumerate(lines) if x.startswith(step)) for step in steps]
    assert order == sorted(order), "install dependencies, then copy the app, then drop privileges, then CMD"
    assert re.search(r"^USER (\S+)", DOCKERFILE, re.M).group(1) not in ("root", "0")
    assert "EXPOSE 8501" in lines
    health = DOCKERFILE.split("\nHEALTHCHECK", 1)[1].split("\n\n", 1)[0]
    assert "/_stcore/health" in health and "urllib" in health and "curl" not in health


def test_dockerignore_keeps_tests_and_history_out():
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert {"tests", ".git", "test-artifacts", ".pytest_cache", ".ruff_cache"} <= ignored
    assert not {".streamlit", "assets", "core", "ui", "pages", "app.py", "requirements.txt"} & ignored


def _flatten(table: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in table.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_production_config_uses_real_options():
    from streamlit import config as st_config

    options = _flatten(tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text()))
    unknown = sorted(set(options) - set(st_config._config_options_template))
    assert not unknown, f"not options of the installed Streamlit: {unknown}"
    assert options["browser.gatherUsageStats"] is False
    assert options["server.fileWatcherType"] == "none"
    assert options["server.enableXsrfProtection"] is True
    assert options["server.headless"] is True
    assert options["client.toolbarMode"] == "viewer"
    assert options["client.showErrorDetails"] == "none"
    assert {"theme.light.textColor", "theme.dark.textColor", "theme.baseFontSize"} <= set(options)


@pytest.mark.server
def test_server_starts_and_serves_the_app(streamlit_server):
    status, _, body = http_get(streamlit_server + "/_stcore/health")
    assert (status, body.strip()) == (200, "ok")
    status, ctype, html = http_get(streamlit_server + "/")
    assert status == 200 and ctype.startswith("text/html")
    assert '<div id="root">' in html and "<script" in html  # the app shell; pages render over a websocket
    # st.navigation serves every page path with the same shell.
    assert http_get(streamlit_server + "/pipeline")[0] == 200
