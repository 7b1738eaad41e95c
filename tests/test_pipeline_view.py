"""What the Pipeline page shows for one parameter set (core.pipeline.view), checked against the seed and papers."""

import json
import subprocess
import sys

import pytest

from core.errors import InputError
from core.pipeline.result import PipelineParams
from core.pipeline.view import MAX_TEXT_OPS, MAX_TRACE_OPS, actions_csv, cli_command, pipeline_view, trace_json
from tests.conftest import ROOT
from tests.test_pipeline_seed import SEED_1F1B_4_8


def rows_of(view, convention):
    return {r["quantity"].split(":")[0]: r for r in view.bubble_rows if r["convention"] == convention}


def test_seed_1f1b_numbers_text_and_closed_form():
    view = pipeline_view(PipelineParams(schedule="1f1b", p=4, m=8))
    h = view.headline()
    assert (h["makespan"], h["peak held"], h["ops"]) == (33, 4, 64)
    assert h["idle share"] == pytest.approx(0.2727, abs=5e-5) and h["relative to ideal"] == pytest.approx(0.375)
    assert view.text == SEED_1F1B_4_8 and view.text_note == ""
    rows = rows_of(view, "makespan")
    assert rows["bubble time, worst device"]["simulated"] == 9 == rows["bubble time, worst device"]["closed form"]
    assert rows["idle share"]["closed form"] == pytest.approx(3 / 11) and rows["idle share"]["difference"] == 0
    assert rows["relative to ideal"]["closed form"] == pytest.approx(3 / 8)
    # Seed 000, step 2: pipeline efficiency m/(m+p-1) = 8/11 beside the idle share.
    assert rows["pipeline efficiency"]["closed form"] == pytest.approx(8 / 11)
    assert rows["pipeline efficiency"]["simulated"] == pytest.approx(8 / 11)
    # Seed 002: at p = 4, m = 8, (p-1)/m = 37.5 % overstates the true 27.3 % "by roughly 37-38 %".
    assert rows["relative / idle share - 1"]["closed form"] == pytest.approx(0.375)
    assert rows["relative / idle share - 1"]["simulated"] == pytest.approx(0.375)
    assert view.headline()["efficiency"] == pytest.approx(8 / 11)
    assert [r["peak held"] for r in view.per_device()] == [4, 3, 2, 1]
    assert view.csv_note == "" and view.trace_note == ""


def test_zero_bubble_is_compared_in_its_span_convention():
    # ZB-H1, T_F = T_B = T_W = 1: (p-1)(T_F+T_B-T_W) = 3 per device, Qi et al. 2024, Table 2.
    view = pipeline_view(PipelineParams(schedule="zb-h1", p=4, m=8, tf=1, tb=1, tw=1))
    assert [r["convention"] for r in view.bubble_rows] == ["span"] * 5 + ["makespan"] * 5
    span = rows_of(view, "span")
    assert span["bubble time, worst device"]["simulated"] == 3 == span["bubble time, worst device"]["closed form"]
    assert all(r["closed form"] is None for r in rows_of(view, "makespan").values())
    h = view.headline()
    assert h["closed form convention"] == "span" and h["closed form idle share"] == pytest.approx(3 / 27)
    assert h["simulated, same convention"] == pytest.approx(3 / 27)


def test_no_closed_form_says_why():
    view = pipeline_view(PipelineParams(schedule="1f1b", p=4, m=8, tcomm=0.5))
    assert "t_comm > 0" in view.formula_note
    assert all(r["closed form"] is None for r in view.bubble_rows)
    assert view.headline()["simulated, same convention"] is None


def test_interleaved_matches_the_megatron_example():
    # REFERENCES: p=4, m=8, v=2, t_f=1, t_b=2 -> makespan 28.5, idle share 0.1579
    h = pipeline_view(PipelineParams(schedule="interleaved", p=4, m=8, v=2)).headline()
    assert h["makespan"] == 28.5 and h["idle share"] == pytest.approx(0.1579, abs=5e-5)


def test_text_timeline_notes():
    assert "integer op times" in pipeline_view(PipelineParams(tf=1.5)).text_note
    big = pipeline_view(PipelineParams(schedule="gpipe", p=64, m=256))
    assert big.text == "" and f"{MAX_TEXT_OPS:,}" in big.text_note and "--ascii" in big.text_note


def test_exports_and_their_refusals():
    params = PipelineParams(schedule="zb-h1", p=2, m=2)
    rows = [row.split(",") for row in actions_csv(params).splitlines()]
    assert rows[0] == ["0F0", "0F1", "0I0", "0W0", "0I1", "0W1"]  # stage 0: warm-up of p forwards, then I and W
    assert sorted(rows[1]) == ["1F0", "1F1", "1I0", "1I1", "1W0", "1W1"]
    trace = json.loads(trace_json(params))
    assert sum(e["ph"] == "X" for e in trace["traceEvents"]) == 12
    pipedream = pipeline_view(PipelineParams(schedule="pipedream", iterations=2))
    assert "asynchronous" in pipedream.csv_note
    with pytest.raises(InputError):
        actions_csv(PipelineParams(schedule="pipedream"))
    huge = pipeline_view(PipelineParams(schedule="1f1b", p=64, m=1024, iterations=2))
    assert huge.summary["num_ops"] > MAX_TRACE_OPS and "--chrome-trace" in huge.trace_note


def test_refused_inputs_raise_the_engines_message():
    with pytest.raises(InputError, match="multiple of p"):
        pipeline_view(PipelineParams(schedule="interleaved", p=4, m=6))
    with pytest.raises(InputError, match="m >= 8"):
        pipeline_view(PipelineParams(schedule="dualpipev", p=4, m=4))


def test_cli_command_reproduces_the_view():
    params = PipelineParams(schedule="zb-h1", p=8, m=16, tw=0.5, recompute=True, stage_costs=(1.0, 1.5))
    command = cli_command(params, "--json")
    assert command == ("python -m core simulate --schedule zb-h1 --p 8 --m 16 --tw 0.5 --recompute "
                       "--stage-costs 1,1.5 --json")
    assert cli_command(PipelineParams()) == "python -m core simulate"
    out = subprocess.run([sys.executable, *command.split()[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["makespan"] == pipeline_view(params).summary["makespan"]


@pytest.mark.parametrize(("p", "m", "expected"), [(5, 8, 10), (6, 8, 6), (7, 8, 7), (3, 8, 9)])
def test_a_refused_m_gets_the_nearest_m_the_schedule_accepts(p, m, expected):
    # issue 11: interleaved with p = 5, 6, 7 and m = 8 (m must be a multiple of p); ties go to the next round
    from core.pipeline.view import nearest_runnable

    near = nearest_runnable(PipelineParams(schedule="interleaved", p=p, m=m))
    assert near == PipelineParams(schedule="interleaved", p=p, m=expected)
    assert nearest_runnable(PipelineParams(schedule="dualpipev", p=8, m=8)).m == 16  # DualPipeV needs m >= 2p


def test_the_cli_line_leaves_out_v_where_the_schedule_has_no_v_chunks():
    # issue 11: the Pipeline page's CLI line kept -v 3 for 1F1B, where v does nothing
    assert "--v" not in cli_command(PipelineParams(schedule="1f1b", p=6, m=12, v=3))
    assert "--v 3" in cli_command(PipelineParams(schedule="interleaved", p=4, m=8, v=3))
    assert "--v" not in cli_command(PipelineParams(schedule="zbv", p=4, m=8, v=3))  # ZB-V has 2 chunks, fixed
