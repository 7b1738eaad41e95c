"""The Pipeline page's memory sections through AppTest: frontier, equal-memory compare, per stage, derivations.

Numbers are the simulator's (checked against their sources in tests/test_pipeline_memory_schedules.py);
here the page must show them, keep them in the URL and explain refusals.
"""

import json

from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT

PAGE = str(ROOT / "pages" / "pipeline.py")
EQUAL = {"tf": "1", "tb": "1", "tw": "1"}


def run(query):
    at = AppTest.from_file(PAGE, default_timeout=90)
    at.query_params.update(query)
    return at.run()


def charts(at):
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def captions(at):
    return " ".join(c.value for c in at.caption)


def test_v_half_shows_peak_activation_five_at_p8_m32():
    at = run({"schedule": "v-half", "p": "8", "m": "32", **EQUAL})
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Peak activation"] == "5"
    assert any("B/2" in c.value for c in at.caption)  # no exact closed form: the paper's estimate is named


def test_frontier_plots_every_schedule_with_the_v_shapes_on_it():
    at = run({"schedule": "1f1b", "p": "8", "m": "32", "frontier": "true", **EQUAL})
    assert not at.exception
    fig = charts(at)[-1]
    points = next(t for t in fig["data"] if t.get("mode") == "markers+text")
    names = points["text"]
    assert len(names) == 12 and {"v-half", "v-min", "dualpipe"} <= set(names)
    x = dict(zip(names, points["x"], strict=True))
    assert (x["1f1b"], x["v-half"], x["v-min"], x["zbv"], x["dualpipe"]) == (8, 5, 4, 8, 9)
    stars = {n for n, s in zip(names, points["marker"]["symbol"], strict=True) if s == "star"}
    assert {"zbv", "v-half", "v-min"} <= stars and "gpipe" not in stars


def test_equal_memory_compare_gives_1f1b_more_smaller_micro_batches():
    at = run({"schedule": "v-half", "p": "8", "m": "32", "compare": ["1f1b", "gpipe"], "equal_mem": "true", **EQUAL})
    assert not at.exception
    matched = next(d.value for d in at.dataframe if "activation memory" in d.value.columns)  # the compare table
    rows = {r["schedule"]: r for r in matched.to_dict("records")}  # above it is markdown (ui.shared.tables)
    assert rows["1f1b"]["m"] == 52 and rows["1f1b"]["activation memory"] <= 5  # 8 x 32/52 = 4.92
    assert "gpipe cannot hold 5" in captions(at)  # GPipe holds the whole batch at any m


def test_layer_split_with_the_output_layer_shows_the_stage_table_and_a_balance():
    at = run({"p": "4", "m": "8", "layers": "32", "head_time": "2.6", "head_memory": "5"})
    assert not at.exception
    stage_rows = next(d.value for d in at.dataframe if "time factor" in d.value.columns)
    assert list(stage_rows["layers"]) == [8, 8, 8, 8]
    assert stage_rows["holds"].iloc[-1] == "output layer + loss"
    assert "--first-stage-layers 8 --last-stage-layers 6" in captions(at)
    assert {m.label: m.value for m in at.metric}["Peak activation"] == "4"


def test_a_split_that_does_not_fit_the_schedule_is_explained():
    """Named, left at its default, and the rest drawn (issue 24: every bad input named, the rest stays)."""
    at = run({"p": "4", "m": "8", "layers_per_stage": "8,8"})
    assert not at.exception and not at.error
    assert any("lists 2 stage" in t.value and "computed with the default layers_per_stage" in t.value
               for t in at.text)
    assert {m.label: m.value for m in at.metric}["Makespan"] == "33"


def test_derivation_of_dualpipe_names_its_terms_and_conditions():
    at = run({"schedule": "dualpipe", "p": "8", "m": "16", "tf": "1", "tb": "1", "tw": "0.5"})
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "-3W" in text and "PP/2-1" in text and "t_f = t_b" in text and "makespan convention" in text
