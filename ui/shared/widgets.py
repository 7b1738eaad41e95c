"""One widget per Spec, bound to the URL: the only way pages create inputs.

    values = url_inputs(PIPELINE, ["schedule", "p", "m"])          # in the main area
    with st.sidebar:
        values = url_inputs(PIPELINE, ["schedule", "p", "m"])      # or in the sidebar

Every widget gets ``key=spec.key`` and ``bind="query-params"``, so the URL is the page state and a
copied link reproduces the view. Label, help, bounds and default come from the Spec; the widget kind
follows the spec's kind (bool -> toggle, choice -> selectbox, int -> slider for a span of at most
SLIDER_MAX_SPAN else number_input, float -> number_input, floats -> text input). Before the first
widget exists the URL is checked with our own parser (ui.shared.url_state.sync_url), so a hand-edited link
never reaches a widget unchecked, and what was wrong is shown as plain text (show_notices).
Returned values are parsed by the Spec again, so a page gets typed, in-range values only.

Numbers first: a page can draw its headline numbers before its widgets exist, so a shared link shows
them first (the browser draws elements in the order they arrive, and every widget kind costs it a
script to load). `peek` returns the values the widgets are going to return in this run; after the
widgets exist, `confirm` reruns once in the rare case a widget disagreed, so the screen never shows
numbers for other inputs than the widgets do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import streamlit as st

from core.errors import InputError
from core.params import Spec
from ui.shared.url_state import format_value, sync_url

SLIDER_MAX_SPAN = 128  # int inputs with hi - lo up to this get a slider, wider ones a number box

LINK_NOTICE_TITLE = "Some values in this link could not be used, so the defaults are shown:"
INPUT_NOTICE_TITLE = "This input could not be used, so the default is used:"


def label_of(spec: Spec) -> str:
    label = spec.label or spec.key
    return f"{label} ({spec.unit})" if spec.unit else label


def help_of(spec: Spec) -> str:
    """Tooltip: the spec's help, its range and default, and the URL key (all our own text)."""
    default = "none" if spec.default in (None, ()) else format_value(spec, spec.default)
    parts = [spec.help, f"Allowed: {spec.describe_range()}. Default: {default}. URL key: `{spec.key}`."]
    return "\n\n".join(p for p in parts if p)


def show_notices(notices: Iterable[str], container: Any = None, title: str = LINK_NOTICE_TITLE) -> None:
    """Show notices as plain text (st.text), under a fixed warning: URL text is never parsed as markdown."""
    notices = list(notices)
    if not notices:
        return
    box = container if container is not None else st
    box.warning(title, icon=":material/link_off:")
    for notice in notices:
        box.text(notice)


def _float_step(spec: Spec) -> float:
    d = abs(float(spec.default or 0))
    return 10.0 ** math.floor(math.log10(d)) / 10 if d > 0 else 0.1


def spec_input(spec: Spec, *, container: Any = None, widget: str | None = None, **kwargs: Any) -> Any:
    """Create the widget for one spec (key = spec.key, bound to the URL) and return its checked value.

    widget: None (chosen by kind), "slider" or "number" for numbers, "radio" for choices.
    kwargs go to the Streamlit call (e.g. step=0.05, label=..., disabled=True, on_change="ignore").
    If the page did not call sync_url for this key first, it is checked here (one key at a time).
    """
    show_notices(sync_url({spec.key: spec}, [spec.key]), container)
    box = container if container is not None else st
    args: dict[str, Any] = {"label": label_of(spec), "key": spec.key, "help": help_of(spec), "bind": "query-params"}
    args.update(kwargs)
    if spec.kind == "bool":
        raw = box.toggle(value=bool(spec.default), **args)
    elif spec.kind == "choice":
        options = list(spec.choices)
        make = box.radio if widget == "radio" else box.selectbox
        raw = make(options=options, index=options.index(spec.default), format_func=str, **args)
    elif spec.kind in ("int", "float"):
        cast = int if spec.kind == "int" else float
        bounds = {
            "min_value": None if spec.lo is None else cast(spec.lo),
            "max_value": None if spec.hi is None else cast(spec.hi),
            "value": None if spec.default is None else cast(spec.default),  # None: optional, empty box
            "step": cast(args.pop("step", 1 if cast is int else _float_step(spec))),
        }
        small = spec.lo is not None and spec.hi is not None and spec.hi - spec.lo <= SLIDER_MAX_SPAN
        if widget == "slider" or (widget is None and cast is int and small and spec.default is not None):
            raw = box.slider(**bounds, **args)
        else:
            args.setdefault("format", None if cast is int else "%g")
            raw = box.number_input(**bounds, **args)
    elif spec.kind == "floats":
        args.setdefault("placeholder", "comma-separated numbers, e.g. 1, 1, 1.5")
        raw = box.text_input(value=format_value(spec, spec.default), max_chars=spec.max_chars, **args)
    elif spec.kind == "choices":  # a set of names as text (a multiselect cannot be bound to the URL)
        args.setdefault("placeholder", "comma-separated: " + ", ".join(spec.choices))
        raw = box.text_input(value=format_value(spec, spec.default), max_chars=spec.max_chars, **args)
    else:
        raise ValueError(f"no widget for kind {spec.kind!r} ({spec.key})")
    if raw is None and spec.default is None:  # an optional number left empty
        return None
    try:
        return spec.parse(raw)
    except InputError as exc:  # only reachable by typing into a text input
        show_notices([f"{exc} - using the default ({spec.default!r})."], container, INPUT_NOTICE_TITLE)
        return spec.default


def grid(values: dict[str, Any], specs: Mapping[str, Spec], keys: Iterable[str], width: int) -> None:
    """The inputs of `keys` in rows of `width` columns, their values into `values`. Switches (bool specs) go in rows
    of their own, half as many a row: a switch's label sits beside it and is cut, not wrapped, when its column is
    narrow (on a 1280-pixel projector, in presentation mode)."""
    keys = list(keys)
    boxes = [k for k in keys if specs[k].kind != "bool"]
    toggles = [k for k in keys if specs[k].kind == "bool"]
    for group, n in ((boxes, width), (toggles, max(1, width // 2))):
        if not group:
            continue
        cols = st.columns(n)
        for i, key in enumerate(group):
            values[key] = spec_input(specs[key], container=cols[i % n])


def peek(specs: Mapping[str, Spec], keys: Iterable[str] | None = None) -> dict[str, Any]:
    """The values the widgets of `keys` will return in this run, known before they exist.

    A widget's value is its state (the user's last change, or a callback's) when it has one, else the
    URL's value (checked and made canonical by sync_url before), else the default: the same order in
    which Streamlit seeds a URL-bound widget. Call sync_url for these keys first.
    """
    out: dict[str, Any] = {}
    for key in specs if keys is None else keys:
        spec = specs[key]
        if key in st.session_state:
            raw = st.session_state[key]
        elif key in st.query_params:
            values = st.query_params.get_all(key)
            raw = values[0] if len(values) == 1 else values
        else:
            out[key] = spec.default
            continue
        try:
            out[key] = None if raw is None and spec.default is None else spec.parse(raw)
        except InputError:
            out[key] = spec.default
    return out


_CONFIRM = "_ui_peek_rerun"


def confirm(peeked: Mapping[str, Any], actual: Mapping[str, Any], name: str = "") -> None:
    """Rerun once if a widget returned another value than `peek` said (the numbers drawn are then stale).

    name: one per call site, when a page confirms in several places.
    """
    key = f"{_CONFIRM}{name}"
    differs = sorted(k for k in peeked if k in actual and actual[k] != peeked[k])
    if differs and st.session_state.get(key) != differs:
        st.session_state[key] = differs
        st.rerun()
    st.session_state.pop(key, None)


def url_inputs(
    specs: Mapping[str, Spec],
    keys: Iterable[str] | None = None,
    *,
    container: Any = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Check the URL for `keys`, show its notices, create one widget per key; return {key: value}.

    options: per-key arguments for spec_input, e.g. {"first_stage": {"widget": "slider", "step": 0.05}}.
    Notices go to the same container as the widgets.
    """
    keys = list(specs if keys is None else keys)
    show_notices(sync_url(specs, keys), container)
    options = options or {}
    return {k: spec_input(specs[k], container=container, **options.get(k, {})) for k in keys}
