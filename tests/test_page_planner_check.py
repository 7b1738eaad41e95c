"""The Planner page's "Check a run you have": a pasted config shows core's row (the numbers `python -m core check`
prints), every field of the file, and a link that opens the same row as the page's own inputs; a hostile paste
gets one message, quickly."""

import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from streamlit.testing.v1 import AppTest

from core.configs.check import check

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
TITAN = (ROOT / "tests/data/configs/torchtitan_llama3_405b.toml").read_text(encoding="utf-8")


def planner(query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/planner.py")
    if query:
        at.query_params.update(query)
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at


def paste(at: AppTest, text: str, given: str = "") -> AppTest:
    next(t for t in at.text_area if t.key == "check_text").input(text)
    next(t for t in at.text_input if t.label.startswith("What the file cannot say")).input(given)
    at.run()
    assert not at.exception
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_a_pasted_torchtitan_config_shows_cores_row_and_every_field():
    at = paste(planner(), TITAN, "gpu=h100-80gb")
    row = check([("pasted", TITAN)], {"gpu": "h100-80gb"}).row
    shown = metrics(at)  # the check's metrics come after the page's headline ones, under the same labels
    assert shown["Memory per GPU"] == f"{row['memory_bytes'] / 1e9:,.1f} GB"
    assert shown["Step time"] == f"{row['step_time_s']:,.2f} s" and shown["Fits"] == ("yes" if row["fits"] else "no")
    words = next(m.value for m in at.markdown if "Checked pasted (torchtitan)" in m.value)
    assert "Llama 3 405B on 128 x NVIDIA H100 80GB SXM" in words and "t=8 p=1 d=16" in words
    account = next(d.value for d in at.dataframe if list(d.value.columns[:2]) == ["kind", "field"])
    assert {"read", "no effect", "assumed"} <= set(account["kind"])
    assert "parallelism.tensor_parallel_degree" in set(account["field"])


def test_the_open_link_shows_the_same_row_as_the_planners_own():
    at = paste(planner(), TITAN, "gpu=h100-80gb")
    link = next(m.value for m in at.markdown if "Open this run in the planner" in m.value)
    href = link.split('href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    query = dict(parse_qsl(urlsplit(href).query))
    assert query["fix_t"] == "8" and query["fix_d"] == "16" and query["precision"] == "fp8"
    opened = planner(query)
    row = check([("pasted", TITAN)], {"gpu": "h100-80gb"}).row
    shown = metrics(opened)
    assert shown["Layout t x p x d"] == "8 x 1 x 16"
    assert shown["Memory per GPU"] == f"{row['memory_bytes'] / 1e9:,.1f} GB"
    assert shown["Step time"] == f"{row['step_time_s']:,.2f} s"


HOSTILE = ["\x00\x01\x02 binary", "{" * 100_000, "[parallelism]\ntensor_parallel_degree = 'x'\n"]


@pytest.mark.parametrize("text", HOSTILE)
def test_a_hostile_paste_gets_one_message_quickly(text):
    at = planner()
    start = time.perf_counter()
    next(t for t in at.text_area if t.key == "check_text").input(text)
    at.run()
    took = time.perf_counter() - start
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("This config cannot be checked: ")
    assert took < 5.0, took


def test_what_the_file_cannot_say_is_checked_too():
    at = paste(planner(), TITAN, "gpu=h100-80gb, t")
    assert [e.value for e in at.error] == ["This config cannot be checked: 't' is not KEY=VALUE with KEY a planner "
                                           "input (gpu, gpus, batch, seq, model, t, p, d, ...)"]
