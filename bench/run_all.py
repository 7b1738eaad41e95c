"""Run every benchmark and print one table (docs/engine.md quotes it).

    python bench/run_all.py            # all of them
    python bench/run_all.py pipeline   # only modules whose name contains "pipeline"

Each bench/bench_*.py module exposes bench_rows() -> list of {"benchmark", "value", "unit", "target"}.
The figures are wall-clock medians on whatever machine runs this; the header says which.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("STREAMLIT_LOGGER_LEVEL", "error")  # AppTest outside a server warns on every run
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_memory import machine  # noqa: E402

from core.runtime import keep_freed_memory  # noqa: E402


def modules(filter_text: str = "") -> list[str]:
    return sorted(p.stem for p in HERE.glob("bench_*.py") if filter_text in p.stem)


def main(argv: list[str]) -> int:
    keep_freed_memory()
    names = modules(argv[0] if argv else "")
    if not names:
        print(f"no benchmark module matches {argv[0]!r}")
        return 2
    print(f"machine: {machine()}")
    print(f"{'benchmark':<92} {'value':>10} {'unit':<8} target")
    for name in names:
        t0 = time.perf_counter()
        rows = importlib.import_module(name).bench_rows()
        for r in rows:
            print(f"{r['benchmark'][:92]:<92} {r['value']:>10.2f} {r['unit']:<8} {r.get('target', '')}")
        print(f"  ({name}: {time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
