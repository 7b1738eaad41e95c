"""Benchmark: the t x p x d planner's full enumeration, cold (no simulation cached) and warm.

Each plan searches every t x p x d of G (t dividing the heads, p up to 64 and the layers), micro-batch sizes
1, 2, 4, 8, ZeRO 0-3, recompute none / selective / full, sequence parallelism off / on, and the schedules
1F1B, interleaved (v = 2) and ZB-H1: core.planner.plan, exactly what the CLI and the page call. "cold" clears
the planner's simulation cache and its kept structure (core.planner.plan_cache) first, so the candidates, their
memory and every distinct (schedule, p, m, v) are built and simulated inside the timing: a question's first plan;
"warm" is the same plan again (the structure kept, every simulation shared from the cache: what a page rerun with
other step-time assumptions costs, less the simulations its new keys need).

Run: python bench/bench_planner.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.params.planner import PlannerParams  # noqa: E402
from core.planner import plan as planner  # noqa: E402
from core.planner import plan_cache, simulation  # noqa: E402

MB_SIZES = (1.0, 2.0, 4.0, 8.0)
CASES = (
    # (label, params, target seconds cold)
    ("G = 4,096, GPT-3 175B on A100 80GB, batch 1,536",
     PlannerParams(model="gpt3-175b", gpu="a100-80gb", gpus=4096, batch=1536, mb_sizes=MB_SIZES), 1.0),
    ("G = 4,096, Llama 3 405B on H100, batch 2,048",
     PlannerParams(model="llama3-405b", gpu="h100-80gb", gpus=4096, batch=2048, mb_sizes=MB_SIZES), 1.0),
    ("G = 16,384, Llama 3 405B on H100, batch 2,048",
     PlannerParams(model="llama3-405b", gpu="h100-80gb", gpus=16384, batch=2048, mb_sizes=MB_SIZES), 3.0),
    ("G = 16,384, Llama 3 405B on H100, batch 16,384",
     PlannerParams(model="llama3-405b", gpu="h100-80gb", gpus=16384, batch=16384, mb_sizes=MB_SIZES), 3.0),
    # Beyond t x p x d (issue 12): cp searched at 128K, ep over the experts' divisors.
    ("G = 16,384, Llama 3 405B at 128K (cp 1-16), batch 128",
     PlannerParams(model="llama3-405b", seq=131072, gpu="h100-80gb", gpus=16384, batch=128, mb_sizes=MB_SIZES), 3.0),
    ("G = 16,384, DeepSeek-V3 on H800 (ep 1-256), batch 15,360",
     PlannerParams(model="deepseek-v3", gpu="h800-80gb", gpus=16384, batch=15360, mb_sizes=MB_SIZES), 3.0),
    ("G = 16,384, Mixtral 8x7B at 32K (cp 1-4, ep 1-8), batch 4,096",
     PlannerParams(model="mixtral-8x7b", gpu="h100-80gb", gpus=16384, batch=4096, mb_sizes=MB_SIZES), 3.0),
)
REPEATS = 3
APP = Path(__file__).resolve().parents[1] / "app.py"
LARGEST = {"model": "llama3-405b", "gpus": "65536", "batch": "4194304", "mb_sizes": "1,2,4,8,16,32,64,128",
           "offload": "all", "rows": "1000", "feasible_only": "false"}
COMPOSITE = PlannerParams(model="megatron-1t", gpu="h100-80gb", gpus=55440, batch=221760,
                          mb_sizes=(1, 2, 3, 4, 5, 6, 7, 8), offload="all")


def machine() -> str:
    import os
    import platform

    return f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs"


def _timed(q: PlannerParams, cold: bool) -> tuple[float, planner.PlanResult]:
    times, result = [], None
    for _ in range(REPEATS):
        if cold:
            simulation.clear_cache()
            plan_cache.clear()
        t0 = time.perf_counter()
        result = planner.plan(q)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def bench_rows() -> list[dict]:
    rows = []
    for label, q, target in CASES:
        planner.plan(q)  # imports and first-call costs out of the way
        cold, result = _timed(q, cold=True)
        warm, _ = _timed(q, cold=False)
        n, feasible = len(result.frame), len(result.feasible)
        rows += [
            {"benchmark": f"plan, cold: {label} ({n:,} candidates, {result.simulations} simulations, "
                          f"{feasible:,} feasible)", "value": cold * 1e3, "unit": f"ms (median of {REPEATS})",
             "target": f"< {target * 1e3:,.0f} ms"},
            {"benchmark": f"plan, warm (simulations cached): {label}", "value": warm * 1e3,
             "unit": f"ms (median of {REPEATS})", "target": "< 200 ms (a page rerun)"},
        ]
    return rows


def _page(query: dict, *changes) -> tuple[float, float, list[float]]:
    """AppTest, server side: (first run, rerun with nothing changed, the rerun after each of `changes` to a
    widget)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=120)
    at.switch_page("pages/planner.py")
    at.query_params.update(query)
    t0 = time.perf_counter()
    at.run()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    at.run()
    rerun = time.perf_counter() - t0
    changed = []
    for change in changes:
        change(at)
        t0 = time.perf_counter()
        at.run()
        changed.append(time.perf_counter() - t0)
        assert not at.exception, at.exception
    return first, rerun, changed


def page_rows() -> list[dict]:
    """The Planner page's server-side rerun times (AppTest), default and largest allowed settings. An assumption
    step re-plans: the first (efficiency 0.5) changes the cost ratios of most candidates, so their simulation keys
    are new (130 at the defaults); a second small step (0.5 -> 0.51) finds nearly all of them cached."""
    from ui.shared import layout

    layout.FIRST_PAINT_S = layout.RERUN_PAINT_S = 0  # no browser is painting (as bench/bench_pages.py)
    simulation.clear_cache()
    plan_cache.clear()
    rows = []
    for label, query in (("default settings", {}), ("largest settings (G = 65,536, 8 micro-batch sizes, offload all, "
                                                    "1,000 rows)", LARGEST)):
        first, rerun, (view,) = _page(query, lambda at: at.toggle(key="feasible_only").set_value(True))
        _, _, (assumption, again) = _page(query, lambda at: at.number_input(key="eff").set_value(0.5),
                                          lambda at: at.number_input(key="eff").set_value(0.51))
        target = "< 200 ms" if not query else "< 1,000 ms"
        rows += [
            {"benchmark": f"page, first run (cold simulations), {label}", "value": first * 1e3, "unit": "ms",
             "target": "(first load)"},
            {"benchmark": f"page rerun after a view widget (feasible-only), {label}", "value": view * 1e3,
             "unit": "ms", "target": target},
            {"benchmark": f"page rerun after an assumption (re-plan, new simulation keys), {label}",
             "value": assumption * 1e3, "unit": "ms", "target": target},
            {"benchmark": f"page rerun after a second assumption step (re-plan, simulations cached), {label}",
             "value": again * 1e3, "unit": "ms", "target": target},
        ]
    return rows


def budget_row() -> dict:
    """A highly composite G with every micro-batch size: the simulation budget bounds the work."""
    cold, result = _timed(COMPOSITE, cold=True)
    return {"benchmark": f"plan, cold, G = 55,440 (highly composite), 8 micro-batch sizes, offload all "
                         f"({len(result.frame):,} candidates, {result.simulations} simulations in the budget)",
            "value": cold * 1e3, "unit": f"ms (median of {REPEATS})", "target": "bounded by SIM_BUDGET"}


def main() -> None:
    print(machine())
    for r in bench_rows() + [budget_row()] + page_rows():
        print(f"{r['benchmark']:<110} {r['value']:>9.1f} {r['unit']:<16} {r['target']}")


if __name__ == "__main__":
    main()
