"""Classroom load benchmark: a class opens distinct shared links at once, in real browser pages, against the server
the Dockerfile starts. A benchmark script, not a timed test (tests/test_classroom_smoke.py runs 3 sessions).

    python bench/classroom.py                      # 40 sessions, distinct links over the four pages, at once
    python bench/classroom.py --sessions 12 --window 5
    python bench/classroom.py --planner-links 24   # memory: 24 distinct planner links, one after another, closed
    python bench/classroom.py --costly             # one costly planner link while another student opens a page

The server is the Dockerfile's CMD run directly (tests.conftest.server_command: same flags, a free port). Every
session is a browser context of its own in one headless Chromium (Debian's, /usr/bin/chromium), so each is its
own Streamlit session. Per session: the time from navigation to the page's first number on screen (a metric with
a value; on the Lecture page, a revealed answer's text), or the error. The server's resident memory (VmRSS of its
process and its worker processes) is sampled every 0.2 s: the peak during the run, and the settled value once every
page is closed and the server has been idle for --settle seconds. On a 2-core machine the 40 browser pages compete
with the server for the same CPUs, so the times are what a class would see with the server on one of its own
laptops at worst.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ws_client import error_text, first_element  # noqa: E402
from core.cli import spec_args  # noqa: E402
from tests.conftest import CHROMIUM, CHROMIUM_ARGS, free_port, serve, server_command  # noqa: E402

TIMEOUT_S = 120.0
WORKERS = "auto"  # the server's DASHBOARD_WORKERS (--workers): auto as deployed, 0 = everything in one process
# True once the page shows its first number: a metric with a value in the main area, or a revealed answer.
FIRST_NUMBER = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  if (!main) return false;
  for (const v of main.querySelectorAll("[data-testid='stMetricValue']"))
    if (v.innerText.trim() && /[0-9]/.test(v.innerText)) return true;
  for (const d of main.querySelectorAll("[data-testid='stExpanderDetails'] [data-testid='stMarkdownContainer']"))
    if (/m = [0-9]/.test(d.innerText)) return true;
  return false;
}"""


@dataclass(frozen=True)
class Link:
    page: str
    path: str  # URL path and query


def links(n: int) -> list[Link]:
    """n distinct shared links, the four pages in turn, each page's parameters varied (no two alike)."""
    pipeline = (f"/pipeline?schedule={s}&p={p}&m={m}" for m, p, s in itertools.product(
        (8, 12, 16, 24, 32, 48), (4, 6, 8), ("1f1b", "zb-h1", "interleaved", "gpipe", "dualpipev")))
    zero = (f"/zero?model={mdl}&nd={nd}" for nd, mdl in itertools.product(
        (8, 16, 32, 64, 128, 256, 512, 1024), ("llama3-70b", "gpt3-175b", "llama3-8b", "mixtral-8x7b")))
    planner = (f"/planner?model={mdl}&gpus={g}" for g, mdl in itertools.product(
        (64, 128, 256, 512, 1024, 2048), ("llama3-70b", "gpt3-175b", "llama3-8b", "llama3-405b")))
    lecture = (f"/lecture?e1_ans=true&e1_p={p}&e1_idle={idle}" for idle, p in itertools.product(
        (10.0, 5.0, 20.0, 2.5), range(4, 16)))
    gens = itertools.cycle([("pipeline", pipeline), ("zero", zero), ("planner", planner), ("lecture", lecture)])
    return [Link(page, next(gen)) for page, gen in itertools.islice(gens, n)]


def planner_links(n: int) -> list[Link]:
    """n distinct Planner links (model x cluster size x micro-batch sizes), as a class exploring the planner."""
    combos = itertools.product(("llama3-70b", "gpt3-175b", "llama3-8b", "llama3-405b", "mixtral-8x7b", "bloom-176b"),
                               (128, 512, 1024, 2048), ("1,2", "1,2,4"))
    return [Link("planner", f"/planner?model={m}&gpus={g}&mb_sizes={b}") for m, g, b in itertools.islice(combos, n)]


# --- the server's memory ----------------------------------------------------------------------------------------

def server_pid(port: int) -> int:
    """The process serving `port` (started by tests.conftest.serve: its command line ends with the port flag)."""
    flag = f"--server.port={port}".encode()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                args = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if flag in args and b"streamlit" in b" ".join(args):
                return int(proc.name)
    raise RuntimeError(f"no streamlit process with {flag.decode()}")


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU seconds every process of the machine has used (the browser's, the server's, any other job's)."""
    user, nice, system, _idle, _iowait, irq, softirq = map(int, Path("/proc/stat").read_text().split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def group(pid: int) -> list[Path]:
    """/proc entries of the server and its worker processes (its process group: ui/shared/workers.py's pool and
    fork server; the server was started in a session of its own)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.parent.name) == pid or int(stat.read_text().rsplit(")", 1)[1].split()[2]) == pid:
                found.append(stat.parent)
        except (OSError, ValueError, IndexError):
            continue
    return found


def rss_mb(pid: int) -> float:
    """Resident memory of the server and its worker processes, summed: pages the workers share with the fork
    server count once per process, so an upper bound."""
    total, found = 0.0, False
    for proc in group(pid):
        try:
            for line in (proc / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total, found = total + int(line.split()[1]) / 1024, True
        except OSError:
            continue
    return total if found else float("nan")


class Sampler:
    """The server's RSS every `every` seconds in a thread: peak and the last value; its CPU seconds and the wall
    time over the run (cpu / wall near 1: the server, one Python thread at a time, was the bottleneck)."""

    def __init__(self, pid: int, every: float = 0.2):
        self.pid, self.every, self.peak, self.last, self.processes = pid, every, 0.0, 0.0, 0
        self.cpu = self.wall = self.busy = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.last = rss_mb(self.pid)
            self.peak = max(self.peak, self.last)
            self.processes = max(self.processes, len(group(self.pid)))
            self._stop.wait(self.every)

    def __enter__(self) -> Sampler:
        self._t0, self._cpu0, self._busy0 = time.perf_counter(), cpu_s(self.pid), machine_busy_s()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.wall, self.cpu = time.perf_counter() - self._t0, cpu_s(self.pid) - self._cpu0
        self.busy = machine_busy_s() - self._busy0

    def report(self) -> dict:
        return {"rss_peak_mb": round(self.peak, 1), "processes_peak": self.processes,
                "server_cpu_s": round(self.cpu, 1), "machine_cpu_s": round(self.busy, 1), "wall_s": round(self.wall, 1)}


def settled_rss(pid: int, seconds: float) -> float:
    """RSS after `seconds` of idle (the server's idle-time trim runs within them)."""
    time.sleep(seconds)
    return rss_mb(pid)


# --- the students -----------------------------------------------------------------------------------------------

async def student(browser, base: str, link: Link, delay: float = 0.0) -> dict:
    """One student: a fresh browser context (its own Streamlit session) opens the link; the time to its first
    number is the page's own clock (performance.now(): from navigation start), or the error."""
    await asyncio.sleep(delay)
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = await context.new_page()
        await page.goto(base + link.path, timeout=TIMEOUT_S * 1000)
        await page.wait_for_function(FIRST_NUMBER, timeout=TIMEOUT_S * 1000, polling=100)
        first = await page.evaluate("() => performance.now() / 1000")
        errors = await page.locator("[data-testid='stException']").count()
        return {"page": link.page, "path": link.path, "first_s": first,
                "error": "exception shown on the page" if errors else None}
    except Exception as exc:  # counted, not raised: the report says how many sessions failed and why
        return {"page": link.page, "path": link.path, "first_s": None,
                "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"}
    finally:
        await context.close()


async def student_ws(base: str, link: Link, delay: float = 0.0) -> dict:
    """One student as the server sees it (--clients ws, bench/ws_client.py): the time runs until the first number
    arrives (a metric with a digit, or a revealed answer)."""
    import re

    def first_number(el) -> bool:
        kind = el.WhichOneof("type")
        return (kind == "metric" and bool(re.search(r"[0-9]", el.metric.body))) or (
            kind == "markdown" and bool(re.search(r"m = [0-9]", el.markdown.body)))

    await asyncio.sleep(delay)
    try:
        seconds, _ = await first_element(base, link.path, first_number, TIMEOUT_S)
    except Exception as exc:
        return {"page": link.page, "path": link.path, "first_s": None, "error": error_text(exc)}
    return {"page": link.page, "path": link.path, "first_s": seconds, "error": None}


async def _with_browser(work):
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            return await work(browser)
        finally:
            await browser.close()


async def _gather(coros):
    return await asyncio.gather(*coros)


def percentile(xs: list[float], q: float) -> float | None:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def summary(results: list[dict]) -> dict:
    firsts = [r["first_s"] for r in results if r["first_s"] is not None]
    by_page = {}
    for page in sorted({r["page"] for r in results}):
        xs = [r["first_s"] for r in results if r["page"] == page and r["first_s"] is not None]
        by_page[page] = {"p50_s": statistics.median(xs) if xs else None, "max_s": max(xs) if xs else None}
    return {"sessions": len(results), "errors": sum(r["error"] is not None for r in results),
            "error_samples": [f"{r['path']}: {r['error']}" for r in results if r["error"]][:5],
            "p50_s": statistics.median(firsts) if firsts else None, "p95_s": percentile(firsts, 0.95),
            "max_s": max(firsts) if firsts else None, "by_page": by_page}


# --- the three runs ---------------------------------------------------------------------------------------------

LECTURER = [*(Link(page, f"/{page}") for page in ("pipeline", "zero", "planner")),
            Link("lecture", "/lecture?e1_ans=true")]


def classroom(sessions: int, window: float, settle: float, warm: bool = True, clients: str = "browser") -> dict:
    """`sessions` distinct links opened within `window` seconds (0: all at once) against a fresh server. With
    `warm`, the lecturer first opens each page once at its defaults (as before sharing the links): the class then
    meets a started server (its modules loaded) whose caches hold none of the class's links."""
    chosen = links(sessions)
    delays = [window * i / max(1, sessions - 1) for i in range(sessions)] if window else [0.0] * sessions
    with serve(server_command(port := free_port()), "bench-classroom-server.log", WORKERS) as base:
        pid = server_pid(port)
        if warm:
            asyncio.run(_with_browser(lambda b: asyncio.gather(*(student(b, base, link) for link in LECTURER))))
        start = rss_mb(pid)
        with Sampler(pid) as mem:
            if clients == "ws":
                results = asyncio.run(_gather(student_ws(base, link, d) for link, d in zip(chosen, delays,
                                                                                            strict=True)))
            else:
                results = asyncio.run(_with_browser(lambda b: asyncio.gather(
                    *(student(b, base, link, d) for link, d in zip(chosen, delays, strict=True)))))
        settled = settled_rss(pid, settle)
    return {**summary(list(results)), "clients": clients, "window_s": window, "warm": warm, "rss_start_mb": start,
            **mem.report(), "rss_settled_mb": settled, "settle_s": settle}


def planner_memory(n: int, settle: float) -> dict:
    """n distinct planner links, each opened in a page, its first number awaited, the page closed; then idle."""
    chosen = planner_links(n)
    with serve(server_command(port := free_port()), "bench-classroom-planner.log", WORKERS) as base:
        pid = server_pid(port)
        start = rss_mb(pid)

        async def one_by_one(browser):
            out = []
            for link in chosen:
                out.append(await student(browser, base, link))
                out[-1]["rss_mb"] = rss_mb(pid)
            return out

        with Sampler(pid) as mem:
            results = asyncio.run(_with_browser(one_by_one))
        settled = settled_rss(pid, settle)
    return {**summary(results), "rss_start_mb": start, **mem.report(),
            "rss_after_each_mb": [round(r["rss_mb"]) for r in results], "rss_settled_mb": settled,
            "settle_s": settle}


COSTLY = "/planner?model=deepseek-v3&gpus=61440&seq=1048576&mb_sizes=1,2,3,4,5,6,7,8&offload=all"  # issue 24's
# A question as large as the bounded planner lets through, which the unbounded one also answers (15 s, 1.7 GB on the
# CLI): distinct variants of it are what several students asking large questions at once look like.
LARGE = "/planner?model=deepseek-v3&gpus=16384&seq=131072&mb_sizes={mb}&offload=all"
LARGE_MB = ("1,2,3,4", "1,2,3,5", "1,2,4,6", "1,3,4,8")
OTHER = Link("zero", "/zero?model=llama3-70b&nd=96")


def costly(heavy: int, other_delay: float = 3.0, link: str = COSTLY) -> dict:
    """`heavy` costly planner links opened at once (issue 24's, or with heavy > 1 distinct large questions), and
    `other_delay` s later another student's page: every time, and the server's peak memory."""
    paths = [link] if heavy == 1 else [LARGE.format(mb=mb) for mb in itertools.islice(itertools.cycle(LARGE_MB),
                                                                                          heavy)]
    with serve(server_command(port := free_port()), "bench-classroom-costly.log", WORKERS) as base:
        pid = server_pid(port)
        with Sampler(pid) as mem:
            *heavies, other = asyncio.run(_with_browser(lambda b: asyncio.gather(
                *(student(b, base, Link("planner", path)) for path in paths), student(b, base, OTHER, other_delay))))
        settled = settled_rss(pid, 15.0)
    return {"costly": heavies, "other": other, "other_after_s": other_delay, **mem.report(),
            "rss_settled_mb": settled}


def machine() -> dict:
    load = os.getloadavg()
    return {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
            "load_1min": round(load[0], 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=40)
    ap.add_argument("--window", type=float, default=0.0, help="seconds over which the links are opened (0: at once)")
    ap.add_argument("--settle", type=float, default=30.0, help="idle seconds before the settled memory is read")
    ap.add_argument("--planner-links", type=int, default=0, metavar="N", help="the memory run instead")
    ap.add_argument("--costly", type=int, default=0, metavar="N",
                    help="the costly-link run instead: issue 24's link (N = 1) or N distinct large questions")
    ap.add_argument("--link", default=COSTLY, help="with --costly 1: the costly link (path and query)")
    ap.add_argument("--clients", choices=("browser", "ws"), default="browser",
                    help="browser: a Chromium page per student (default); ws: Streamlit's WebSocket protocol, what the "
                         "server does without the 40 pages' rendering on the same machine")
    ap.add_argument("--workers", default="auto", help="the server's worker processes (DASHBOARD_WORKERS: auto, or 0 "
                    "to 64; 0 runs every page's work in the serving process, as before ui/shared/workers.py)")
    spec_args.switch(ap, "--cold", help="no lecturer's visit first: the class meets a cold server")
    spec_args.switch(ap, "--json", help="print the figures as JSON")
    args = ap.parse_args(argv)
    global WORKERS
    WORKERS = args.workers
    if not Path(CHROMIUM).exists():
        print(f"needs Chromium at {CHROMIUM}", file=sys.stderr)
        return 2
    before = machine()
    if args.costly:
        out = costly(args.costly, link=args.link)
    elif args.planner_links:
        out = planner_memory(args.planner_links, args.settle)
    else:
        out = classroom(args.sessions, args.window, args.settle, warm=not args.cold, clients=args.clients)
    out["machine"] = {**before, "load_1min_after": round(os.getloadavg()[0], 2)}
    print(json.dumps(out, indent=2, default=str) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
    return 1 if out.get("errors") else 0


if __name__ == "__main__":
    raise SystemExit(main())
