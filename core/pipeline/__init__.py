"""Pipeline schedules and their timing: schedules as data, the dependency-driven simulator, timelines, closed
forms, text and trace renderers, PyTorch's action notation, and the Pipeline page's view.

May import: core.params and the top-level basics (it knows nothing of models, memory or cost).
"""
