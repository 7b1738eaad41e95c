"""Benchmark: what the planner's simulation budget (core.planner.simulation.SIM_BUDGET) buys on the questions a lecturer
asks first. Each question is planned cold in a fresh process; the child reports candidates, feasible candidates,
distinct keys simulated, operations spent of the budget (schedules built and simulated), wall and CPU time, peak
resident memory (getrusage, the imports' baseline subtracted) and whether the budget ran out.

Run: python bench/bench_sim_budget.py      (about a minute; not a timed test)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = (
    "dict()",  # the Planner page's default question
    "dict(model='bloom-176b', gpu='a100-80gb', gpus=384, batch=2048)",  # BLOOM's published run (BigScience)
    "dict(model='deepseek-v3', gpu='h100-80gb', gpus=2048, batch=15360)",  # DeepSeek-V3's batch on 2,048 H100
    "dict(model='llama3-405b', gpu='h100-80gb', gpus=8192, batch=2048)",  # the README's plan example
)
CHILD = """
import json, resource, time
import core.pipeline.schedules
from core.params.planner import PlannerParams
from core.planner import plan as planner, simulation
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
q = PlannerParams(**{question})
t0, c0 = time.perf_counter(), time.process_time()
r = planner.plan(q)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({{"candidates": len(r.frame), "feasible": len(r.feasible), "keys": r.simulations,
                  "ops": r.sim_ops, "budget": simulation.SIM_BUDGET, "wall_s": wall, "cpu_s": cpu,
                  "bytes": peak - base, "ran_out": any("simulation budget" in n for n in r.notes)}}))
"""


def measure(question: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", CHILD.format(question=question)], capture_output=True, text=True,
                         env=env, check=True, cwd=ROOT)
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "question": question}


def main() -> None:
    for m in map(measure, QUESTIONS):
        print(f"{m['candidates']:>7,} candidates {m['feasible']:>6,} feasible {m['keys']:>5,} keys "
              f"{m['ops'] / 1e6:6.2f} M of {m['budget'] / 1e6:g} M ops  {m['wall_s']:5.2f} s wall "
              f"{m['cpu_s']:5.2f} s CPU {m['bytes'] / 1e6:6.0f} MB  ran out: {m['ran_out']}   {m['question']}",
              flush=True)


if __name__ == "__main__":
    main()
