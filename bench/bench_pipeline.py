"""Benchmark: the pipeline engine against a plain Python event loop, and at the largest allowed sizes.

"cold" = build the schedule + check and resolve dependencies + time every op + peak memory, with no
cache; "warm" = only the costs changed (what a cost slider does: the structure is reused).

Run: python bench/bench_pipeline.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import reference_loop  # noqa: E402
from bench_memory import machine  # noqa: E402

from core.params.pipeline import MAX_OPS  # noqa: E402
from core.pipeline.schedules import REGISTRY, build, estimated_ops  # noqa: E402
from core.pipeline.simulate import Costs, compile_schedule, run_timeline  # noqa: E402
from core.runtime import keep_freed_memory  # noqa: E402


def median_ms(fn, repeats: int, warmup: int = 2) -> float:
    """Median wall time after `warmup` untimed calls; each result is dropped before the next call."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
        del result
    return statistics.median(times) * 1e3


def median_cpu_ms(fn, repeats: int, warmup: int = 1) -> float:
    """As median_ms, in this process's CPU time: what a call costs when it does not share the cores."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        result = fn()
        times.append(time.process_time() - t0)
        del result
    return statistics.median(times) * 1e3


def cold(name: str, p: int, m: int, v: int = 2, costs: Costs | None = None):
    """Build, compile, time and measure: everything a first look at a new configuration costs."""
    tl = run_timeline(build(name, p, m, v), costs or Costs())
    return tl.makespan, tl.peak_inflight, tl.bubble_fraction


def largest(name: str) -> tuple[int, int, int]:
    """The biggest (p, m, v) under the caps: p = 64, v = 8 where used, m as large as MAX_OPS allows."""
    p, v = 64, 8
    m = 1024
    while m > 1 and (estimated_ops(name, p, m, v) > MAX_OPS or m < REGISTRY[name].min_m(p) or
                     (name == "interleaved" and m % p)):
        m //= 2
    return p, max(m, REGISTRY[name].min_m(p)), v


def run_all(repeats: int = 15) -> list[dict]:
    keep_freed_memory()  # as app.py and the CLI do (see core/runtime.py)
    rows = []
    p, m = 64, 1024
    ref = median_ms(lambda: reference_loop.simulate(p, m, "1f1b"), 5, warmup=1)
    eng = median_ms(lambda: cold("1f1b", p, m), repeats)
    s = build("1f1b", p, m)
    compiled = compile_schedule(s)
    warm = median_ms(lambda: run_timeline(s, Costs(tf=1.1, tb=2.0), compiled).peak_inflight, repeats)
    n = 2 * p * m
    rows += [
        {"benchmark": "reference pure-Python loop, 1F1B p=64 m=1024", "value": ref, "unit": "ms", "target": ""},
        {"benchmark": "engine cold, 1F1B p=64 m=1024 (131,072 ops)", "value": eng, "unit": "ms", "target": "< 30 ms"},
        {"benchmark": "speed-up over the reference loop (same run)", "value": ref / eng, "unit": "x",
         "target": ">= 10"},
        {"benchmark": "engine throughput, 1F1B p=64 m=1024", "value": n / eng / 1e3, "unit": "M ops/s", "target": ""},
        {"benchmark": "engine warm (costs changed), 1F1B p=64 m=1024", "value": warm, "unit": "ms", "target": ""},
        {"benchmark": "engine cold, interleaved p=32 m=256 v=4 (65,536 ops)",
         "value": median_ms(lambda: cold("interleaved", 32, 256, 4), repeats), "unit": "ms", "target": "< 60 ms"},
    ]

    def seed_grid():
        for p_ in (2, 4, 8, 16):
            for m_ in (1, 4, 8, 16, 32, 64, 128):
                for tf, tb in ((1, 2), (1, 1), (2, 3)):
                    cold("gpipe", p_, m_, costs=Costs(tf=tf, tb=tb))

    rows.append({"benchmark": "seed grid, 84 GPipe simulations", "value": median_ms(seed_grid, 5), "unit": "ms",
                 "target": "< 100 ms"})
    for name in REGISTRY:
        lp, lm, lv = largest(name)
        ms = median_ms(lambda name=name, lp=lp, lm=lm, lv=lv: cold(name, lp, lm, lv), 3)
        ops = estimated_ops(name, lp, lm, lv)
        rows.append({"benchmark": f"largest allowed {name}: p={lp} m={lm}" + (f" v={lv}" if REGISTRY[name].chunks == "v"
                     else "") + f" ({ops:,} ops)", "value": ms, "unit": "ms", "target": "< 2000 ms"})
    for name in ("v-half", "v-min"):  # the paper's greedy squeeze builds these orders: the slowest to build
        lp, lm, lv = largest(name)
        rows += [
            {"benchmark": f"{name} p={lp} m={lm}: greedy build alone, cold", "unit": "ms", "target": "",
             "value": median_ms(lambda name=name, lp=lp, lm=lm: build(name, lp, lm), 3)},
            {"benchmark": f"{name} p={lp} m={lm}: build + time, cold, CPU time (load-independent)", "unit": "ms",
             "target": "< 2000 ms", "value": median_cpu_ms(lambda name=name, lp=lp, lm=lm: cold(name, lp, lm), 3)},
        ]
    return rows


def bench_rows() -> list[dict]:
    """Entry point for bench/run_all.py."""
    return run_all()


def main() -> None:
    print(machine())
    for r in run_all():
        print(f"{r['benchmark']:<72} {r['value']:>10.2f} {r['unit']:<8} {r['target']}")


if __name__ == "__main__":
    main()
