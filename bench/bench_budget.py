"""Benchmark: what one plan costs per candidate on this machine, the measurement behind the planner's work budget
(core.params.planner.BUDGET).

Each question is planned in a fresh process (cold: no simulation cached, the worst a shared link can ask), with
the budget lifted so that the plan enumerates every candidate; the child reports its candidates, wall time and
peak resident memory (getrusage), and the baseline (the same process with the imports only) is subtracted from
the memory. The budget is the largest count whose predicted time and memory stay within one request's share:
TIME_S seconds and MEMORY_BYTES bytes at the slowest rate measured.

Run: python bench/bench_budget.py            (a few minutes; other jobs on the machine slow it down: repeat)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIME_S = 15.0
MEMORY_BYTES = 1.5e9
QUESTIONS = (
    "dict(model='mixtral-8x7b', gpu='h100-80gb', gpus=16384, batch=4096, mb_sizes=(1, 2, 4, 8))",
    "dict(model='deepseek-v3', gpu='h800-80gb', gpus=16384, batch=15360, mb_sizes=(1, 2, 4, 8))",
    "dict(model='deepseek-v3', gpus=61440, seq=1048576, mb_sizes=(1,))",
    "dict(model='deepseek-v3', gpus=61440, seq=1048576, mb_sizes=(1, 2), offload='all', fix_cp=4)",
    "dict(model='llama3-405b', gpus=65536, batch=4194304, mb_sizes=(1, 2, 4, 8, 16, 32, 64, 128), offload='all')",
)
CHILD = """
import json, resource, sys, time
from core.params.planner import PlannerParams
from core.planner import plan as planner
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
q = PlannerParams(**{question})
t0 = time.perf_counter()
r = planner.plan(q, budget=0)
dt = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({{"candidates": len(r.frame), "seconds": dt, "bytes": peak - base}}))
"""


def measure(question: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", CHILD.format(question=question)], capture_output=True, text=True,
                         env=env, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measured() -> list[dict]:
    rows = []
    for question in QUESTIONS:
        m = measure(question)
        m["us_per"], m["bytes_per"] = 1e6 * m["seconds"] / m["candidates"], m["bytes"] / m["candidates"]
        m["question"] = question
        rows.append(m)
    return rows


def bench_rows() -> list[dict]:
    """For bench/run_all.py: each question's time and memory per candidate."""
    out = []
    for m in measured():
        label = f"plan, cold, budget lifted: {m['question'][5:-1]} ({m['candidates']:,} candidates)"
        out += [{"benchmark": label, "value": m["us_per"], "unit": "us/cand", "target": "budget: 15 s"},
                {"benchmark": label, "value": m["bytes_per"], "unit": "B/cand", "target": "budget: 1.5 GB"}]
    return out


def main() -> None:
    rows = measured()
    for m in rows:
        print(f"{m['candidates']:>10,} candidates  {m['seconds']:7.2f} s  {m['bytes'] / 1e6:8.0f} MB  "
              f"{m['us_per']:6.1f} us and {m['bytes_per']:6.0f} bytes per candidate   {m['question']}", flush=True)
    big = [m for m in rows if m["candidates"] >= 100_000] or rows  # small plans are dominated by fixed costs
    us, per = max(m["us_per"] for m in big), max(m["bytes_per"] for m in big)
    print(f"slowest rate {us:.1f} us, {per:.0f} bytes per candidate: {TIME_S:g} s allow "
          f"{TIME_S / us * 1e6:,.0f} candidates, {MEMORY_BYTES / 1e9:g} GB allow {MEMORY_BYTES / per:,.0f}")


if __name__ == "__main__":
    main()
