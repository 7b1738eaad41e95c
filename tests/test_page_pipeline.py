"""The Pipeline page through Streamlit's AppTest: numbers from the seed and papers, URL state, bad links.

AppTest runs pages/pipeline.py alone (app.py's frame is tested in test_app_home.py). It seeds the
first run from `at.query_params` and shows the backend's URL repairs, not the browser's widget -> URL
updates (tests/test_browser_pipeline.py covers those).
"""

import base64
import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.pipeline.result import PipelineParams, simulate
from tests.conftest import ROOT, shared_link
from tests.test_pipeline_seed import SEED_1F1B_4_8

PAGE = str(ROOT / "pages" / "pipeline.py")


def run(query=None):
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.query_params.update(query or {})
    return at.run()


def metrics(at):
    return {m.label: m.value for m in at.metric}


def figures(at):
    """The page's plotly charts as (figure JSON, config JSON), in page order."""
    return [(json.loads(c.proto.spec), json.loads(c.proto.config)) for c in at.get("plotly_chart")]


def array(x):
    """A plotly array: a list, or a typed array {"dtype", "bdata", "shape"}."""
    if isinstance(x, dict) and "bdata" in x:
        out = np.frombuffer(base64.b64decode(x["bdata"]), dtype=x["dtype"])
        return out.reshape([int(n) for n in x["shape"].split(",")]) if "shape" in x else out
    return np.asarray(x)


def op_bars(fig):
    """Op bars of a Gantt figure (the idle lanes left out): list of (kind label, count)."""
    return [(t["name"].split(":")[0], array(t["x"]).size) for t in fig["data"] if t["type"] == "bar" and
            t["name"] != "idle"]


def makespan(at):
    return float(metrics(at)["Makespan"])


def md_table(at, first):
    """The markdown table (ui.shared.tables) whose first column is `first`, as {column: [cell texts]}."""
    for md in at.markdown:
        lines = md.value.splitlines()
        if lines and lines[0].startswith(f"| {first} |"):
            head = [c.strip() for c in lines[0].strip("|").split("|")]
            rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
            return {h: [r[i] for r in rows] for i, h in enumerate(head)}
    raise AssertionError(f"no table starting with {first!r}")


def all_markdown(at):
    kinds = ("markdown", "caption", "warning", "info", "error", "success", "title", "header", "subheader")
    return [el.value for kind in kinds for el in at.get(kind)]


# --- the default view ---------------------------------------------------------------------------

def test_default_view_is_the_seed_1f1b_example():
    at = run()
    assert not at.exception
    m = metrics(at)
    assert (m["Makespan"], m["Bubble: idle share"], m["Bubble: relative to ideal"]) == ("33", "27.27 %", "37.50 %")
    assert m["Peak activation"] == "4"
    assert not at.code  # the text timeline is drawn when its expander is opened (its state is in the URL)
    assert [e.key for e in at.expander if e.key] == ["per_device", "text_timeline"]
    assert run({"text_timeline": "true"}).code[0].value == SEED_1F1B_4_8  # character for character
    (gantt, config), (memory, _) = figures(at)
    assert dict(op_bars(gantt)) == {"F": 32, "B": 32}
    assert gantt["layout"]["xaxis"]["range"][1] == pytest.approx(33 * 1.005) and "shapes" not in gantt["layout"]
    assert config["toImageButtonOptions"]["format"] == "png"
    assert [max(array(t["y"])) for t in memory["data"]] == [4, 3, 2, 1]  # peak held per device
    bubble = md_table(at, "convention")  # markdown: a missing closed form is a dash, not "None"
    assert [float(x) for x in bubble["closed form"][:3]] == pytest.approx([9, 3 / 11, 3 / 8], rel=1e-5)
    assert "—" in bubble["closed form"] and "None" not in str(bubble)
    assert [b.label for b in at.get("download_button")] == ["PyTorch action CSV", "Chrome trace (JSON)"]
    assert shared_link(at) == "/pipeline" and at.query_params == {}


# --- each input changes what it should ----------------------------------------------------------

@pytest.mark.parametrize("start,kind,key,value,expected", [
    ({}, "selectbox", "schedule", "gpipe", {"Makespan": "33", "Peak activation": "8"}),
    ({}, "slider", "p", 8, {"Makespan": "45", "Bubble: idle share": "46.67 %"}),  # (8+7)*3; seed: 0.4667
    ({}, "number_input", "m", 16, {"Makespan": "57", "Bubble: idle share": "15.79 %"}),  # (16+3)*3; seed: 0.1579
    ({"schedule": "interleaved"}, "slider", "v", 4, {"Makespan": "26.25"}),  # 24 + (p-1)(t_f+t_b)/v
    ({}, "number_input", "tf", 2.0, {"Makespan": "44"}),  # (m+p-1)(t_f+t_b)
    ({}, "number_input", "tb", 3.0, {"Makespan": "44"}),
    ({"schedule": "zb-h1", "tf": "1", "tb": "1"}, "number_input", "tw", 1.0, {"Makespan": "27"}),  # 24 + 3(1+1-1)
    ({}, "slider", "iterations", 2, {"Makespan": "66"}),
])
def test_each_input_moves_the_numbers(start, kind, key, value, expected):
    at = run(start)
    before = metrics(at)
    getattr(at, kind)(key=key).set_value(value).run()
    assert not at.exception
    after = metrics(at)
    assert {k: after[k] for k in expected} == expected
    assert after != before


@pytest.mark.parametrize("kind,key,value,changes", [
    ("toggle", "recompute", True, {"recompute": True}),
    ("number_input", "tcomm", 0.5, {"tcomm": 0.5}),
    ("number_input", "first_stage", 2.0, {"first_stage": 2.0}),
    ("number_input", "last_stage", 0.5, {"last_stage": 0.5}),
])
def test_inputs_without_a_closed_form_show_the_simulation_and_say_why(kind, key, value, changes):
    at = run()
    getattr(at, kind)(key=key).set_value(value).run()
    assert not at.exception
    assert makespan(at) == simulate(PipelineParams(**changes)).timeline.makespan != 33
    why = {"recompute": "recompute is on", "tcomm": "t_comm > 0"}.get(key, "stages are uneven")
    assert any(why in c.value and c.value.startswith("No closed form here") for c in at.caption)


def test_per_stage_costs_in_the_text_box():
    at = run()
    at.text_input(key="stage_costs").input("1, 1, 1, 2").run()
    assert not at.exception
    # The last stage twice as slow: it paces the pipeline, 8 micro-batches x 6 on it plus the fill.
    assert makespan(at) == simulate(PipelineParams(stage_costs=(1, 1, 1, 2))).timeline.makespan == 57


def test_time_cursor_veils_the_future_and_steps_through_events(caplog):
    from streamlit.elements.lib import policies

    policies._shown_default_value_warning = False  # Streamlit logs it once per process
    at = run()
    at.slider(key="cursor").set_value(50.0).run()
    gantt, _ = figures(at)[0]
    veil, line = gantt["layout"]["shapes"]
    assert veil["x0"] == line["x0"] == pytest.approx(16.5)
    assert any(c.value.startswith("At t = 16.5: device 0: B2") for c in at.caption)
    at.slider(key="cursor").set_value(0.0).run()
    at.button(key="cursor_next").click().run()
    assert at.slider(key="cursor").value == pytest.approx(3.0304)  # t = 1: the first op ends (rounded up)
    at.button(key="cursor_next").click().run()
    assert at.slider(key="cursor").value == pytest.approx(6.0607)  # t = 2
    at.button(key="cursor_back").click().run().button(key="cursor_back").click().run()
    assert at.slider(key="cursor").value == 0.0
    # issue 11: the step buttons set the slider's state on purpose; no warning about the cursor's default value
    assert "created with a default value" not in caplog.text


def test_play_steps_the_one_time_cursor_to_the_end_and_stops():
    import ui.pipeline.inputs as ip

    at = run()
    at.slider(key="cursor").set_value(10.0).run()
    at.button(key="cursor_play").click().run()  # AppTest follows every step's rerun: Play runs to the end
    assert at.slider(key="cursor").value == 100.0 and not at.session_state[ip._PLAYING]
    assert next(b.label for b in at.button if b.key == "cursor_play") == "▶ Play"
    gantt, _ = figures(at)[0]
    assert not gantt["layout"].get("shapes")  # the veil follows the same cursor: at the end, none
    at.button(key="cursor_play").click().run()  # Play at the end starts again from the beginning, to the end
    assert at.slider(key="cursor").value == 100.0
    assert ip.PLAY_STEPS >= 100  # a step is at least 1 / PLAY_STEPS of the axis: Play ends, whatever the schedule


def test_compare_mode_stacks_schedules_on_one_time_axis():
    at = run({"tf": "1", "tb": "1", "tw": "1"})
    at.multiselect(key="compare").set_value(["zb-h1", "zbv"]).run()
    assert not at.exception
    table = md_table(at, "schedule")
    assert table["schedule"] == ["1f1b", "zb-h1", "zbv"]
    assert table["makespan"] == ["33", "27", "25.5"]
    assert list(table["closed form convention"]) == ["makespan", "span", "span"]
    gantt, peaks = (f for f, _ in figures(at))
    assert [a["text"].split(":")[0] for a in gantt["layout"]["annotations"]] == ["1f1b", "zb-h1", "zbv"]
    assert {"yaxis", "yaxis2", "yaxis3"} <= set(gantt["layout"]) and gantt["layout"]["xaxis3"]["range"][1] > 33
    assert [t["name"] for t in peaks["data"]] == ["1f1b", "zb-h1", "zbv"]
    assert list(array(peaks["data"][2]["y"])) == [4, 4, 4, 4]  # ZB-V: 1F1B's memory on every device


def test_image_format_reaches_the_modebar():
    at = run()
    at.radio(key="img").set_value("svg").run()
    assert {c["toImageButtonOptions"]["format"] for _, c in figures(at)} == {"svg"}


# --- the URL ------------------------------------------------------------------------------------

def test_url_parameters_seed_every_widget():
    query = {"schedule": "zb-h1", "p": "8", "m": "16", "tf": "1", "tb": "1", "tw": "1", "cursor": "25",
             "img": "svg", "compare": ["zbv", "gpipe"]}
    at = run(query)
    assert not at.exception and not at.warning
    assert at.selectbox(key="schedule").value == "zb-h1" and at.slider(key="p").value == 8
    assert at.number_input(key="m").value == 16 and at.number_input(key="tw").value == 1.0
    assert at.multiselect(key="compare").value == ["zbv", "gpipe"] and at.slider(key="cursor").value == 25.0
    assert at.radio(key="img").value == "svg"
    assert md_table(at, "schedule")["schedule"] == ["zb-h1", "zbv", "gpipe"]
    # ZB-H1: ideal 16 x 3 plus (p-1)(T_F+T_B-T_W) = 7
    assert makespan(at) == 55
    assert shared_link(at) == ("/pipeline?schedule=zb-h1&p=8&m=16&tb=1&tw=1&cursor=25&img=svg"
                                 "&compare=zbv&compare=gpipe")


def test_invalid_url_values_fall_back_with_plain_text_notices():
    query = {"p": "999", "schedule": "<script>alert(1)</script>", "tf": "nan", "cursor": "250",
             "compare": ["bogus", "zbv", "zbv"], "stage_costs": "1,x"}
    at = run(query)
    assert not at.exception
    assert at.warning[0].value.startswith("Some values in this link could not be used")
    notices = [t.value for t in at.text]
    for key in ("p", "schedule", "tf", "cursor", "compare", "stage_costs"):
        assert any(n.startswith(f"{key}: ") for n in notices), key
    assert any("<script>alert(1)</script>" in n for n in notices)
    assert not any("script" in m or "bogus" in m for m in all_markdown(at))  # URL text never as markdown
    assert at.slider(key="p").value == 4 and at.selectbox(key="schedule").value == "1f1b"
    assert at.multiselect(key="compare").value == ["zbv"] and at.slider(key="cursor").value == 100.0
    assert at.query_params == {"compare": "zbv"}  # AppTest shows one value per key
    assert makespan(at) == 33


def test_inputs_the_engine_refuses_are_explained_not_crashed():
    at = run({"schedule": "interleaved", "m": "6"})
    assert not at.exception and not at.error
    # issue 11: say why in place and draw the nearest m the schedule accepts, keeping the inputs as typed
    assert "multiple of p" in at.warning[0].value and "Drawn below with m = 8" in at.warning[0].value
    assert figures(at) and at.number_input(key="m").value == 6
    assert shared_link(at) == "/pipeline?schedule=interleaved&m=6"
    assert any("simulate --schedule interleaved`" in c.value for c in at.caption)  # what is drawn: m = 8, the default
    at = run({"m": "6", "compare": ["dualpipev", "interleaved"]})
    assert not at.exception
    warnings = [w.value for w in at.warning]
    assert any(w.startswith("dualpipev cannot run these inputs") and "m >= 8" in w for w in warnings)
    assert any(w.startswith("interleaved cannot run these inputs") for w in warnings)
    assert makespan(at) == 27  # 1f1b still drawn: (6+3)*3


def test_pipedream_explains_why_there_is_no_pytorch_table():
    at = run({"schedule": "pipedream", "iterations": "3"})
    assert not at.exception
    assert [b.label for b in at.get("download_button")] == ["Chrome trace (JSON)"]
    assert any("asynchronous" in c.value for c in at.caption)
    assert metrics(at)["Weight versions"] == "2"


def test_largest_configuration_is_drawn_aggregated_and_bounded():
    at = run({"schedule": "interleaved", "p": "64", "m": "1024", "v": "8"})
    assert not at.exception
    assert metrics(at)["Bubble: idle share"] == "0.76 %"
    specs = [c.proto.spec for c in at.get("plotly_chart")]
    assert sum(len(s) for s in specs) < 2_000_000
    gantt = json.loads(specs[0])
    image = next(t for t in gantt["data"] if t["type"] == "image")
    assert image["source"].startswith("data:image/png;base64,") and len(image["source"]) < 200_000
    shares = next(t for t in gantt["data"] if t["type"] == "heatmap")  # the hover layer: every kind's share
    assert array(shares["z"]).shape == (64, 600) and shares["opacity"] == 0
    assert any(c.value.startswith("Too many ops to draw one by one") for c in at.caption)
    assert any("--chrome-trace" in c.value for c in at.caption)


def test_v_is_disabled_where_the_schedule_ignores_it_and_kept():
    at = run({"schedule": "interleaved", "v": "4"})
    assert not at.slider(key="v").disabled and makespan(at) == 26.25
    at.selectbox(key="schedule").set_value("1f1b").run()
    assert at.slider(key="v").disabled and at.slider(key="v").value == 4 and makespan(at) == 33
    at.selectbox(key="schedule").set_value("interleaved").run()
    assert makespan(at) == 26.25
