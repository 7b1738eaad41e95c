"""Page-scoped state: each page owns its inputs, so one page's settings never leak into another's.

Widgets are keyed by their URL key (Streamlit's bind="query-params" makes the key the query parameter), and
several pages share key names with other meanings: `p` is the Pipeline page's devices and the ZeRO page's
pipeline stages, `model` the ZeRO page's and the Planner's preset. Streamlit's session state is one dict per
session, so a value left by the page the user comes from would seed the same-named widget of the next page (the
Pipeline page's p = 5 made the ZeRO page compute with p = 5, and put it in that page's URL).

`enter_page(page, keys)` runs before any widget of a page exists. When the previous run was another page, it
files the values that page's widgets hold under that page, takes them out of the shared state, and gives this
page its own: a URL that carries any of its inputs (an explicit link, a shared URL) sets the page exactly, the
rest at their defaults; a URL without them (the sidebar's) brings back the values the page had when the user
last left it in this session, or the defaults. So sidebar navigation opens a page from its own
state or its defaults, a page's URL holds only its own inputs, and carrying a configuration from one page to
another is always an explicit link that maps the inputs the target understands (ui.shared.links.link_to_page).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import streamlit as st
from streamlit.errors import StreamlitAPIException

from core.errors import InputError
from core.params import Spec
from ui.shared.url_state import format_value

_CURRENT = "_ui_page_current"  # (page, its keys) of the last run
_SAVED = "_ui_page_saved"  # {page: {key: value}}: each page's inputs as the user left them


def _forget(keys: Iterable[str]) -> None:
    for key in keys:
        if key in st.session_state:
            del st.session_state[key]


def _to_url(spec: Spec, value) -> None:
    """Write a brought-back value into the address, as the widget would after a change (defaults stay out)."""
    try:
        if spec.max_items:  # a repeated key (?compare=a&compare=b)
            st.query_params[spec.key] = [format_value(spec, x) for x in value]
        elif value != spec.default and value is not None:
            st.query_params[spec.key] = format_value(spec, spec.parse(value))
    except (StreamlitAPIException, InputError, ValueError, TypeError):  # bound already, or not a spec value: the
        pass  # widget owns it, and shows its own value


def enter_page(page: str, specs: Mapping[str, Spec]) -> bool:
    """Give `page` its own inputs (see the module docstring); return True when the user just arrived on it."""
    keys = tuple(specs)
    last = st.session_state.get(_CURRENT)
    st.session_state[_CURRENT] = (page, keys)
    if last is not None and last[0] == page:
        return False
    saved: dict[str, dict] = st.session_state.setdefault(_SAVED, {})
    if last is not None:
        left, left_keys = last
        saved[left] = {k: st.session_state[k] for k in left_keys if k in st.session_state}
        _forget(left_keys)
    _forget(keys)  # whatever another page (or a callback) left under this page's names
    if last is not None and not any(k in st.query_params for k in keys):
        for key, value in saved.get(page, {}).items():
            if key in specs:
                st.session_state[key] = value
                _to_url(specs[key], value)
    return True
