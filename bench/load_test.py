"""Load test: N sessions at once, each moving a slider on the Pipeline page, against a running dashboard.

    python bench/load_test.py                         # starts the app as the Dockerfile does; 20 sessions
    python bench/load_test.py --url http://host:8501 --sessions 20 --moves 10 --clients browser

--clients ws (default): each session is a WebSocket client speaking Streamlit's own protocol (the
  protobuf messages the browser sends): it opens /pipeline, then sends the slider change a browser
  would send and waits until the server has finished the rerun and sent the new makespan. This
  measures the server, whose CPU the clients barely touch.
--clients browser: each session is a browser context in one Chromium that presses an arrow key on
  the p slider and waits for the makespan on screen to change: what a student sees, but on a 2-core
  machine the 20 tabs re-rendering their charts compete with the server for the same CPUs.
Reports errors (must be 0) and latency percentiles.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import CHROMIUM, CHROMIUM_ARGS, free_port, serve, server_command  # noqa: E402

SLIDER = ".st-key-p input[type=range]"
METRIC = "[data-testid='stMetricValue']"


async def session(browser, url: str, moves: int, latencies: list[float], errors: list[str]) -> None:
    """One student: a browser context of its own (its own Streamlit session) moving the slider."""
    context = await browser.new_context()
    try:
        page = await context.new_page()
        page.set_default_timeout(60_000)
        await page.goto(url)
        await page.wait_for_selector(METRIC)
        slider = page.locator(SLIDER).first
        for i in range(moves):
            before = await page.locator(METRIC).first.inner_text()
            t0 = time.perf_counter()
            await slider.press("ArrowRight" if i % 2 == 0 else "ArrowLeft")
            await page.wait_for_function(
                "([sel, old]) => { const e = document.querySelector(sel); return e && e.innerText !== old; }",
                arg=[METRIC, before])
            latencies.append(time.perf_counter() - t0)
    except Exception as exc:  # counted, not raised: the report says how many sessions failed and why
        errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    finally:
        await context.close()


async def _run(url: str, sessions: int, moves: int) -> tuple[list[float], list[str], float]:
    from playwright.async_api import async_playwright

    latencies: list[float] = []
    errors: list[str] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        t0 = time.perf_counter()
        await asyncio.gather(*(session(browser, url, moves, latencies, errors) for _ in range(sessions)))
        wall = time.perf_counter() - t0
        await browser.close()
    return latencies, errors, wall


async def ws_session(url: str, moves: int, latencies: list[float], errors: list[str], think: float = 0.0) -> None:
    """One session over the WebSocket: open the page, then move p up and down `moves` times."""
    import websockets
    from streamlit.proto import BackMsg_pb2, ForwardMsg_pb2

    async def rerun(ws, widget_id: str | None = None, value: float | None = None) -> tuple[str | None, str]:
        msg = BackMsg_pb2.BackMsg()
        msg.rerun_script.query_string = ""
        msg.rerun_script.page_name = "pipeline"
        if widget_id is not None:
            state = msg.rerun_script.widget_states.widgets.add()
            state.id = widget_id
            state.double_array_value.data.append(value)
        await ws.send(msg.SerializeToString())
        slider, makespan = None, ""
        while True:
            fm = ForwardMsg_pb2.ForwardMsg()
            fm.ParseFromString(await ws.recv())
            kind = fm.WhichOneof("type")
            if kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                el = fm.delta.new_element
                if el.WhichOneof("type") == "slider" and el.slider.id.endswith("-p"):
                    slider = el.slider.id
                elif el.WhichOneof("type") == "metric" and el.metric.label == "Makespan":
                    makespan = el.metric.body
            elif kind == "script_finished" and fm.script_finished == ForwardMsg_pb2.ForwardMsg.FINISHED_SUCCESSFULLY:
                return slider, makespan

    try:
        async with websockets.connect(url.replace("http", "ws", 1).rsplit("/", 1)[0] + "/_stcore/stream",
                                      subprotocols=["streamlit"], max_size=None) as ws:
            slider, makespan = await rerun(ws)
            if slider is None:
                raise RuntimeError("no p slider on the page")
            for i in range(moves):
                await asyncio.sleep(think * (0.5 + random.random()))  # a student looks before moving again
                t0 = time.perf_counter()
                _, new = await rerun(ws, slider, 5.0 if i % 2 == 0 else 4.0)
                latencies.append(time.perf_counter() - t0)
                if new == makespan:
                    raise RuntimeError(f"makespan did not change ({new})")
                makespan = new
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")


async def _run_ws(url: str, sessions: int, moves: int, think: float) -> tuple[list[float], list[str], float]:
    latencies: list[float] = []
    errors: list[str] = []
    t0 = time.perf_counter()
    await asyncio.gather(*(ws_session(url, moves, latencies, errors, think) for _ in range(sessions)))
    return latencies, errors, time.perf_counter() - t0


def run(url: str, sessions: int, moves: int, clients: str = "ws", think: float = 0.0) -> dict:
    if clients == "ws":
        latencies, errors, wall = asyncio.run(_run_ws(url, sessions, moves, think))
    else:
        latencies, errors, wall = asyncio.run(_run(url, sessions, moves))
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3 if ordered else float("nan")

    return {"clients": clients, "think_s": think, "sessions": sessions, "moves": len(latencies), "errors": len(errors),
            "error_samples": errors[:3],
            "p50_ms": pct(0.50), "p95_ms": pct(0.95), "max_ms": pct(1.0),
            "mean_ms": statistics.mean(ordered) * 1e3 if ordered else float("nan"), "wall_s": wall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="a running dashboard; default: start one as the Dockerfile does")
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--moves", type=int, default=10)
    ap.add_argument("--clients", choices=("ws", "browser"), default="ws")
    ap.add_argument("--think", type=float, default=0.0,
                    help="mean pause between a session's moves, seconds (ws clients; 0 = back to back)")
    args = ap.parse_args()
    if args.url:
        result = run(args.url.rstrip("/") + "/pipeline", args.sessions, args.moves, args.clients, args.think)
    else:
        with serve(server_command(free_port()), "load-test-server.log") as base:
            result = run(base + "/pipeline", args.sessions, args.moves, args.clients, args.think)
    for key, value in result.items():
        print(f"{key:>14}: {value:.1f}" if isinstance(value, float) else f"{key:>14}: {value}")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
