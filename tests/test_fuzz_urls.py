"""Hand-edited URLs against every page: hostile values for every URL-bound key.

For each page, the keys are discovered from the widgets its default run creates (so a widget added
later is covered without editing this file). Then:
- every hostile value class at once on all keys: no exception, a notice, every widget at its default;
- one hostile value per key: no exception, a notice naming the key, that widget at its default;
- nothing from the URL reaches markdown or HTML (notices are plain text).
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT
from ui.shared.links import available_pages
from ui.shared.widgets import LINK_NOTICE_TITLE

TIMEOUT = 60
WIDGETS = ("slider", "select_slider", "number_input", "selectbox", "radio", "checkbox", "toggle", "text_input",
           "multiselect", "segmented_control", "expander", "tabs")
SCRIPT = "<script>alert(1)</script>"
HOSTILE = {
    "empty": "",
    "negative": "-1",
    "nan": "nan",
    "inf": "inf",
    "overflow": "1e999",
    "huge": "9" * 400,
    "unicode": "🙂é漢" * 20,
    "long": "x" * 5000,
    "script": SCRIPT,
    "repeated": ["1", SCRIPT],
}
PAGES = [p for p in available_pages() if p.url_path]


def run(page_file: str, query: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / page_file), default_timeout=TIMEOUT)
    at.query_params.update(query or {})
    return at.run()


def keyed_widgets(at: AppTest) -> dict[str, object]:
    """key -> value of every keyed input widget on the page (tabs/expanders: their open state)."""
    found = {}
    for kind in WIDGETS:
        for el in at.get(kind):
            key = getattr(el, "key", None)
            if key and not key.startswith("$$"):
                found[key] = _value(el)
    return found


def _value(el):
    try:
        value = el.value
    except Exception:  # noqa: BLE001  (containers without a value)
        return None
    return tuple(value) if isinstance(value, list) else value


def notices(at: AppTest) -> list[str]:
    """The plain-text notices under the page's 'could not be used' warning."""
    if not any(LINK_NOTICE_TITLE in w.value for w in at.warning):
        return []
    return [t.value for t in at.text]


def rendered_markup(at: AppTest) -> list[str]:
    kinds = ("markdown", "caption", "warning", "info", "error", "success", "title", "header", "subheader")
    return [el.value for kind in kinds for el in at.get(kind)]


@pytest.fixture(scope="module", params=[p.file for p in PAGES], ids=[p.url_path for p in PAGES])
def page(request):
    """The page file, its keyed widgets' defaults, and the switch (if any) that shows each widget."""
    at = run(request.param)
    assert not at.exception, at.exception
    widgets = keyed_widgets(at)
    shown_by = dict.fromkeys(widgets, {})
    switches = [el.key for kind in ("toggle", "checkbox") for el in at.get(kind) if el.key]
    for key in switches:  # widgets shown only when a switch is on (e.g. the ZeRO page's activations)
        more = run(request.param, {key: "true"})
        assert not more.exception, more.exception
        for name, value in keyed_widgets(more).items():
            if name not in widgets:
                widgets[name], shown_by[name] = value, {key: "true"}
    assert len(widgets) >= 3, f"{request.param}: expected URL-bound widgets, found {sorted(widgets)}"
    return request.param, widgets, shown_by


@pytest.mark.parametrize("name", list(HOSTILE))
def test_every_key_at_once(page, name):
    file, defaults, _ = page
    value = HOSTILE[name]
    at = run(file, {key: value for key in defaults})
    assert not at.exception, f"{file} ?*={name}: {at.exception}"
    if name != "empty":  # an empty value may be a valid "nothing" for list-like keys
        assert notices(at), f"{file}: no notice for ?*={name}"
    after = keyed_widgets(at)
    changed = {k: (defaults[k], after.get(k)) for k in defaults if k in after and after[k] != defaults[k]}
    assert not changed, f"{file}: hostile {name} values were used instead of defaults: {changed}"
    assert not any(SCRIPT in text or "<script" in text.lower() for text in rendered_markup(at))


def test_each_key_alone(page):
    file, defaults, shown_by = page
    for key in defaults:
        at = run(file, {**shown_by[key], key: SCRIPT})
        assert not at.exception, f"{file} ?{key}=<script>: {at.exception}"
        found = notices(at)
        assert any(key in n for n in found), f"{file}: no notice naming {key!r}: {found}"
        assert keyed_widgets(at).get(key) == defaults[key], f"{file}: {key} did not fall back to its default"
        assert not any("<script" in text.lower() for text in rendered_markup(at))
