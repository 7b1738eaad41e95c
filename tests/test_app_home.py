"""The app frame and the URL-bound widget helpers, through Streamlit's AppTest (no browser).

AppTest seeds `at.query_params` into the first run and reports the backend's query string after a
run (our repairs, Streamlit's removals). It does not see widget -> URL updates: the browser makes
those (tests/test_browser_home.py covers that round trip).
"""

import importlib
import json

import pytest
from streamlit.testing.v1 import AppTest

from core.errors import InputError
from core.params import all_tables
from core.params.pipeline import PIPELINE
from tests.conftest import ROOT, shared_link
from ui.shared.cache import cached, clear_all
from ui.shared.links import PAGES, available_pages, encode_params, page_link_with_params
from ui.shared.url_state import format_value

APP = str(ROOT / "app.py")
INPUTS_PAGE = str(ROOT / "tests" / "apps" / "spec_inputs.py")
TIMEOUT = 30


def run(script, query=None, context=None):
    at = AppTest.from_file(script, default_timeout=TIMEOUT)
    at.query_params.update(query or {})
    at.context.update(context or {})
    return at.run()


def values_of(at):
    line = next(t.value for t in at.text if t.value.startswith("VALUES "))
    return json.loads(line.removeprefix("VALUES "))


def notices_of(at):
    return [t.value for t in at.text if not t.value.startswith("VALUES ")]


def all_markdown(at):
    """Every piece of text Streamlit would parse as markdown (or HTML)."""
    kinds = ("markdown", "caption", "warning", "info", "error", "success", "title", "header", "subheader")
    return [el.value for kind in kinds for el in at.get(kind)]


# --- the app frame ------------------------------------------------------------------------------

def test_home_runs_without_exception():
    at = run(APP)
    assert not at.exception
    assert at.title[0].value == "Pipeline planner"
    assert at.toggle(key="present").value is False
    assert not at.get("html")  # no presentation CSS by default
    assert "python -m core --help" in [c.value for c in at.code]
    text = "\n".join(all_markdown(at))
    for entry in PAGES:
        if entry.url_path:
            assert entry.description in text


def test_present_in_the_url_seeds_the_toggle_and_injects_css():
    at = run(APP, {"present": "true"})
    assert not at.exception
    assert at.toggle(key="present").value is True
    assert "<style>" in at.get("html")[0].proto.body
    assert at.query_params == {"present": "true"}


def test_bad_present_falls_back_with_a_notice():
    at = run(APP, {"present": "maybe<i>"})
    assert not at.exception
    assert at.toggle(key="present").value is False
    assert at.warning and "could not be used" in at.warning[0].value
    assert any("'maybe<i>'" in t.value for t in at.text)
    assert "present" not in at.query_params
    assert not any("maybe" in m for m in all_markdown(at))


def test_registered_pages_are_the_existing_files():
    assert [p.file for p in available_pages()] == [p.file for p in PAGES if (ROOT / p.file).exists()]
    assert available_pages()[0].file == "pages/home.py"


# --- the widget helper on every Pipeline input --------------------------------------------------

def test_defaults_when_the_url_is_empty():
    at = run(INPUTS_PAGE)
    assert not at.exception
    assert values_of(at) == {k: list(s.default) if s.kind == "floats" else s.default for k, s in PIPELINE.items()}
    assert notices_of(at) == [] and not at.warning
    assert at.query_params == {}
    assert shared_link(at) == "/pipeline"


def test_url_values_seed_the_widgets():
    query = {"schedule": "zb-h1", "p": "8", "m": "32", "tf": "1.5", "recompute": "true", "stage_costs": "1,1.5,2"}
    at = run(INPUTS_PAGE, query)
    assert not at.exception and not at.warning
    got = values_of(at)
    assert (got["schedule"], got["p"], got["m"], got["tf"], got["recompute"]) == ("zb-h1", 8, 32, 1.5, True)
    assert got["stage_costs"] == [1.0, 1.5, 2.0]
    assert at.slider(key="p").value == 8 and at.number_input(key="m").value == 32
    assert at.selectbox(key="schedule").value == "zb-h1" and at.toggle(key="recompute").value is True
    assert at.query_params == query  # canonical already: left as it is


def test_non_canonical_values_are_accepted_and_rewritten():
    at = run(INPUTS_PAGE, {"schedule": "ZB-H1", "recompute": "yes", "p": "08", "m": ["4", "16"], "tb": "2.50",
                           "tf": "1"})
    assert not at.exception and not at.warning
    got = values_of(at)
    assert (got["schedule"], got["recompute"], got["p"], got["m"], got["tb"]) == ("zb-h1", True, 8, 16, 2.5)
    assert at.query_params == {"schedule": "zb-h1", "recompute": "true", "p": "8", "m": "16", "tb": "2.5"}


def test_invalid_url_values_fall_back_with_plain_text_notices():
    hostile = {
        "p": "999",  # out of our range (Streamlit would also refuse it)
        "m": "1e999",  # crashes Streamlit's own int number_input parser if it ever reaches the widget
        "schedule": "<script>alert(1)</script>",
        "tf": "nan",
        "v": "2.5",  # Streamlit's int slider would silently truncate this to 2
        "first_stage": "inf",
        "stage_costs": "[x](javascript:alert(1))" + "9" * 10_000,  # 10k characters of text input
        "iterations": "",
        "zzz": "kept",  # not ours: left alone
    }
    at = run(INPUTS_PAGE, hostile)
    assert not at.exception
    defaults = {k: list(s.default) if s.kind == "floats" else s.default for k, s in PIPELINE.items()}
    assert values_of(at) == defaults
    notices = notices_of(at)
    bad = [k for k in hostile if k != "zzz"]
    assert len(notices) == len(bad)
    for key, notice in zip([k for k in PIPELINE if k in bad], notices, strict=True):
        assert notice.startswith(f"{key}: ") and "default" in notice
    assert at.warning[0].value.startswith("Some values in this link could not be used")
    assert at.query_params == {"zzz": "kept"}
    # URL text only ever reaches st.text: nothing from it is parsed as markdown or HTML.
    assert not any("script" in m or "javascript" in m or "nan" in m for m in all_markdown(at))
    assert any("<script>alert(1)</script>" in n for n in notices)


def test_notices_go_away_after_the_next_interaction():
    at = run(INPUTS_PAGE, {"p": "999"})
    assert len(notices_of(at)) == 1
    at.slider(key="p").set_value(16).run()
    assert values_of(at)["p"] == 16 and notices_of(at) == []


def test_typed_text_is_checked_like_the_url():
    at = run(INPUTS_PAGE)
    at.text_input(key="stage_costs").input("1, 2, oops").run()
    assert values_of(at)["stage_costs"] == []
    assert any("stage_costs" in n for n in notices_of(at))
    at.text_input(key="stage_costs").input("1, 2.5").run()
    assert values_of(at)["stage_costs"] == [1.0, 2.5] and notices_of(at) == []


def test_share_link_uses_the_browser_address_and_non_default_values():
    at = run(INPUTS_PAGE, {"p": "8", "schedule": "gpipe"}, {"url": "https://planner.example/pipeline"})
    assert shared_link(at) == "https://planner.example/pipeline?schedule=gpipe&p=8"


def _spec_tables():
    """Every spec table in core.params.* ("module:NAME"), so each table that lands is covered."""
    return [f"core.params.{name.replace('.', ':')}" for name in all_tables()]


def _garbage(spec):
    return {"bool": "maybe", "choice": "<b>x</b>", "floats": "1,x"}.get(spec.kind, "1e999")


@pytest.mark.parametrize("table", _spec_tables())
def test_every_spec_table_gets_widgets_that_check_the_url(table):
    module, name = table.split(":")
    specs = getattr(importlib.import_module(module), name)
    at = run(INPUTS_PAGE, {"table": table})
    assert not at.exception, at.exception
    assert notices_of(at) == []
    largest = {k: format_value(s, s.parse(s.hi)) for k, s in specs.items() if s.kind in ("int", "float")}
    at = run(INPUTS_PAGE, {"table": table, **largest})
    assert not at.exception and notices_of(at) == []
    assert {k: v for k, v in at.query_params.items() if k != "table"} == {
        k: v for k, v in largest.items() if specs[k].parse(v) != specs[k].default
    }
    at = run(INPUTS_PAGE, {"table": table, **{k: _garbage(s) for k, s in specs.items()}})
    assert not at.exception
    assert len(notices_of(at)) == len(specs)
    assert at.query_params == {"table": table}


# --- links --------------------------------------------------------------------------------------

def test_page_links_carry_checked_canonical_parameters():
    assert page_link_with_params("pipeline", {"schedule": "zb-h1", "p": 8}, PIPELINE) == "/pipeline?schedule=zb-h1&p=8"
    # defaults are left out, values are canonical, unknown pages and bad values are refused
    assert page_link_with_params("pages/pipeline.py", {"schedule": "1f1b", "p": "08", "tf": 2.0}, PIPELINE) == (
        "/pipeline?p=8&tf=2"
    )
    assert page_link_with_params("pipeline", {"schedule": "1f1b", "p": 8}) == "/pipeline?schedule=1f1b&p=8"
    assert page_link_with_params("Home") == "/"
    assert encode_params({"stage_costs": (1.0, 1.5)}, PIPELINE) == {"stage_costs": "1,1.5"}
    with pytest.raises(InputError):
        page_link_with_params("pipeline", {"p": 999}, PIPELINE)
    with pytest.raises(KeyError):
        page_link_with_params("nowhere")


def _samples(spec):
    if spec.kind in ("int", "float"):
        return [spec.default, spec.parse(spec.lo), spec.parse(spec.hi)] + ([] if spec.kind == "int" else [0.1 + 0.2])
    if spec.kind == "floats":
        return [spec.default, (1.0, 0.25, 5.0)]
    return [spec.default, *spec.choices] if spec.kind == "choice" else [False, True]


@pytest.mark.parametrize("key", list(PIPELINE))
def test_canonical_text_reads_back_to_the_same_value(key):
    spec = PIPELINE[key]
    for value in _samples(spec):
        if spec.kind == "float" and not spec.lo <= value <= spec.hi:
            continue
        assert spec.parse(format_value(spec, value)) == value


# --- the caching convention ---------------------------------------------------------------------

def test_cached_wrappers_call_core_once_per_parameter_set():
    calls = []

    @cached(max_entries=2)
    def doubled(params: tuple[int, int]) -> int:
        calls.append(params)
        return 2 * sum(params)

    clear_all()
    assert [doubled((1, 2)), doubled((1, 2)), doubled((3, 4))] == [6, 6, 14]
    assert calls == [(1, 2), (3, 4)]
    doubled((5, 6))  # a third entry evicts the oldest (max_entries=2)
    doubled((1, 2))
    assert calls[-1] == (1, 2) and len(calls) == 4
    with pytest.raises(ValueError):
        cached(max_entries=0)
