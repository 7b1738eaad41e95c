"""A schedule is one record (issue 25): its registry entry in core/pipeline/schedules/ is the only place that names it.

- Outside the registry at most 2 modules of the application (core/, ui/, pages/, app.py) spell more than 2 schedule
  names (a framework's capability table in core/frameworks/ may: it states what that framework runs, with sources).
- A toy schedule registered in ONE place (the `toy` fixture) is a choice of the CLI, of the Pipeline page and of the
  planner at once, with the numbers its order gives.
- Every entry tells the truth about the Schedule its generator builds.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from core import cli
from core.params.pipeline import DEFAULT_SCHEDULES, PIPELINE, SCHEDULE_NAMES, SEARCH_SCHEDULES
from core.params.planner import SEARCH, PlannerParams
from core.pipeline import schedules
from core.pipeline.result import PipelineParams, simulate
from core.pipeline.schedules import REGISTRY, build
from core.pipeline.schedules.ir import B, F, Schedule, chain, loop_stage_map, ops
from core.pipeline.schedules.record import Entry, Search
from core.planner import frameworks
from core.planner.plan import plan
from tests.conftest import ROOT

APPLICATION = [*(ROOT / d for d in ("core", "ui", "pages")), ROOT / "app.py"]
REGISTRY_DIR = ROOT / "core" / "pipeline" / "schedules"
MAX_NAMING_MODULES = 2


def named_schedules(path) -> set[str]:
    """Schedule names a module spells as string constants."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in REGISTRY}


def modules():
    for root in APPLICATION:
        yield from ([root] if root.is_file() else sorted(root.rglob("*.py")))


def test_at_most_two_modules_outside_the_registry_name_more_than_two_schedules():
    naming = {str(p.relative_to(ROOT)): sorted(found) for p in modules() if REGISTRY_DIR not in p.parents
              and len(found := named_schedules(p)) > 2}
    assert len(naming) <= MAX_NAMING_MODULES, naming
    assert "core/frameworks/pytorch.py" in naming  # PyTorch's capability table: the counter does count


def test_the_counter_counts_string_constants_only(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('A = ("gpipe", "1f1b")\nif x == "zbv": pass\n# "dualpipe" in a comment\nzbv = 1\n')
    assert named_schedules(f) == {"gpipe", "1f1b", "zbv"}


# --- a toy schedule, registered in one place -------------------------------------------------------------------

def gpipe_lifo(p: int, m: int, v: int = 1) -> Schedule:
    """GPipe whose backwards run last in, first out: the same bubble and the same m micro-batches held."""
    order = chain(ops(F, range(m)), ops(B, range(m - 1, -1, -1)))
    return Schedule("toy", p, 1, m, tuple(order.copy() for _ in range(p)), loop_stage_map(p, 1))


TOY = Entry("toy", "Toy", gpipe_lifo, "GPipe with its backwards in reverse order (a test's schedule)", "1",
            search=Search(rank=99))


@pytest.fixture
def toy():
    schedules.register(TOY)
    try:
        yield TOY
    finally:
        schedules.unregister("toy")
    assert "toy" not in SCHEDULE_NAMES and "toy" not in SEARCH_SCHEDULES


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(args))
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def test_the_toy_is_simulated_by_the_cli(toy):
    code, out, _ = run_cli("simulate", "--schedule", "toy", "-p", "4", "-m", "8", "--json")
    assert code == 0
    s = json.loads(out)
    assert s["schedule"] == "toy" and s["num_ops"] == 4 * 8 * 2
    assert s["makespan"] == pytest.approx(33.0)  # (m+p-1)(t_f+t_b), GPipe's: the backward order does not matter
    assert s["bubble_fraction"] == pytest.approx(3 / 11)
    assert s["peak_inflight"] == [8, 8, 8, 8]
    assert s["formula_bubble_fraction"] is None and s["formula_note"] == "no closed form for toy"
    code, out, _ = run_cli("simulate", "--help")
    assert code == 0 and "pipedream, toy" in " ".join(out.split())


def test_without_the_toy_the_cli_refuses_it():
    code, _, err = run_cli("simulate", "--schedule", "toy", "-p", "4", "-m", "8")
    assert code == 2 and "'toy' is not allowed" in err


def test_the_toy_is_a_choice_of_the_pipeline_page(toy):
    from streamlit.testing.v1 import AppTest

    assert PIPELINE["schedule"].choices[-1] == "toy" and PIPELINE["schedule"].parse("toy") == "toy"
    at = AppTest.from_file(str(ROOT / "pages" / "pipeline.py"), default_timeout=60)
    at.query_params.update({"schedule": "toy", "p": "4", "m": "8"})
    at.run()
    assert not at.exception
    box = next(s for s in at.selectbox if s.label == PIPELINE["schedule"].label)
    assert box.value == "toy" and "toy" in box.options
    assert float({m.label: m.value for m in at.metric}["Makespan"]) == pytest.approx(33.0)
    assert TOY.summary in [c.value for c in at.caption]


# counted as PyTorch stores it (the framework the next test says runs the toy), so both schedules' rows count alike
PLAN_ASK = dict(model="llama3-8b", gpus=64, batch=64, fix_p=4, zero="2", recompute="selective", sp="off",
                memory_framework="torch")
NUMBERS = ["t", "p", "d", "micro_batch_size", "memory_bytes", "bubble_fraction", "step_time_s", "fits"]


def by_layout(frame):
    return frame[NUMBERS].sort_values(NUMBERS[:4]).reset_index(drop=True).to_numpy(dtype=float)


def test_a_plan_pinned_to_the_toy_holds_what_gpipe_holds_and_says_no_framework_runs_it(toy):
    assert "toy" in SEARCH["schedule"].choices and "toy" not in DEFAULT_SCHEDULES
    got = plan(PlannerParams(schedule="toy", **PLAN_ASK)).frame
    ref = plan(PlannerParams(schedule="gpipe", **PLAN_ASK)).frame
    assert len(got) == len(ref) > 4 and (got["schedule"] == "toy").all() and got["fits"].sum() >= 2
    # Its order holds the micro-batches GPipe's holds (read from the order, core.pipeline.timeline.peak_held), so
    # it needs the same memory; no framework runs it, so the planner spends no simulation on it: no step time, and
    # the timing column says why (ranked once a framework runs it: the next test, exactly as GPipe's).
    assert np.allclose(by_layout(got)[:, [0, 1, 2, 3, 4, 7]], by_layout(ref)[:, [0, 1, 2, 3, 4, 7]], equal_nan=True)
    assert got["step_time_s"].isna().all() and got["timing"].str.startswith("not timed: ").all()
    assert (got["timing"] == "not timed: no framework runs it").sum() >= 2
    # The capability tables (core/frameworks/<framework>.py) name what each framework runs: none runs the toy.
    assert all(any(r.startswith("no framework runs it: Megatron-LM has no toy schedule") for r in reasons)
               for reasons in got["reasons"])


def test_a_plan_pinned_to_the_toy_ranks_it_once_a_framework_runs_it(toy, monkeypatch):
    """Saying that PyTorch runs it (its action table runs in _PipelineScheduleRuntime) is the capability table's
    statement, not the schedule's: then its rows rank exactly as GPipe's do."""
    torch = frameworks.TABLE["torch"]
    monkeypatch.setitem(frameworks.TABLE, "torch", replace(torch, schedules=(*torch.schedules, "toy")))
    got = plan(PlannerParams(schedule="toy", framework="torch", **PLAN_ASK)).frame
    ref = plan(PlannerParams(schedule="gpipe", framework="torch", **PLAN_ASK)).frame
    ranked = got[got["feasible"]]
    assert len(ranked) >= 2 and list(ranked["rank"]) == list(range(1, len(ranked) + 1))
    assert ranked["step_time_s"].is_monotonic_increasing
    cols = ["rank", "t", "d", "micro_batch_size", "step_time_s", "memory_bytes"]
    assert np.allclose(ranked[cols].to_numpy(dtype=float), ref[ref["feasible"]][cols].to_numpy(dtype=float))


# --- every entry is true to its schedule -----------------------------------------------------------------------

@pytest.mark.parametrize("name", list(REGISTRY))
def test_each_entry_describes_the_schedule_its_generator_builds(name):
    entry = REGISTRY[name]
    p, v = 4, 3
    m = max(8, int(entry.min_m(p)))
    s = build(name, p, m, v)
    assert s.name == name == entry.name
    assert s.v == entry.chunks_per_device(v) and s.num_stages == entry.stages(p, v)
    assert s.split_backward == entry.split_backward
    if not entry.bidirectional:
        assert np.array_equal(s.stage_map, entry.stage_map(p, v))
    if entry.closed_form:
        assert entry.closed_form.conditions and entry.derivation
    assert entry.derivation or entry.closed_form is None


def test_the_planners_schedules_come_in_its_order_and_its_defaults_are_what_its_help_says():
    ranks = [REGISTRY[n].search.rank for n in SEARCH_SCHEDULES]
    assert ranks == sorted(ranks) and set(DEFAULT_SCHEDULES) <= set(SEARCH_SCHEDULES)
    assert SEARCH["schedule"].choices[0] == "all" and tuple(SEARCH["schedule"].choices[1:]) == tuple(SEARCH_SCHEDULES)
    assert SEARCH["schedule"].help.startswith("all searches " + ", ".join(DEFAULT_SCHEDULES) + ";")
    assert PlannerParams().searched("schedule") == tuple(DEFAULT_SCHEDULES)


def test_the_engines_names_agree_with_the_capability_table():
    """Megatron-LM and DeepSpeed run exactly the schedules they have a name for; PyTorch runs every one it has a
    class for (and others from our action table)."""
    for key, field in (("megatron", "megatron"), ("deepspeed", "deepspeed")):
        named = {n for n, e in REGISTRY.items() if getattr(e.engines, field)}
        assert named == set(frameworks.TABLE[key].schedules), key
    assert {n for n, e in REGISTRY.items() if e.engines.torch} <= set(frameworks.TABLE["torch"].schedules)


def test_the_readme_names_every_schedule_by_its_label():
    for doc in ("README.md", "docs/pages.md"):  # the Pipeline page's line, short and in full
        text = (ROOT / doc).read_text(encoding="utf-8")
        listed = re.search(r"under \w+ schedules \(([^)]*)\)", text).group(1)
        assert listed.split(", ") == [e.label for e in REGISTRY.values()], doc


def test_every_gateway_registers_the_schedules_in_a_fresh_process():
    """core.params sits below the registry and reads its names live: the CLI and the pages' views (and the test
    apps, tests/conftest.py, scripts/param_docs.py) import it, so no command or page meets an empty list."""
    code = ("import sys, importlib\n"
            "for gateway in ('core.cli', 'core.views'):\n"
            "    for m in [k for k in sys.modules if k.startswith('core')]: del sys.modules[m]\n"
            "    importlib.import_module(gateway)\n"
            "    from core.params.memory import ACTIVATIONS\n"
            "    print(gateway, ACTIVATIONS['schedule'].parse('zbv'))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["core.cli", "zbv", "core.views", "zbv"], out.stderr
    code = "from core.params.memory import ACTIVATIONS; ACTIVATIONS['schedule'].parse('zbv')"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode and "import it before using core.params alone" in out.stderr  # alone: a clear refusal


def test_a_registered_name_is_refused_twice():
    with pytest.raises(ValueError):
        schedules.register(REGISTRY["gpipe"])


def test_simulate_is_the_one_entry_point():
    """result.simulate takes a parameter set; the engine's run_timeline takes a built schedule (no `run`)."""
    import core.pipeline.simulate as engine

    assert not hasattr(engine, "run") and callable(engine.run_timeline)
    assert simulate(PipelineParams(schedule="1f1b", p=4, m=8)).timeline.makespan == pytest.approx(33.0)
