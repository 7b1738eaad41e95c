"""Does the process stop growing? 500 distinct configurations through the cached calls, RSS sampled.

Every call is a new parameter set, so every call misses the cache and adds an entry; the caches'
bounds (core/pipeline/ops_cache.py for the engine, max_entries for the pages' st.cache_data wrappers) must
turn that into a plateau. Reports the resident set size after 100, 250 and 500 configurations.

Run: python bench/bench_cache_memory.py
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.pipeline.result import PipelineParams, _results, simulate  # noqa: E402
from core.runtime import keep_freed_memory  # noqa: E402

CHECKPOINTS = (100, 250, 500)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def configurations():
    """Distinct, mostly mid-sized parameter sets across all schedules (a class clicking around)."""
    schedules = ("1f1b", "gpipe", "zb-h1", "zb-h2", "zbv", "pipedream")
    for m, p, name in itertools.product(range(64, 1025, 8), (8, 16, 32), schedules):
        if name in ("zbv",) and m < 2 * p:
            continue
        yield PipelineParams(schedule=name, p=p, m=m, tw=0.5)


def bench_rows() -> list[dict]:
    keep_freed_memory()
    rows = [{"benchmark": "RSS before any simulation", "value": rss_mb(), "unit": "MB", "target": ""}]
    done = 0
    for params in configurations():
        simulate(params)
        done += 1
        if done in CHECKPOINTS:
            rows.append({"benchmark": f"RSS after {done} distinct pipeline configurations", "value": rss_mb(),
                         "unit": "MB", "target": "flat after the caches fill"})
        if done == CHECKPOINTS[-1]:
            break
    rows.append({"benchmark": "engine cache: operations held (bound 1,048,576)", "value": float(_results.held_ops),
                 "unit": "ops", "target": "<= 1,048,576"})
    return rows


if __name__ == "__main__":
    for r in bench_rows():
        print(f"{r['benchmark']:<60} {r['value']:>12,.1f} {r['unit']:<5} {r['target']}")
