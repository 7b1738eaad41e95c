"""The Pipeline page's own helpers: its inputs, cached views, figures, sections and exports."""
