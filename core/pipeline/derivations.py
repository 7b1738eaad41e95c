"""Where each closed form comes from, in words: the Pipeline page's "derivation" and the CLI's.

The words are the schedules' own (their records in core.pipeline.schedules, beside the generators and the forms);
this module only gathers them with the conventions' meanings. Every claim of exactness there is checked by the
tests against the simulator (tests/test_pipeline_schedules.py, tests/test_pipeline_memory_schedules.py).
"""

from __future__ import annotations

from core.pipeline.schedules import REGISTRY

CONVENTION_WORDS = {
    "makespan": "makespan convention: a device's idle time between 0 and the end of the whole timeline",
    "span": "span convention (the Zero Bubble paper's): a device's idle time between its own first and last "
            "operation, so the later start of later devices is not counted",
}


def explain(schedule: str) -> dict[str, str]:
    """The words for one schedule: derivation (or the source's estimate) and the conditions of its form."""
    entry = REGISTRY.get(schedule)
    if entry is None:
        return {"derivation": "", "conditions": ""}
    return {"derivation": entry.derivation, "conditions": entry.closed_form.conditions if entry.closed_form else ""}
