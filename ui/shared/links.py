"""The page registry, links between pages that carry parameters, and the share link of a view.

PAGES is the one list of pages: app.py builds st.navigation from it (only the files that exist), the
home page draws a card per page from it, and links find a page's url_path in it.

Links carry parameters in the page's URL keys (the spec keys), canonical text, defaults left out:

    page_link_with_params("pipeline", {"schedule": "zb-h1", "p": 8}, PIPELINE)
    -> "/pipeline?schedule=zb-h1&p=8"

A link to another page inside the app (link_to_page) uses st.page_link, which switches page without a
reload. Streamlit drops a link's parameter when the same key is bound on the page the user leaves, so
in that case link_to_page falls back to a plain same-tab link (a fresh load of the target URL).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import streamlit as st

from core.params import Spec
from ui.shared.url_state import format_value

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class PageEntry:
    file: str  # relative to the repository root
    title: str
    url_path: str  # "" for the home page
    icon: str
    description: str  # one line, shown on the home page and in the page header


PAGES: tuple[PageEntry, ...] = (
    PageEntry("pages/home.py", "Home", "", ":material/home:",
              "What this tool answers, and where to start."),
    PageEntry("pages/pipeline.py", "Pipeline", "pipeline", ":material/view_timeline:",
              "Pipeline schedules step by step: who computes what when, the bubble, and activation memory."),
    PageEntry("pages/zero.py", "ZeRO memory", "zero", ":material/memory:",
              "Per-GPU memory under data parallelism, ZeRO 1-3 and FSDP: what is sharded and what it costs."),
    PageEntry("pages/planner.py", "Planner", "planner", ":material/grid_view:",
              "Enumerate t x p x d layouts for a model and a cluster, ranked by step time and memory fit."),
    PageEntry("pages/lecture.py", "Lecture", "lecture", ":material/school:",
              "A guided lecture through pipeline and ZeRO parallelism, with live figures."),
)


def available_pages() -> list[PageEntry]:
    """The registered pages whose file exists (a missing file would make st.Page fail at start-up)."""
    return [p for p in PAGES if (ROOT / p.file).exists()]


def find_page(page: str | PageEntry) -> PageEntry:
    """A page by url_path ("pipeline"), file ("pages/pipeline.py") or title."""
    if isinstance(page, PageEntry):
        return page
    for p in PAGES:
        if page in (p.url_path, p.file, p.title):
            return p
    raise KeyError(f"unknown page {page!r}")


def encode_params(params: Mapping[str, Any], specs: Mapping[str, Spec] | None = None) -> dict[str, str]:
    """Canonical URL texts. With specs: values are checked (InputError if not allowed) and defaults left out."""
    out: dict[str, str] = {}
    for key, value in params.items():
        if specs is None:
            out[key] = str(value).lower() if isinstance(value, bool) else str(value)
            continue
        spec = specs[key]
        if value is None and spec.default is None:  # an optional value left empty
            continue
        value = spec.parse(value)
        if value != spec.default:
            out[key] = format_value(spec, value)
    return out


def _base_path() -> str:
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    return f"/{base}" if base else ""


def page_link_with_params(
    page: str | PageEntry, params: Mapping[str, Any] | None = None, specs: Mapping[str, Spec] | None = None
) -> str:
    """A root-relative URL of a page with parameters, e.g. "/pipeline?schedule=1f1b&p=8".

    Usable anywhere a URL is (st.column_config.LinkColumn, markdown). With specs, values are checked
    and defaults are left out, so the link is as short as the one the target page would show.
    """
    entry = find_page(page)
    query = urlencode(encode_params(params or {}, specs))
    return f"{_base_path()}/{entry.url_path}" + (f"?{query}" if query else "")


def link_to_page(
    page: str | PageEntry,
    params: Mapping[str, Any] | None = None,
    specs: Mapping[str, Spec] | None = None,
    *,
    label: str | None = None,
    icon: str | None = None,
    help: str | None = None,
) -> None:
    """Draw a link to a page of this app that opens it with `params` (see the module docstring)."""
    entry = find_page(page)
    encoded = encode_params(params or {}, specs)
    label = label or entry.title
    if (ROOT / entry.file).exists() and not any(k in st.session_state for k in encoded):
        st.page_link(str(ROOT / entry.file), label=label, icon=icon or entry.icon, help=help,
                     query_params=encoded or None)
    else:
        # A key of the link is bound on this page: st.page_link would lose it, a fresh load keeps it.
        url = html.escape(page_link_with_params(entry, encoded), quote=True)
        st.markdown(f'<a href="{url}" target="_self">{html.escape(label)}</a>', unsafe_allow_html=True)


def share_url(values: Mapping[str, Any], specs: Mapping[str, Spec], page: str | PageEntry | None = None) -> str:
    """The URL that reproduces this view: the page's address plus its non-default values.

    The address comes from st.context.url (scheme, host, page path; Streamlit strips the query), or
    the page's root-relative path when there is no browser (AppTest). Presentation mode is kept.
    """
    params = encode_params({k: v for k, v in values.items() if k in specs}, specs)
    if st.session_state.get("present"):
        params["present"] = "true"
    base = st.context.url
    if not base:
        base = page_link_with_params(page) if page is not None else "./"
    query = urlencode(params)
    return base + (f"?{query}" if query else "")


_SLOT = "_ui_share_slot"  # session state: app.py's sidebar slot for the share link, from the last full run


def share_slot(container: Any) -> None:
    """Where copy_link_box draws by default (app.py: a sidebar container under the presentation toggle).

    Kept in session state, not in the run: a page's fragment (pages/*.py `body`) reruns without app.py and must
    redraw the link in the same slot.
    """
    st.session_state[_SLOT] = container


def copy_link_box(values: Mapping[str, Any], specs: Mapping[str, Spec], page: str | PageEntry | None = None,
                  *, container: Any = None, repeated: Sequence[tuple[str, str]] = ()) -> str:
    """Show the link to this view in the same place on every page (app.py's sidebar slot); return the URL.

    repeated: extra (key, value) pairs for keys that repeat in the URL (?compare=a&compare=b).
    The link is plain markdown, drawn with the first elements of the page: st.code would make the browser
    load a 1.5 MB syntax highlighter for it (bench/bench_browser.py).
    """
    url = share_url(values, specs, page)
    if repeated:
        url += ("&" if "?" in url else "?") + urlencode(list(repeated))
    box = container if container is not None else st.session_state.get(_SLOT) or st.sidebar
    safe = quote(url, safe=":/?&=%#+,;@!")  # nothing that could end the markdown link or code span
    box.markdown(f"Link to this view: [`{safe}`]({safe})  \n"
                 ":small[Copy it (right-click, Copy link) to share exactly these settings.]")
    return url
