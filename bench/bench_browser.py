"""Benchmark: a shared link and a slider step in a real Chromium, side by side with a bare Streamlit page.

    python bench/bench_browser.py                  # 5 repetitions, the three links of issue 11, ratios
    python bench/bench_browser.py --reps 9 --only pipeline
    python bench/bench_browser.py --classroom 40   # also: 40 links opened within 10 s against one server, p95

The floor is bench/apps/bare_page.py (one URL-bound slider and one st.metric), served by a second server
started in the same run; the dashboard runs as the Dockerfile's CMD. A second floor, bench/apps/bare_plotly.py
(the same page plus one three-bar Plotly chart), shows what the chart library alone costs a page; a third,
bench/apps/sized_page.py (the Pipeline or ZeRO page's kinds and numbers of elements, nothing computed), what
Streamlit alone costs a page that size. All are measured in one Chromium, interleaved repetition by repetition,
so machine load drifts on all alike: the ratios are what to quote, the absolute times depend on the machine.

Per link, in a fresh browser context (cold HTTP cache, a new Streamlit session), times from navigation
start (the page's own performance clock, so playwright's overhead is not in them):
- first number: the first metric named `label` is on screen with a value;
- whole page: the script has finished, no skeleton is left and every Plotly chart has drawn its SVG;
- step: a keyboard step on the slider (or a new value typed into a number box, then Enter) until that metric's
  value changes; compared with the bare page's step of the same widget kind (its slider, or its number box).
  Each link takes --steps steps (3), each once the page has been quiet for half a second: one step per
  load left the medians at the mercy of a few samples (0.07 to 0.19 s on the same page in one run).
The goal (issue 11) is first <= 1.3 x the floor's, whole <= 2 x, step <= 1.3 x the floor's step + core time,
where core time is the core call for the stepped inputs (uncached, in a fresh process).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ws_client import error_text, first_element  # noqa: E402
from core.cli import spec_args  # noqa: E402
from tests.conftest import CHROMIUM, CHROMIUM_ARGS, free_port, serve, server_command  # noqa: E402

BARE_APP = ROOT / "bench" / "apps" / "bare_page.py"
PLOTLY_APP = ROOT / "bench" / "apps" / "bare_plotly.py"
SIZED_APP = ROOT / "bench" / "apps" / "sized_page.py"
VIEWPORT = {"width": 1400, "height": 1000}
QUIET_S = 1.5  # the page must stay drawn this long before "whole page" is taken
STEP_QUIET_S = 0.5  # and this long after a step before the next one starts
TIMEOUT_S = 90.0


@dataclass(frozen=True)
class Target:
    name: str
    path: str  # URL path and query
    label: str  # the metric whose value is "the first number"
    step: str  # CSS selector of the control a step acts on
    values: tuple[str, ...]  # a number box: the values typed in turn (a slider steps right, left, right, ...)
    core: str  # python code timing the core call for the stepped input `{value}` (sets T0 just before it)

    def step_value(self, i: int) -> str:
        """The i-th step's value: a number box types values[i] (cycling); a slider alternates right, left."""
        return self.values[i % len(self.values)]


BARE = Target("bare page", "/?n=12", "n squared", ".st-key-n input[type=range]", (), "")
# The same page's number box: the floor of a step typed into a number input (ZeRO's N_d, the Planner's G).
BARE_BOX = Target("bare-box", "/?n=12", "k doubled", ".st-key-k input", ("512", "256", "2048", "128", "4096"), "")
# The same page plus one small Plotly chart: what the chart library alone adds (bench/apps/bare_plotly.py).
PLOTLY = Target("plotly-floor", "/?n=12", "n squared", ".st-key-n input[type=range]", (), "")
# Pages with the Pipeline and ZeRO pages' kinds and numbers of elements and nothing computed: Streamlit's own
# cost for a page that size (bench/apps/sized_page.py). Keyed by the target they stand beside.
SIZED = {
    "pipeline": Target("sized-pipeline", "/?p=6", "Makespan", ".st-key-p input[type=range]", (), ""),
    "zero": Target("sized-zero", "/?of=zero&nd=1024", "Per GPU", ".st-key-nd input",
                   ("512", "256", "2048", "128", "4096", "96", "8192", "48", "384", "768", "1536", "3072", "192",
                    "640", "320", "24"), ""),
}
TARGETS = (
    Target("pipeline", "/pipeline?schedule=1f1b&p=6&m=12", "Makespan", ".st-key-p input[type=range]", (),
           "from core.pipeline.result import PipelineParams\n"
           "from core.pipeline.view import pipeline_view\n"
           "pipeline_view(PipelineParams(schedule='gpipe', p=4, m=8))\n"
           "T0 = time.perf_counter(); pipeline_view(PipelineParams(schedule='1f1b', p={value}, m=12))"),
    # Number boxes get a new value typed (a + click is too small a change to show in 2 digits); every step
    # types another one (16 values: 5 repetitions x 3 steps), so no step is answered by a cache.
    Target("zero", "/zero?nd=1024&unit=GiB", "ZeRO-3 per GPU", ".st-key-nd input",
           ("512", "256", "2048", "128", "4096", "96", "8192", "48", "384", "768", "1536", "3072", "192", "640",
            "320", "24"),
           "from core.params import zero_page as zp\n"
           "from core.params.memory import ZeroParams\n"
           "from core.views import zero as zv\n"
           "model, gpu = zp.PAGE['model'].default, zp.PAGE['gpu'].default\n"
           "def run(nd):\n"
           "    kw = {{'nd': nd}}\n"
           "    if model != 'custom': kw['params'] = zv.preset_params(model)\n"
           "    if gpu != 'custom': kw.update(zv.preset_gpu(gpu))\n"
           "    shape = zv.preset_shape(model) if model != 'custom' else "
           "zv.Shape(**{{k: s.default for k, s in zp.CUSTOM.items()}})\n"
           "    zv.zero_view(ZeroParams(**kw), shape, None)\n"
           "run(64)\n"
           "T0 = time.perf_counter(); run({value})"),
    Target("planner", "/planner?model=llama3-70b&gpus=64", "Step time", ".st-key-gpus input",
           ("128", "32", "256", "160", "512", "48", "96", "192", "1024", "224", "80", "112", "320", "384", "640",
            "768"),
           "from core.params.planner import PlannerParams\n"
           "from ui.planner.cache import plan_view\n"
           "plan_view.__wrapped__(PlannerParams(model='llama3-8b', gpus=8))\n"
           "T0 = time.perf_counter(); plan_view.__wrapped__(PlannerParams(model='llama3-70b', gpus={value}))"),
)

# Runs in the page before any of its scripts: marks the moments the benchmark reads.
PROBE = """
(() => {
  const b = window.__bench = {label: null, first: null, drawnAt: null, value: null, changedAt: null, t0: null};
  const visible = (e) => e && e.checkVisibility ? e.checkVisibility() : !!(e && e.offsetParent);
  const metric = () => {
    if (b.label === null) return null;
    for (const m of document.querySelectorAll("[data-testid='stMain'] [data-testid='stMetric']")) {
      const l = m.querySelector("[data-testid='stMetricLabel']");
      const v = m.querySelector("[data-testid='stMetricValue']");
      if (l && v && l.innerText.includes(b.label) && visible(v) && v.innerText.trim()) return v.innerText.trim();
    }
    return null;
  };
  const drawn = () => {
    const app = document.querySelector("[data-testid='stApp']");
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if ([...document.querySelectorAll("[data-testid='stSkeleton']")].some(visible)) return false;
    for (const c of document.querySelectorAll("[data-testid='stPlotlyChart']"))
      if (visible(c) && !c.querySelector('.main-svg')) return false;
    return metric() !== null;
  };
  const check = () => {
    scheduled = false;
    const now = performance.now();
    const v = metric();
    if (v !== null && b.first === null) b.first = now;
    if (b.t0 !== null && b.changedAt === null && v !== null && v !== b.value) b.changedAt = now;
    if (b.t0 !== null && b.changedAt === null) return;  // a step: only its number is watched (drawn() reads layout)
    if (drawn()) { if (b.drawnAt === null) b.drawnAt = now; } else b.drawnAt = null;
  };
  // checked once per frame after a change (a check reads layout, so never inside React's own work)
  let scheduled = false;
  const schedule = () => { if (!scheduled) { scheduled = true; requestAnimationFrame(check); } };
  b.arm = (label) => { b.label = label; schedule(); };
  b.startStep = () => { b.value = metric(); b.changedAt = null; b.t0 = null; };
  // the step starts when the browser dispatches the user's key or pointer event, not when playwright sends it
  for (const type of ['keydown', 'pointerdown'])
    window.addEventListener(type, () => { if (b.t0 === null && b.value !== null) b.t0 = performance.now(); }, true);
  const start = () => new MutationObserver(schedule).observe(document.documentElement,
    {subtree: true, childList: true, characterData: true, attributeFilter: ['data-test-script-state']});
  if (document.documentElement) start(); else document.addEventListener('readystatechange', start, {once: true});
  setInterval(schedule, 200);
})();
"""


@dataclass
class Sample:
    first: float | None = None
    whole: float | None = None
    steps: list[tuple[str, float]] = field(default_factory=list)  # (the input's new value, seconds to its number)
    error: str = ""


@dataclass
class Series:
    samples: list[Sample] = field(default_factory=list)

    def median(self, what: str) -> float:
        if what == "step":
            xs = [t for s in self.samples for _, t in s.steps]
        else:
            xs = [getattr(s, what) for s in self.samples if getattr(s, what) is not None]
        return statistics.median(xs) if xs else float("nan")

    def errors(self) -> list[str]:
        return [s.error for s in self.samples if s.error]


def settle(page, since_ms: float = QUIET_S * 1000) -> dict:
    """Wait until the page is drawn and has stayed drawn `since_ms` (a rerun or a late chart resets it)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        b = page.evaluate("() => ({first: window.__bench.first, drawnAt: window.__bench.drawnAt, "
                          "now: performance.now()})")
        if b["drawnAt"] is not None and b["now"] - b["drawnAt"] > since_ms:
            return b
        if time.monotonic() > deadline:
            raise TimeoutError(f"not drawn within {TIMEOUT_S:.0f} s (first number: {b['first']})")
        time.sleep(0.05)


def step(page, target: Target, i: int) -> tuple[str, float]:
    """One step of target's control (see Target.step_value); returns (new value, seconds to the new number)."""
    page.evaluate("() => window.__bench.startStep()")
    control = page.locator(target.step).first
    if control.get_attribute("type") == "range":
        control.focus()
        control.press("ArrowRight" if i % 2 == 0 else "ArrowLeft")
    else:
        control.fill(target.step_value(i))  # no key event: the step starts at Enter
        control.press("Enter")
    page.wait_for_function("() => window.__bench.changedAt !== null && window.__bench.t0 !== null")
    b = page.evaluate("() => [window.__bench.t0, window.__bench.changedAt]")
    return control.input_value(), (b[1] - b[0]) / 1e3


def load(browser, base: str, target: Target, steps: range = range(0)) -> Sample:
    """Open target's link in a fresh context; measure first number, whole page and the steps `steps` (indices
    for Target.step_value), each started once the page has been drawn and quiet for STEP_QUIET_S."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_S * 1000)
    sample = Sample()
    try:
        page = context.new_page()
        page.add_init_script(PROBE)
        page.goto(base + target.path, wait_until="commit")
        page.wait_for_function("() => window.__bench !== undefined")
        page.evaluate("label => window.__bench.arm(label)", target.label)
        b = settle(page)
        sample.first, sample.whole = b["first"] / 1e3, b["drawnAt"] / 1e3
        for i in steps:
            sample.steps.append(step(page, target, i))
            settle(page, STEP_QUIET_S * 1000)
    except Exception as exc:  # reported, not raised: one bad sample must not hide the others
        sample.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    finally:
        context.close()
    return sample


def core_seconds(target: Target, value: str, runs: int = 1) -> float:
    """Wall time of the core call for the stepped input `value`, in a fresh interpreter (nothing cached)."""
    if not target.core:
        return 0.0
    code = "import time\n" + target.core.format(value=value) + "\nprint(time.perf_counter() - T0)"
    times = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                             env={"STREAMLIT_LOGGER_LEVEL": "error", "PATH": "/usr/bin:/bin"})
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def side_by_side(servers: dict[str, str], bare: str, targets: tuple[Target, ...], reps: int,
                 plotly: str | None = None, steps: int = 3, sized: str | None = None) -> dict[str, Series]:
    """Interleave: each repetition opens the bare page, then every (server, target) in a shuffled order.

    servers: {label: base URL}, e.g. {"": app} or {"before": baseline, "after": app}; a result is keyed
    "<target> <label>".
    """
    from playwright.sync_api import sync_playwright

    runs = [(f"{t.name} {label}".strip(), url, t) for t in targets for label, url in servers.items()]
    if plotly is not None:
        runs.insert(0, (PLOTLY.name, plotly, PLOTLY))
    if sized is not None:
        runs[:0] = [(SIZED[t.name].name, sized, SIZED[t.name]) for t in targets if t.name in SIZED]
    runs.insert(0, (BARE_BOX.name, bare, BARE_BOX))
    results = {name: Series() for name in [BARE.name, *(r[0] for r in runs)]}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            load(browser, bare, BARE)  # warm-up, not counted: the servers' first imports and caches
            for _, url, t in runs:
                load(browser, url, t)
            for rep in range(reps):
                order = list(runs)
                random.shuffle(order)
                for name, url, t in [(BARE.name, bare, BARE), *order]:
                    sample = load(browser, url, t, range(rep * steps, (rep + 1) * steps))
                    results[name].samples.append(sample)
                    print(f"  rep {rep + 1}/{reps} {name:<18} first {sample.first or float('nan'):5.2f} s  "
                          f"whole {sample.whole or float('nan'):5.2f} s  steps "
                          + " ".join(f"{x:.2f}" for _, x in sample.steps) + " s"
                          + (f"  {sample.error}" if sample.error else ""), flush=True)
        finally:
            browser.close()
    return results


def report(results: dict[str, Series], cores: dict[tuple[str, str], float]) -> list[dict]:
    """Print the table and return run_all rows. A step's ratio is taken per sample (its own core time), then
    the median of those is reported; `core` is the median core time of the values stepped to."""
    floor = results[BARE.name]
    f_first, f_whole, f_step = floor.median("first"), floor.median("whole"), floor.median("step")
    rows = [{"benchmark": "bare page: first number / whole page / slider step (median, s)",
             "value": f_first, "unit": "s", "target": f"whole {f_whole:.2f} s, step {f_step:.2f} s"}]
    p_whole = results[PLOTLY.name].median("whole") if PLOTLY.name in results else float("nan")
    # a step typed into a number box is measured against the bare page's number box, a slider against its slider
    f_box = results[BARE_BOX.name].median("step") if BARE_BOX.name in results else f_step
    print(f"\n{'link':<52} {'first':>6} {'x floor':>7} {'whole':>6} {'x floor':>7} {'x plotly':>8} {'x sized':>7} "
          f"{'step':>5} {'core':>6} {'x (floor step + core)':>21} {'x (sized step + core)':>21}")
    print(f"{'bare page ' + BARE.path:<52} {f_first:6.2f} {1:7.2f} {f_whole:6.2f} {1:7.2f} {'':>8} {'':>7} "
          f"{f_step:5.2f} {0:6.3f} {1:21.2f}")
    for name, s in results.items():
        t = next((t for t in (PLOTLY, *SIZED.values(), BARE_BOX, *TARGETS) if name.split()[0] == t.name), None)
        if t is None:
            continue
        label = name[len(t.name):].strip()
        first, whole, step = s.median("first"), s.median("whole"), s.median("step")
        stepped = [x for sample in s.samples for x in sample.steps]
        core = statistics.median(cores.get((t.name, v), 0.0) for v, _ in stepped) if stepped else float("nan")
        r_first, r_whole = first / f_first, whole / f_whole
        fs = f_step if "type=range" in t.step else f_box
        r_step = statistics.median(x / (fs + cores.get((t.name, v), 0.0)) for v, x in stepped) \
            if stepped else float("nan")
        sized = results.get(SIZED[t.name].name) if t.name in SIZED else None  # Streamlit's floor for this size
        s_whole = sized.median("whole") if sized else float("nan")
        s_step = statistics.median(x / (sized.median("step") + cores.get((t.name, v), 0.0)) for v, x in stepped) \
            if sized and stepped else float("nan")
        kind = {PLOTLY.name: "plotly floor ", BARE_BOX.name: "bare page, number box ",
                **{x.name: f"sized floor ({k}) " for k, x in SIZED.items()}}.get(t.name, "")
        path = kind + t.path + (f" ({label})" if label else "")
        print(f"{path:<52} {first:6.2f} {r_first:7.2f} {whole:6.2f} {r_whole:7.2f} {whole / p_whole:8.2f} "
              f"{whole / s_whole:7.2f} {step:5.2f} {core:6.3f} {r_step:21.2f} {s_step:21.2f}")
        what = f"browser {path}"
        rows += [
            {"benchmark": f"{what}: first number / bare page's", "value": r_first, "unit": "x", "target": "<= 1.3"},
            {"benchmark": f"{what}: whole page drawn / bare page's", "value": r_whole, "unit": "x", "target": "<= 2"},
            {"benchmark": f"{what}: whole page drawn / bare page + one Plotly chart", "value": whole / p_whole,
             "unit": "x", "target": ""},
            {"benchmark": f"{what}: step / (bare page's step of the same widget kind + core {core * 1e3:.0f} ms)",
             "value": r_step, "unit": "x",
             "target": "<= 1.3"},
        ]
        if sized:
            rows += [
                {"benchmark": f"{what}: whole page drawn / a Streamlit page of its size", "value": whole / s_whole,
                 "unit": "x", "target": ""},
                {"benchmark": f"{what}: step / (a Streamlit page of its size's step + core)", "value": s_step,
                 "unit": "x", "target": "<= 1.3"},
            ]
    for name, s in results.items():
        for e in s.errors():
            print(f"  error ({name}): {e}")
    n_steps = sum(len(x.steps) for x in floor.samples)
    print(f"(medians of {len(floor.samples)} repetitions, {n_steps} steps; floor = bench/apps/bare_page.py, plotly "
          "floor = bench/apps/bare_plotly.py, sized = bench/apps/sized_page.py for the page's size, each served by "
          "its own server in the same run)")
    return rows


# --- the classroom: many students open the lecturer's links within a few seconds ------------------------------

async def _student_ws(base: str, target: Target, delay: float, out: list) -> None:
    """A student's session as the server sees it (bench/ws_client.py): the link's number on its own metric."""
    def own_metric(el) -> bool:
        return el.WhichOneof("type") == "metric" and target.label in el.metric.label

    await asyncio.sleep(delay)
    try:
        seconds, el = await first_element(base, target.path, own_metric, 120)
    except Exception as exc:
        out.append((target.name, None, error_text(exc)))
        return
    out.append((target.name, seconds, el.metric.body))


async def _classroom_ws(base: str, students: int, window: float, delays: list[float] | None = None) -> list:
    delays = delays if delays is not None else sorted(random.uniform(0, window) for _ in range(students))
    out: list = []
    await asyncio.gather(*(_student_ws(base, TARGETS[i % len(TARGETS)], d, out) for i, d in enumerate(delays)))
    return out


def classroom(students: int, window: float, render: dict[str, float] | None = None) -> dict:
    """`students` links (the three targets in turn) opened within `window` s against one fresh server process.

    The server is what a class shares, so each student is a WebSocket session speaking Streamlit's protocol
    (as bench/load_test.py): the time from opening the connection to the link's first number arriving, and
    that number must equal what a lone visitor gets (the right view). Forty Chromium tabs rendering on this
    2-core machine would measure the machine, not the server; a browser's own work is the side-by-side
    first-number time, which `render` adds per link to estimate what a student sees.
    """
    with serve(server_command(free_port()), "bench-classroom-server.log") as base:  # what a lone visitor gets
        alone = asyncio.run(_classroom_ws(base, len(TARGETS), 0, [0.0] * len(TARGETS)))
    expected = {name: value for name, t, value in alone if t is not None}
    # a fresh server for the class itself: the first students meet cold caches, as in a lecture
    with serve(server_command(free_port()), "bench-classroom-server.log") as base:
        out = asyncio.run(_classroom_ws(base, students, window))
    wrong = [x for x in out if x[1] is None or x[2] != expected.get(x[0])]
    times = sorted(x[1] for x in out if x[1] is not None)
    seen = sorted(x[1] + (render or {}).get(x[0], 0.0) for x in out if x[1] is not None)

    def p95(xs: list[float]) -> float:
        return xs[min(len(xs) - 1, int(0.95 * len(xs)))] if xs else float("nan")

    return {"students": students, "window_s": window, "shown": len(times), "wrong_or_failed": len(wrong),
            "errors": [f"{x[0]}: {x[2]}" for x in wrong][:5], "server_p50_s": statistics.median(times) if times
            else None, "server_p95_s": p95(times), "server_max_s": times[-1] if times else None,
            **({"with_render_p95_s": p95(seen)} if render else {})}


def bench_rows(reps: int = 5) -> list[dict]:
    """For bench/run_all.py: the ratios of the three links against the bare page (needs Chromium)."""
    if not Path(CHROMIUM).exists():
        return [{"benchmark": f"browser benchmark skipped: no Chromium at {CHROMIUM}", "value": float("nan"),
                 "unit": "", "target": ""}]
    return run(reps, TARGETS)


def run(reps: int, targets: tuple[Target, ...], baseline: Path | None = None,
        firsts: dict[str, float] | None = None, steps: int = 3) -> list[dict]:
    """Serve the app (as the Dockerfile does), the bare page and optionally a baseline checkout; measure."""
    with contextlib.ExitStack() as stack:
        app = stack.enter_context(serve(server_command(free_port()), "bench-browser-app.log"))
        bare = stack.enter_context(serve([sys.executable, "-m", "streamlit", "run", str(BARE_APP),
                                          "--server.headless=true", f"--server.port={free_port()}"],
                                         "bench-browser-bare.log"))
        plotly, sized = (stack.enter_context(serve([sys.executable, "-m", "streamlit", "run", str(path),
                                                    "--server.headless=true", f"--server.port={free_port()}"],
                                                   f"bench-browser-{path.stem}.log"))
                         for path in (PLOTLY_APP, SIZED_APP))
        servers = {"": app}
        if baseline is not None:
            command = server_command(free_port())
            command[command.index("app.py")] = str(baseline / "app.py")
            servers = {"before": stack.enter_context(serve(command, "bench-browser-baseline.log")), "after": app}
        results = side_by_side(servers, bare, targets, reps, plotly, steps, sized)
    values = {(name.split()[0], v) for name, s in results.items() for x in s.samples for v, _ in x.steps}
    cores = {(t.name, v): core_seconds(t, v) for t in targets for name, v in sorted(values) if name == t.name}
    if firsts is not None:
        firsts.update({name.split()[0]: s.median("first") for name, s in results.items()})
    return report(results, cores)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="repetitions per link (medians are reported)")
    ap.add_argument("--steps", type=int, default=3, help="steps per repetition (each on a quiet page)")
    ap.add_argument("--only", default="", help="only the targets whose name contains this (pipeline, zero, planner)")
    ap.add_argument("--classroom", type=int, default=0, metavar="N",
                    help="also open N links within --window seconds against one fresh server (0: skip)")
    ap.add_argument("--window", type=float, default=10.0)
    spec_args.switch(ap, "--skip-side-by-side", help="skip the side-by-side comparison with a bare page")
    ap.add_argument("--baseline", type=Path, help="also serve the app from this checkout (e.g. `git archive main`) "
                                                  "and report it as 'before', side by side in the same run")
    args = ap.parse_args()
    firsts: dict[str, float] = {}
    if not args.skip_side_by_side:
        run(args.reps, tuple(t for t in TARGETS if args.only in t.name), args.baseline, firsts, args.steps)
    if args.classroom:
        result = classroom(args.classroom, args.window, firsts or None)
        print("\nclassroom:", ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                         for k, v in result.items()))
        return 1 if result["wrong_or_failed"] else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
