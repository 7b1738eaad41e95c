"""What each page cache can hold: the largest entry measured (pickled, as st.cache_data stores it) x its bound.

For every bounded cache of the pages (ui/*/cache.py, ui/pipeline/memory.py, ui/pipeline/upload.py) and of core
(core.pipeline.result's two operation-bounded caches, the planner's simulation caches), the entry measured on the
largest input the page allows (or the largest question measured), and the most the cache can then hold. The
docs/hardening.md's "Memory comes back" table quotes these rows; the max_size of each wrapper is set from them.

Run: python bench/bench_cache_bounds.py
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from core.params.planner import PlannerParams  # noqa: E402
from core.views import planner as pv  # noqa: E402
from core.views import zero as zv  # noqa: E402
from core.views.pipeline import PipelineParams, frontier, pipeline_view  # noqa: E402
from ui.planner import figures as fp  # noqa: E402

BIG_PIPELINE = PipelineParams(schedule="interleaved", p=64, m=1024, v=8)  # the simulator's largest timeline
BIG_PLAN = PlannerParams(model="mixtral-8x22b", gpus=512, mb_sizes=(1.0, 2.0, 4.0, 8.0))  # 126,361 candidates


def size_of(value) -> int:
    return len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def _zero() -> tuple[int, int]:
    """The ZeRO page's view of the largest preset on 1,024 GPUs, and the equivalence demo at its largest inputs."""
    from core.params.memory import ZeroParams

    model = "llama3-405b"
    q = ZeroParams(nd=1024, params=zv.preset_params(model), **zv.preset_gpu("h100-80gb"))
    view = zv.zero_view(q, zv.preset_shape(model), None)
    return size_of(view), size_of(zv.equivalence_demo(16, 100, 1000, 0, 1.0))


def measured() -> list[tuple[str, int, int]]:
    """(cache, largest entry in bytes, entries bound) for each page cache."""
    view = pipeline_view(BIG_PIPELINE)
    plan = pv.plan_view(BIG_PLAN)
    rows = [("ui.pipeline.cache.view", size_of(view), 48),
            ("ui.pipeline.memory._frontier", size_of(frontier(PipelineParams(p=64, m=1024))), 32),
            ("ui.planner.cache.plan_view", size_of(plan), 16),
            ("ui.planner.cache._tradeoff_spec",
             size_of(fp.tradeoff(plan.points, "time", plan.gpu_mem_bytes, plan.usable_bytes, False).to_dict()), 32),
            ("ui.planner.cache._breakdown_spec", size_of(fp.breakdown(plan.breakdown_rows()).to_dict()), 32),
            ("ui.planner.cache.table_rows (1,000 rows)", size_of(plan.rows(False, 1000)), 32),
            ("ui.planner.cache.export_of", size_of(plan.exports), 32)]
    z, eq = _zero()
    rows += [("ui.zero.cache.zero_view", z, 64), ("ui.zero.cache.equivalence_run (16 ranks, 100 steps)", eq, 32)]
    return rows


def bench_rows() -> list[dict]:
    out = []
    for name, largest, entries in measured():
        out.append({"benchmark": f"{name}: largest entry", "value": largest / 1e6, "unit": "MB", "target": ""})
        out.append({"benchmark": f"{name}: {entries} entries x largest", "value": entries * largest / 1e6,
                    "unit": "MB", "target": ""})
    return out


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    for name, largest, entries in measured():
        print(f"{name:<55} largest {largest / 1e6:8.3f} MB  x {entries:>3} = {entries * largest / 1e6:8.1f} MB")
