"""The ZeRO page's own helpers: its cached views, figures and tables, and its detail tabs."""
