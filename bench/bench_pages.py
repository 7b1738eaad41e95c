"""Benchmark: the dashboard pages as the server runs them: rerun time after an input change, payload sizes.

Reruns are measured with Streamlit's AppTest (the same script run the server does, without the browser).
Each timed rerun changes a cost slightly (t_f = 1.001, 1.002, ...) so neither st.cache_data nor
core.pipeline.result's cache can answer it: the numbers are for a real recomputation.
Payload = the plotly figure JSON Streamlit sends to the browser (plotly.io.to_json), in bytes.

Each page adds one function returning rows {benchmark, value, unit, target} to PAGES.
Run: python bench/bench_pages.py [page ...]
"""

from __future__ import annotations

import pickle
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_memory import machine  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from core.params.pipeline import SCHEDULE_NAMES  # noqa: E402
from core.pipeline.result import PipelineParams  # noqa: E402
from core.pipeline.view import pipeline_view  # noqa: E402
from ui.shared import layout  # noqa: E402

# The script's own work: the pauses that let a browser paint the headline first (ui.shared.layout.first_paint) are
# measured where they act, by bench/bench_browser.py.
layout.FIRST_PAINT_S = layout.RERUN_PAINT_S = 0.0

LARGEST = {"schedule": "interleaved", "p": "64", "m": "1024", "v": "8"}  # 1,048,576 ops: the cap
REPEATS = 5


def _app(page: str, query: dict) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / f"{page}.py"), default_timeout=120)
    at.query_params.update(query)
    at.run()
    if at.exception:
        raise RuntimeError(f"{page} {query}: {at.exception[0].message}")
    return at


def _timed(at: AppTest, change: Callable[[AppTest, int], None], repeats: int = REPEATS) -> float:
    """Median ms of `repeats` reruns, each after change(at, i)."""
    times = []
    for i in range(repeats):
        change(at, i)
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
        if at.exception:
            raise RuntimeError(at.exception[0].message)
    return statistics.median(times) * 1e3


def _new_tf(at: AppTest, i: int) -> None:
    at.number_input(key="tf").set_value(round(1.001 + 0.001 * i, 3))


def _payload(at: AppTest) -> int:
    return sum(len(c.proto.spec) for c in at.get("plotly_chart"))


def _row(name: str, value: float, unit: str, target: str) -> dict:
    return {"benchmark": name, "value": value, "unit": unit, "target": target}


def pipeline_rows() -> list[dict]:
    rows = []
    t0 = time.perf_counter()
    at = _app("pipeline", {})
    rows.append(_row("pipeline: first script run, defaults", (time.perf_counter() - t0) * 1e3, "ms", ""))
    rows.append(_row("pipeline: rerun after a cost change, defaults (1F1B p=4 m=8)", _timed(at, _new_tf), "ms",
                     "< 200 ms"))
    rows.append(_row("pipeline: page payload, defaults (all charts)", _payload(at) / 1e3, "KB", ""))
    at = _app("pipeline", {"schedule": "gpipe", "p": "16", "m": "90"})
    rows.append(_row("pipeline: page payload, 2,880 bars (the most drawn op by op)", _payload(at) / 1e3, "KB",
                     "< 2000 KB"))

    at = _app("pipeline", LARGEST)
    rows.append(_row("pipeline: rerun after a cost change, largest (1,048,576 ops)",
                     _timed(at, _new_tf, 3), "ms", "< 1000 ms"))

    def new_m(at: AppTest, i: int) -> None:  # a new schedule structure every time (build + compile + time)
        at.number_input(key="m").set_value(1024 - 64 * (i + 1))

    rows.append(_row("pipeline: rerun after an m change, largest (new structure, ~1M ops)", _timed(at, new_m, 3),
                     "ms", "< 1000 ms"))
    at = _app("pipeline", LARGEST)

    def new_cursor(at: AppTest, i: int) -> None:
        at.slider(key="cursor").set_value(10.0 + 10 * i)

    rows.append(_row("pipeline: rerun after a cursor move, largest (cached view)", _timed(at, new_cursor), "ms", ""))
    rows.append(_row("pipeline: page payload, largest (interleaved p=64 m=1024 v=8)", _payload(at) / 1e3, "KB",
                     "< 2000 KB"))
    at = _app("pipeline", {**LARGEST, "compare": [s for s in SCHEDULE_NAMES if s != "interleaved"]})
    rows.append(_row("pipeline: rerun after a cost change, compare 9 schedules, p=64 m=1024 v=8",
                     _timed(at, _new_tf, 3), "ms", ""))
    rows.append(_row("pipeline: page payload, compare 9 schedules, p=64 m=1024 v=8", _payload(at) / 1e3, "KB",
                     "< 2000 KB"))

    params = PipelineParams(schedule="interleaved", p=64, m=1024, v=8, tf=0.999)
    t0 = time.perf_counter()
    view = pipeline_view(params)
    rows.append(_row("pipeline: core view, largest, cold (simulate + aggregate)", (time.perf_counter() - t0) * 1e3,
                     "ms", ""))
    rows.append(_row("pipeline: cached view size, largest (pickled)", len(pickle.dumps(view)) / 1e3, "KB", ""))
    return rows


ZERO_LARGEST = {"act": "true", "schedule": "interleaved", "p": "64", "m": "1024", "v": "8", "nd": str(1 << 20),
                "model": "megatron-1t", "tab": "Activations"}
LECTURE_REVEALED = {k: "true" for k in ("e1_ans", "e2_ans", "e3_ans", "e4_ans")}


def zero_rows() -> list[dict]:
    rows = []
    t0 = time.perf_counter()
    at = _app("zero", {})
    rows.append(_row("zero: first run, defaults (cold process: imports included)", (time.perf_counter() - t0) * 1e3,
                     "ms", ""))

    def new_nd(at: AppTest, i: int) -> None:  # a new N_d each time: the cached view cannot answer
        at.number_input(key="nd").set_value(65 + i)

    rows.append(_row("zero: rerun after an N_d change, defaults (7.5B, all stages)", _timed(at, new_nd), "ms",
                     "< 200 ms"))
    rows.append(_row("zero: page payload, defaults (bars, N_d curve, FSDP)", _payload(at) / 1e3, "KB", ""))
    at = _app("zero", ZERO_LARGEST)

    def new_m(at: AppTest, i: int) -> None:  # activations need a new ~1M-op simulation each time
        at.number_input(key="m").set_value(1024 - 64 * (i + 1))

    rows.append(_row("zero: rerun after an m change, largest (activations: interleaved p=64 m~1024 v=8, N_d=2^20)",
                     _timed(at, new_m, 3), "ms", "< 1000 ms"))
    rows.append(_row("zero: page payload, largest", _payload(at) / 1e3, "KB", ""))
    at = _app("zero", {"tab": "Equivalence", "ranks": "16", "steps": "100", "size": "1000"})

    def new_steps(at: AppTest, i: int) -> None:
        at.slider(key="steps").set_value(99 - i)

    rows.append(_row("zero: rerun after a demo change, largest equivalence demo (16 ranks x 100 steps x 1,000)",
                     _timed(at, new_steps, 3), "ms", "< 1000 ms"))
    return rows


def lecture_rows() -> list[dict]:
    rows = []
    t0 = time.perf_counter()
    at = _app("lecture", LECTURE_REVEALED)
    rows.append(_row("lecture: first run, four answers revealed (cold process)", (time.perf_counter() - t0) * 1e3,
                     "ms", ""))

    def new_p(at: AppTest, i: int) -> None:
        at.slider(key="e1_p").set_value(9 + i)

    rows.append(_row("lecture: rerun after a slider change, defaults (four answers revealed)", _timed(at, new_p),
                     "ms", "< 200 ms"))
    rows.append(_row("lecture: page payload, four answers revealed", _payload(at) / 1e3, "KB", ""))
    at = _app("lecture", LECTURE_REVEALED | {"e1_p": "64", "e1_idle": "1", "e2_psi": "2000", "e2_mem": "8",
                                             "e3_p": "32", "e3_m": "256", "e4_p": "64", "e4_m": "1024"})

    def new_e3_m(at: AppTest, i: int) -> None:
        at.slider(key="e3_m").set_value(255 - i)

    rows.append(_row("lecture: rerun after a slider change, largest exercises (GPipe/1F1B p=32 m=256, m to 1,024)",
                     _timed(at, new_e3_m, 3), "ms", "< 1000 ms"))
    rows.append(_row("lecture: page payload, largest exercises", _payload(at) / 1e3, "KB", ""))
    at = _app("lecture", {"part": "Quiz", "q_p": "64", "q_m": "512", **{f"q{i}_ans": "true" for i in range(1, 6)}})

    def new_q_m(at: AppTest, i: int) -> None:
        at.slider(key="q_m").set_value(511 - i)

    rows.append(_row("lecture: rerun after a slider change, quiz at p=64 m=512 (GPipe and 1F1B at m and 2m)",
                     _timed(at, new_q_m, 3), "ms", "< 1000 ms"))
    return rows


def planner_rows() -> list[dict]:
    """Planner: an assumption change re-scores every candidate (simulations stay cached)."""

    def new_eff(at: AppTest, i: int) -> None:
        at.number_input(key="eff").set_value(round(0.601 + 0.001 * i, 3))

    t0 = time.perf_counter()
    at = _app("planner", {})
    first = (time.perf_counter() - t0) * 1e3
    rows = [_row("planner: first run, defaults (GPT-3 175B, 1,024 H100, cold simulations)", first, "ms", ""),
            _row("planner: rerun after an assumption change, defaults", _timed(at, new_eff), "ms", "< 200 ms"),
            _row("planner: page payload, defaults (step time vs memory chart)", _payload(at) / 1e3, "KB", "")]
    largest = {"gpus": "65536", "mb_sizes": "1,2,3,4,5,6,7,8", "rows": "1000", "batch": "65536"}
    t0 = time.perf_counter()
    at = _app("planner", largest)
    first = (time.perf_counter() - t0) * 1e3
    rows += [_row("planner: first run, largest (G 65,536, 8 micro-batch sizes, 1,000 rows)", first, "ms", ""),
             _row("planner: rerun after an assumption change, largest", _timed(at, new_eff), "ms", "< 1000 ms"),
             _row("planner: page payload, largest", _payload(at) / 1e3, "KB", "< 2000 KB")]
    return rows


PAGES: dict[str, Callable[[], list[dict]]] = {"pipeline": pipeline_rows, "zero": zero_rows,
                                              "lecture": lecture_rows, "planner": planner_rows}


def bench_rows(pages: list[str] | None = None) -> list[dict]:
    return [row for name in (pages or list(PAGES)) for row in PAGES[name]()]


def main() -> None:
    print(machine())
    for r in bench_rows(sys.argv[1:] or None):
        print(f"{r['benchmark']:<100} {r['value']:>10.1f} {r['unit']:<4} {r['target']}")


if __name__ == "__main__":
    main()
