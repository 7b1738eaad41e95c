"""Streamlit helpers of the pages, one package per page and one for what they share.

No formulas live here. Numbers come from `core`; this package only turns specs into widgets, values into
URLs, and core calls into cached calls, figures and tables.

    ui.pipeline  the Pipeline page's inputs, cached views, figures, sections and exports
    ui.zero      the ZeRO page's cached views, figures, tables and detail tabs
    ui.planner   the Planner page's cached plan, figures and table, recommendation and exports
    ui.lecture   the Lecture page's words, cached answers and live figures
    ui.shared    what two pages or more use: the URL and its widgets, links, the page frame, tables,
                 the bounded cache and the server's work limit, the memory curve and its figure style

A page package imports ui.shared and never another page's package; ui.shared imports no page package.
"""
