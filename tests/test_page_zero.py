"""The ZeRO memory page through Streamlit's AppTest: the paper's numbers on screen, widgets that move them,
URL seeding and repair, and the detail tabs (Table 1, activations, DeepSpeed, FSDP, the equivalence demo).

Numbers are the ZeRO paper's Table 1 (7.5B column) and the seeds' worked examples (REFERENCES.md).
"""

import base64
import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.units import GIB
from tests.conftest import ROOT, shared_link

PAGE = str(ROOT / "pages" / "zero.py")
TIMEOUT = 30

# ZeRO paper, Table 1, 7.5B column (GB = 1e9 bytes): N_d -> (stage 1, stage 2, stage 3); plain DP is 120.
TABLE1 = {1: (120, 120, 120), 4: (52.5, 41.3, 30), 16: (35.6, 21.6, 7.5), 64: (31.4, 16.6, 1.88),
          256: (30.4, 15.4, 0.47), 1024: (30.1, 15.1, 0.12)}


CUSTOM = {"model": "custom", "gpu": "custom"}  # the page opens on a named model and GPU; these type their own


def run(query=None):
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.query_params.update(query or {})
    at.run()
    assert not at.exception, at.exception
    return at


def metrics(at):
    return {m.label: m.value for m in at.metric}


def deltas(at):
    return {m.label: m.proto.delta for m in at.metric}


def frame(at, first_column):
    return next(d.value for d in at.dataframe if d.value.columns[0] == first_column and len(d.value))


def frame_with(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def stage_rows(at):
    return frame(at, "stage").set_index("stage")


def figure(at, key):
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.key == key)
    for trace in spec["data"]:
        for axis in ("x", "y"):
            value = trace.get(axis)
            if isinstance(value, dict) and "bdata" in value:
                trace[axis] = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).tolist()
    return spec


def bar_totals(at):
    """GB per stage summed over the stacked traces of the memory chart."""
    spec = figure(at, "zero_bars")
    bars = [t for t in spec["data"] if t["type"] == "bar"]
    return dict(zip([x.split(" ")[0] for x in bars[0]["x"]], np.sum([t["y"] for t in bars], axis=0), strict=True))


# --- the default view: the paper's example ---------------------------------------------------------------

def test_default_view_is_the_papers_example():
    at = run()
    # a named model and GPU, not "custom" (issue 11): the ZeRO paper's 7.5B model on an 80 GB H100
    assert (at.selectbox(key="model").value, at.selectbox(key="gpu").value) == ("zero-7.5b", "h100-80gb")
    m = metrics(at)
    assert (m["DP per GPU"], m["ZeRO-1 per GPU"], m["ZeRO-2 per GPU"], m["ZeRO-3 per GPU"]) == (
        "120.00 GB", "31.41 GB", "16.64 GB", "1.88 GB")
    assert deltas(at)["DP per GPU"] == "does not fit" and deltas(at)["ZeRO-3 per GPU"] == "fits"
    assert bar_totals(at) == pytest.approx({"DP": 120.0, "ZeRO-1": 31.40625, "ZeRO-2": 16.640625, "ZeRO-3": 1.875})
    rows = stage_rows(at)
    assert rows["fits"].tolist() == ["no", "yes", "yes", "yes"]
    assert rows["smallest N_d that fits"].tolist() == ["never", "2", "2", "2"]
    assert rows["states vs DP [x less]"].round(1).tolist() == [1.0, 3.8, 7.2, 64.0]  # the paper's reductions
    assert rows["comm [x Psi]"].tolist() == [2, 2, 2, 3]
    assert at.query_params == {}
    assert shared_link(at) == "/zero"  # the share link of the default view


def test_table1_reproduces_the_paper():
    table = frame(run(), "N_d").set_index("N_d")
    for nd, (s1, s2, s3) in TABLE1.items():
        assert table.loc[nd, "DP [GB]"] == pytest.approx(120)
        cols = ["ZeRO-1 (P_os) [GB]", "ZeRO-2 (P_os+g) [GB]", "ZeRO-3 (P_os+g+p) [GB]"]
        got = table.loc[nd, cols].to_numpy(dtype=float)
        assert np.abs(got - [s1, s2, s3]).max() < 0.06, (nd, got)


def test_curve_shows_the_4x_and_8x_floors():
    spec = figure(run(), "zero_curve")
    labels = [t["name"] for t in spec["data"]]
    assert "ZeRO-1 floor 30.00 GB = DP / 4" in labels  # 4 Psi = 30 GB: at most a 4x saving
    assert "ZeRO-2 floor 15.00 GB = DP / 8" in labels  # 2 Psi = 15 GB: at most 8x
    assert "GPU memory 80.00 GB" in labels and "N_d = 64" in labels
    assert spec["layout"]["xaxis"]["type"] == "log" and spec["layout"]["yaxis"]["type"] == "log"
    zero3 = next(t for t in spec["data"] if t.get("name") == "ZeRO-3 (P_os+g+p)")
    assert zero3["y"][0] == pytest.approx(120) and zero3["y"][-1] < 0.01  # no floor: keeps falling with N_d


# --- widgets move the output they should -------------------------------------------------------------------

def test_nd_moves_the_numbers_and_the_chart():
    at = run()
    at.number_input(key="nd").set_value(1024).run()
    assert metrics(at)["ZeRO-3 per GPU"] == "0.12 GB"
    assert bar_totals(at)["ZeRO-3"] == pytest.approx(120 / 1024)
    at.number_input(key="nd").set_value(4).run()
    assert metrics(at)["ZeRO-1 per GPU"] == "52.50 GB" and metrics(at)["ZeRO-2 per GPU"] == "41.25 GB"


def test_params_gpu_memory_unit_and_stage_inputs():
    at = run(CUSTOM)
    at.number_input(key="params").set_value(13_000_000_000).run()
    at.number_input(key="nd").set_value(16).run()
    m = metrics(at)  # seed 002: 13B on 16 GPUs
    assert (m["ZeRO-1 per GPU"], m["ZeRO-3 per GPU"]) == ("61.75 GB", "13.00 GB")
    at.number_input(key="gpu_mem").set_value(40.0).run()
    assert deltas(at)["ZeRO-1 per GPU"] == "does not fit" and deltas(at)["ZeRO-3 per GPU"] == "fits"
    at.radio(key="unit").set_value("GiB").run()
    assert metrics(at)["ZeRO-3 per GPU"] == f"{13e9 / GIB:,.2f} GiB"
    assert "ZeRO-3 (P_os+g+p) [GiB]" in frame(at, "N_d").columns
    at.selectbox(key="stage").set_value("3").run()
    opacity = figure(at, "zero_bars")["data"][0]["marker"]["opacity"]
    assert opacity == [0.35, 0.35, 0.35, 1.0]  # the chosen stage stands out


def test_optimizer_and_k_change_the_optimizer_bytes():
    at = run()
    at.selectbox(key="optimizer").set_value("sgd").run()  # mixed precision keeps the 4-byte master copy
    assert metrics(at)["DP per GPU"] == "60.00 GB"
    at.number_input(key="k").set_value(0.0).run()
    assert metrics(at)["DP per GPU"] == "30.00 GB"


def test_model_preset_sets_psi_and_hides_the_psi_box():
    at = run()
    at.selectbox(key="model").set_value("llama3-70b").run()
    assert "**70,600,000,000**" in "".join(md.value for md in at.markdown)
    assert not [w for w in at.number_input if w.key == "params"]
    assert metrics(at)["ZeRO-3 per GPU"] == "17.65 GB"  # 16 x 70.6e9 / 64


def test_gpu_preset_sets_the_memory():
    at = run({"gpu": "a100-40gb", "nd": "16"})
    assert metrics(at)["GPU memory"] == "40 GB"
    assert deltas(at)["ZeRO-1 per GPU"] == "fits" and deltas(at)["ZeRO-2 per GPU"] == "fits"
    assert deltas(at)["DP per GPU"] == "does not fit"


def test_offload_moves_the_optimizer_state_to_the_cpu():
    at = run({"offload": "optimizer"})
    rows = stage_rows(at)
    assert rows.loc["ZeRO-1", "optimizer [GB]"] == 0 and rows.loc["DP", "optimizer [GB]"] == pytest.approx(90)
    assert rows.loc["ZeRO-1", "CPU per node [GB]"] == pytest.approx(8 * 12 * 7.5 / 64)  # 8 GPUs per node
    assert rows.loc["ZeRO-1", "offload"] == "optimizer" and rows.loc["DP", "offload"] == "none"


def test_activations_come_from_the_simulator():
    from core.views import zero as zv

    at = run({"act": "true", "p": "4", "tab": "Activations"})
    info = next(md.value for md in at.markdown if md.value.startswith("Schedule"))
    # 1F1B: the first stage's device holds p = 4 micro-batches, the last stage's one
    assert "**1f1b**" in info and "m = 8" in info and "**4**" in info and "**1**" in info
    assert any("the first stage holds 4 micro-batches, the last 1 (simulated for 1f1b with p = 4, m = 8)" in c.value
               for c in at.caption)
    with_1f1b = stage_rows(at)["activations [GB]"]
    assert (with_1f1b > 0).all()
    at.selectbox(key="schedule").set_value("gpipe").run()
    info = next(md.value for md in at.markdown if md.value.startswith("Schedule"))
    assert "**gpipe**" in info and info.count("**8**") == 2  # GPipe: every stage holds all m = 8
    one, gp = (zv.zero_view(*zv.from_inputs({**_defaults(), "act": True, "p": 4, "schedule": s})).act
               for s in ("1f1b", "gpipe"))
    assert gp.first_stage["total"] == pytest.approx(2 * one.first_stage["total"])  # twice the micro-batches
    assert gp.worst == "last" and gp.peak == gp.last_stage["total"]  # ... and the last stage's fp32 logits on top
    assert stage_rows(at)["activations [GB]"].iloc[0] == pytest.approx(gp.peak / 1e9, rel=1e-3)


def _defaults():
    from core.params import zero_page as zp
    from core.params.memory import ZERO

    return {k: s.default for k, s in {**ZERO, **zp.PAGE, **zp.CUSTOM, **zp.MOE, **zp.ACT}.items()}


# --- URL: seeding, repair, refusals -------------------------------------------------------------------------

def test_url_seeds_the_widgets():
    query = {**CUSTOM, "params": "70000000000", "nd": "64", "gpu_mem": "80", "stage": "3", "unit": "GiB", "k": "12"}
    at = run(query)
    assert at.number_input(key="params").value == 70_000_000_000 and at.number_input(key="nd").value == 64
    assert at.selectbox(key="stage").value == "3" and at.radio(key="unit").value == "GiB"
    assert at.number_input(key="k").value == 12.0
    rows = stage_rows(at)  # seed 000: 70B on 64 x 80 GB, only stage 3 fits
    assert rows["total on GPU [GiB]"].tolist() == pytest.approx([x * 1e9 / GIB for x in (1120, 293.125, 155.3125,
                                                                                           17.5)])
    assert rows["fits"].tolist() == ["no", "no", "no", "yes"]
    assert at.query_params == {k: v for k, v in query.items() if k not in ("gpu_mem", "nd")}  # defaults dropped


def test_invalid_url_values_fall_back_with_a_notice():
    at = run({"nd": "abc", "params": "-5", "model": "<b>x</b>", "unit": "TB", "tab": "nope", "ranks": "99"})
    assert at.warning[0].value.startswith("Some values in this link could not be used")
    notices = [t.value for t in at.text]
    assert len(notices) == 6 and all("using the default" in n for n in notices)
    assert metrics(at)["ZeRO-3 per GPU"] == "1.88 GB"  # the defaults
    assert at.query_params == {}
    assert not any("<b>" in md.value for md in at.markdown)


def test_inputs_core_refuses_show_an_error_not_a_crash():
    at = run({"gpus": "10"})  # named, left at its default (exactly t x p x N_d), the rest computed
    assert not at.error and any("exceeds the 10 available - computed with the default gpus = 0" in t.value
                                for t in at.text)
    assert metrics(at)["DP per GPU"]
    at = run({"split": "embedding-on-ends", "model": "custom"})
    assert "embedding" in at.error[0].value
    at = run({"split": "embedding-on-ends", "p": "4"})  # a named model knows its V x h embedding
    assert not at.error and "embedding-on-ends split" in "".join(c.value for c in at.caption)


def test_optional_parts_that_do_not_apply_become_notes():
    at = run({"offload": "optimizer+params", "stage": "2", "deepspeed": "true", "nd": "12"})
    text = [w.value for w in at.warning]
    assert any("needs ZeRO stage 3" in w for w in text) and any("whole number of 8-GPU nodes" in w for w in text)
    assert metrics(at)["ZeRO-2 per GPU"] == "15.00 GB"  # the view still draws (optimizer offload for stage 2)


# --- the detail tabs ----------------------------------------------------------------------------------------

def test_deepspeed_convention_beside_the_papers():
    at = run({"deepspeed": "true", "nd": "8", "tab": "DeepSpeed"})
    table = frame_with(at, "DeepSpeed GPU [GiB]").set_index("stage")
    # DeepSpeed, stage 2 without offload: 2 Psi + 18 Psi / 8 bytes, printed in GiB; the paper: 2 Psi + 14 Psi / 8
    assert table.loc["ZeRO-2", "DeepSpeed GPU [GiB]"] == pytest.approx((15e9 + 16.875e9) / GIB, abs=1e-6)
    assert table.loc["ZeRO-2", "total on GPU [GiB]"] == pytest.approx((15e9 + 13.125e9) / GIB)
    assert np.isnan(table.loc["DP", "DeepSpeed GPU [GiB]"])


def test_fsdp_root_only_wrap_holds_the_whole_model():
    at = run({**CUSTOM, "tab": "FSDP wrapping"})
    peaks = frame(at, "policy").set_index("policy")["peak [GB]"]
    # 7.5e9 parameters over 64 ranks, 36 blocks of 2e8 (custom default shape), prefetch on
    assert peaks["root-only"] == pytest.approx(1.875 + 15 + 15)
    assert peaks["block"] == pytest.approx(1.875 + 0.6 + 0.8 + 0.4)
    at.toggle(key="prefetch").set_value(False).run()
    assert frame(at, "policy").set_index("policy").loc["block", "peak [GB]"] == pytest.approx(1.875 + 0.6 + 0.4 + 0.4)


def test_equivalence_demo_runs_live_and_is_exact():
    at = run({"tab": "Equivalence"})
    m = metrics(at)
    assert m["max |sharded - replicated|"] == "0.0e+00" and m["with global-norm clipping"] == "0.0e+00"
    assert m["Adam state per rank, replicated"] == "2,000"
    assert m["Adam state per rank, sharded"] == "500 / 500 / 500 / 500"
    assert any("**0.0**" in md.value for md in at.markdown)
    # seed 000, step 5: "all ranks identical" on both sides and mean |theta - target| 0.777 -> 0.056
    assert any("plain DP **True**, sharded **True**" in md.value and "0.777 -> 0.056" in md.value
               for md in at.markdown)
    at.slider(key="ranks").set_value(8).run()
    assert metrics(at)["Adam state per rank, sharded"] == "250 / 250 / 250 / 250 ..."


def test_headroom_per_stage_and_the_deepspeed_formula_switch():
    at = run({**CUSTOM, "params": "7000000000", "nd": "8"})  # seed 002: 14 GB per card "with 66 GB left over"
    assert stage_rows(at).loc["ZeRO-3", "headroom [GB]"] == pytest.approx(66)
    assert stage_rows(at).loc["ZeRO-1", "ZeRO paper"] == "P_os"
    at = run({**CUSTOM, "params": "2851000000", "nd": "8", "deepspeed": "true", "deepspeed_zero2": "docs",
              "tab": "DeepSpeed"})
    assert frame_with(at, "DeepSpeed GPU [GiB]").set_index("stage").loc["ZeRO-2", "DeepSpeed GPU [GiB]"] == \
        pytest.approx(15.93, abs=0.005)  # DeepSpeed memory.rst, t5-3b on 8 GPUs
    assert any("**docs** = 4 Psi + 16 Psi / GPUs" in c.value for c in at.caption)


def test_closed_tabs_compute_nothing():
    at = run()
    assert not [m for m in at.metric if m.label.startswith("max |")]  # the demo did not run
    assert "zero_fsdp" not in {c.key for c in at.get("plotly_chart")}  # hidden charts still cost the browser
