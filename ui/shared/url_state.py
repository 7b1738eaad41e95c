"""Read the URL before any widget exists; repair it so that bound widgets only ever see clean values.

Widgets are created with ``key=spec.key, bind="query-params"`` (see ui.shared.widgets), so the URL *is* the
page state. Streamlit 1.67 does the binding; this module adds what it lacks: our stricter validation and
a visible notice. What we learned from the 1.67 source (runtime/state/session_state.py,
query_params.py) and from experiments (AppTest and Chromium):

- Seeding: a bound widget takes its value from the URL only on its first registration (page load,
  or arrival on a page). Afterwards the widget owns the value and the browser rewrites the URL on
  every change. Seeding reads a snapshot of the query string taken when the run started, so deleting
  a key from ``st.query_params`` does not stop the seeding in the same run; only a rerun does.
- Defaults: a value equal to the widget's default is removed from the URL (``?p=4`` -> ``?``).
- Invalid values are dropped silently, and only by Streamlit's own rules, which differ from ours:
  ``p=8.5`` on an int slider becomes 8; ``recompute=yes`` and ``schedule=ZB-H1`` are refused; a
  10,000-character string is accepted by a text input; repeated ``p=2&p=16`` on a single slider is
  refused; ``m=1e999`` on an int ``number_input`` raises OverflowError inside Streamlit (an app
  crash). Out-of-range and nan/inf numbers are refused.
- Page switches (st.navigation): params bound to the page you leave are dropped from the URL; params
  bound in the main script (app.py's sidebar, e.g. ``present``) survive; unbound params are dropped by
  the sidebar navigation. Coming back to a page through the sidebar restores its last values.
  ``st.page_link(..., query_params=...)`` to another page drops any key that is bound on the page you
  come from (Streamlit filters params "bound to other pages"): see ui.shared.links.link_to_page.
- AppTest: ``at.query_params`` seeds the first run and shows the backend's query string after a run
  (our repairs and Streamlit's removals), but not widget -> URL updates, which the browser makes.

So, for each key a page uses, before its widget exists (key not yet in st.session_state):
parse the raw value(s) with our Spec (`parse_lenient`); if the raw text is not exactly the canonical
text of the parsed value, rewrite the URL (delete a bad value, or write the canonical one), keep the
notices in session state and ``st.rerun()`` once. The rerun starts from the repaired URL, so the
widget seeds from a value we have checked, and the notices are shown as plain text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import streamlit as st
from streamlit.errors import StreamlitAPIException

from core.params import Spec, parse_lenient

_STASH = "_ui_url_notices"  # {key: notice} kept across the repair rerun
_LAST_FIX = "_ui_url_last_fix"  # {keys: raw values we last tried to repair}: never loop on them


def format_number(x: float) -> str:
    """Shortest text that reads back to x: 4.0 -> "4", 2.5 -> "2.5" (what Streamlit writes too)."""
    if isinstance(x, float) and math.isfinite(x) and x.is_integer():
        return str(int(x))
    return repr(x) if isinstance(x, float) else str(x)


def format_value(spec: Spec, value: Any) -> str:
    """The canonical URL text of an already-valid value."""
    if spec.kind == "bool":
        return "true" if value else "false"
    if spec.kind == "int":
        return str(int(value))
    if spec.kind == "float":
        return format_number(float(value))
    if spec.kind == "floats":
        return ",".join(format_number(float(v)) for v in value)
    if spec.kind == "choices":
        return ",".join(value)
    return str(value)


def _raw(key: str) -> str | list[str]:
    values = st.query_params.get_all(key)
    return values[0] if len(values) == 1 else values


def check_url(specs: Mapping[str, Spec], keys: Iterable[str]) -> tuple[dict[str, str | None], dict[str, str]]:
    """Check the current URL for `keys` without changing anything: (fixes, notices).

    fixes maps key -> canonical text to write, or None to delete the key. Keys whose widget already
    exists are skipped: their URL text was written by the widget, and the widget owns the value.
    """
    fixes: dict[str, str | None] = {}
    notices: dict[str, str] = {}
    for key in keys:
        spec = specs[key]
        if key not in st.query_params or key in st.session_state:
            continue
        raw = _raw(key)
        values, messages = parse_lenient({key: spec}, {key: raw})
        if messages:
            fixes[key] = None
            notices[key] = messages[0]
            continue
        text = format_value(spec, values[key])
        if raw != text:
            fixes[key] = None if values[key] == spec.default else text
    return fixes, notices


def sync_url(specs: Mapping[str, Spec], keys: Iterable[str] | None = None) -> list[str]:
    """Validate and repair the URL for `keys` (default: all of `specs`); return notices to show.

    Call it before creating the widgets of those keys. It may call st.rerun() once (only when the URL
    holds a bad or non-canonical value); the notices survive the rerun and are returned by the call
    in the next run. Notices contain URL text: show them with show_notices (plain text), never as
    markdown.
    """
    keys = list(specs if keys is None else keys)
    fixes, notices = check_url(specs, keys)
    attempts: dict[str, str] = st.session_state.setdefault(_LAST_FIX, {})
    group = ",".join(keys)
    if fixes:
        signature = repr(sorted((k, _raw(k)) for k in fixes))
        if attempts.get(group) != signature:
            attempts[group] = signature
            st.session_state.setdefault(_STASH, {}).update(notices)
            for key, text in fixes.items():
                try:
                    if text is None:
                        del st.query_params[key]
                    else:
                        st.query_params[key] = text
                except (StreamlitAPIException, KeyError):  # already bound to a widget: it owns the value
                    pass
            st.rerun()
        # The same bad values came back after a repair: give up quietly rather than loop.
    attempts.pop(group, None)
    stash: dict[str, str] = st.session_state.get(_STASH, {})
    shown = {k: stash.pop(k) for k in keys if k in stash}
    return [shown.get(k) or notices[k] for k in keys if k in shown or k in notices]
