"""Shared Streamlit helpers for the pages: widgets bound to the URL, links, layout, caching.

No formulas live here. Numbers come from `core`; this package only turns specs into widgets, values into
URLs, and core calls into cached calls.

    ui.shared.url_state  read and repair the URL before widgets exist (notices for bad values)
    ui.shared.widgets    one widget per Spec, bound to the URL (key = spec key)
    ui.shared.links      the page registry, links between pages that carry parameters, the share link
    ui.shared.layout     page header, sidebar brand, presentation mode
    ui.shared.cache      the one way pages call core: `@cached(...)` wrappers around st.cache_data
"""
