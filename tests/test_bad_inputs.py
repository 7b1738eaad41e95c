"""Every bad input gets a clear message and the rest stays (issue 24, item 4): an over-long or malformed URL value, or
one core refuses in combination, is named on the page and the page computes with the rest; the command line puts
usage and mistakes on stderr with exit status 2."""

import subprocess
import sys

import pytest
from streamlit.testing.v1 import AppTest

from core.cli import main
from core.errors import InputError
from core.params import MAX_TEXT
from core.params.pipeline import PIPELINE
from core.views.fallback import settled
from tests.conftest import ROOT

APP = str(ROOT / "app.py")
LONG = "1" * 512_000


def run(page: str, query: dict) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(f"pages/{page}.py")
    at.query_params.update(query)
    return at.run()


def texts(at: AppTest) -> list[str]:
    return [t.value for t in at.text]


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


# ------------------------------------------------------------------------------------------- core.views.fallback

def test_settled_resets_only_the_inputs_a_refusal_names():
    def make(v):
        if v["layers_per_stage"]:
            raise InputError("layers-per-stage lists 1 stage(s), but ...", keys=("layers_per_stage",))
        if v["p"] > 8:
            raise InputError(f"p: {v['p']} is too deep here")  # named by its message
        return v["p"] * 10

    got, used, notices = settled(make, {"layers_per_stage": (8.0,), "p": 16, "m": 32}, PIPELINE)
    assert got == 40 and used == {"layers_per_stage": (), "p": 4, "m": 32}
    assert notices == ["layers-per-stage lists 1 stage(s), but ... - computed with the default layers_per_stage = "
                       "(none).", "p: 16 is too deep here - computed with the default p = 4."]


def test_settled_raises_what_names_no_input():
    def make(v):
        raise InputError("this search has 9 candidates, above the work budget")

    with pytest.raises(InputError, match="work budget"):
        settled(make, {"p": 16}, PIPELINE)


def test_a_list_input_takes_as_many_characters_as_its_entries():
    spec = PIPELINE["layers_per_stage"]
    text = ",".join(["1024"] * 512)  # the spec's 512 entries, 2,559 characters
    assert len(text) > MAX_TEXT and spec.parse(text) == (1024.0,) * 512
    with pytest.raises(InputError, match=r"layers_per_stage: value is too long \(512,000 characters; at most 6,144\)"):
        spec.parse(LONG)


# ----------------------------------------------------------------------------------------------------- pages

@pytest.mark.parametrize(("page", "key", "metric"), [("planner", "gpus", "Layout t x p x d"),
                                                     ("pipeline", "p", "Makespan"),
                                                     ("zero", "nd", "DP per GPU")])
def test_an_over_long_value_is_named_and_the_page_computes_the_rest(page, key, metric):
    at = run(page, {key: LONG, "batch" if page == "planner" else "m": "64"})
    assert not at.exception and not at.error
    named = [t for t in texts(at) if t.startswith(f"{key}: value is too long (512,000 characters")]
    assert len(named) == 1 and "using the default" in named[0]
    assert metrics(at)[metric]


def test_lecture_page_names_an_over_long_value():
    at = run("lecture", {"e1_p": LONG})
    assert not at.exception
    assert any(t.startswith("e1_p: value is too long (512,000 characters") for t in texts(at))


def test_a_layer_split_the_schedule_cannot_take_is_named_and_the_rest_drawn():
    at = run("pipeline", {"layers_per_stage": "8", "p": "4", "m": "8"})
    assert not at.exception and not at.error
    assert ("layers-per-stage lists 1 stage(s), but this schedule has 4 stages on a micro-batch's path (p x chunks; "
            "DualPipe: p) - computed with the default layers_per_stage = (none).") in texts(at)
    assert metrics(at)["Makespan"] == "33"  # 1F1B, p = 4, m = 8, t_f 1, t_b 2: (m + p - 1)(t_f + t_b)


def test_512_layers_per_stage_entries_are_read_from_the_url():
    split = ",".join(["2"] * 511 + ["3"])
    at = run("pipeline", {"schedule": "interleaved", "p": "64", "m": "64", "v": "8", "layers_per_stage": split})
    assert not at.exception and not at.error and not texts(at)
    assert at.text_input(key="layers_per_stage").value == split


def test_planner_names_a_precision_the_gpu_lacks_and_plans_the_rest():
    at = run("planner", {"gpu": "v100-32gb", "precision": "bf16", "model": "llama3-8b", "gpus": "64", "batch": "256"})
    assert not at.exception and not at.error
    assert any(t.startswith("precision: NVIDIA V100") and t.endswith("computed with the default precision = auto.")
               for t in texts(at))
    assert metrics(at)["Layout t x p x d"] != "none fits"


def test_zero_page_names_the_gpus_that_cannot_hold_the_layout_and_computes_the_rest():
    at = run("zero", {"gpus": "16", "nd": "64"})
    assert not at.exception and not at.error
    assert "nd: t x p x N_d = 64 GPUs exceeds the 16 available - computed with the default gpus = 0." in texts(at)
    assert metrics(at)["DP per GPU"] == "120.00 GB"


# ------------------------------------------------------------------------------------------------------- CLI

def test_no_subcommand_prints_usage_on_stderr_and_exits_2():
    out = subprocess.run([sys.executable, "-m", "core"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("usage: python -m core SUBCOMMAND [options]") and "plan" in out.stderr
    asked = subprocess.run([sys.executable, "-m", "core", "--help"], cwd=ROOT, capture_output=True, text=True,
                           timeout=60)
    assert asked.returncode == 0 and asked.stdout.startswith("usage:") and asked.stderr == ""


@pytest.mark.parametrize(("args", "message"), [
    (["simulate", "--from-csv", ""], "error: --from-csv: empty value; give a value or leave the option out\n"),
    (["simulate", "--stage-costs", ""], "error: --stage-costs: empty value; give a value or leave the option out\n"),
    (["simulate", "--stage-costs="], "error: --stage-costs: empty value; give a value or leave the option out\n"),
    (["plan", "--fix", " "], "error: --fix: empty value; give a value or leave the option out\n"),
    (["plan", "--rank", "-1"], "error: --rank: -1 is not a rank; the best feasible candidate is 1\n"),
    (["plan", "--top", "-1"], "error: --top: must be 0 (all) or more\n"),
    (["simulate", "-p", "-1"], "error: p: '-1' is out of range; allowed 1 to 64\n"),
    (["plan", "--budget", "-5"], "error: budget: '-5' is out of range; allowed 0 to 50,000,000\n"),
])
def test_empty_and_negative_values_exit_2_with_one_line(capsys, args, message):
    assert main(args) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err == message
