"""The Planner page's own helpers: its cached plan, figures and table, recommendation and exports."""
