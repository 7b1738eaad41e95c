"""Per-stage reality: Megatron-LM's layer split, the embedding and output layer in time and memory.

Source for the split: Megatron-LM's --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers
(first and last stage get the given layers, the rest are split evenly over the other stages). The
timings below are derived by hand: GPipe with stage times x_s (t_f + t_b) finishes at
(t_f + t_b)(sum of x_s + (m-1) max x_s), the forward and the backward wave each paying the slowest stage
once per extra micro-batch.
"""

import subprocess
import sys

import pytest

from core.errors import InputError
from core.pipeline.result import PipelineParams, simulate
from core.pipeline.stage_view import balance_hint, stage_table
from core.pipeline.stages import balanced_first_last, memory_weights, split_layers, split_note, time_factors


def test_megatron_split():
    assert split_layers(32, 4) == (8, 8, 8, 8)
    assert split_layers(30, 4, 7, 7) == (7, 8, 8, 7)
    assert split_layers(32, 4, 8, 6) == (8, 9, 9, 6)
    assert split_layers(126, 16, 7, 7) == (7,) + (8,) * 14 + (7,)
    assert split_layers(5, 1) == (5,)
    assert split_note(32, 4, 8, 6) == ""


def test_a_split_megatron_would_refuse_is_spread_and_said():
    assert split_layers(30, 4) == (7, 8, 8, 7)  # the extra layers go to the middle
    assert split_layers(31, 4, 7, 0) == (7, 8, 8, 8)
    assert "Megatron-LM would refuse" in split_note(30, 4)
    with pytest.raises(InputError, match="exceed"):
        split_layers(10, 4, 6, 6)


def test_factors_and_weights():
    split = (8, 9, 9, 6)
    assert time_factors(split, 0.0, 2.6) == pytest.approx((1.0, 1.125, 1.125, 8.6 / 8))
    assert memory_weights(split, 4, 0.0, 5.0) == pytest.approx((1.0, 1.125, 1.125, 11 / 8))
    # a V schedule's 8 half-size stages: each stage is half a device's share
    assert memory_weights((4,) * 8, 4) == pytest.approx((0.5,) * 8)


def test_gpipe_with_the_output_layer_and_the_balanced_split():
    costly = simulate(PipelineParams(schedule="gpipe", p=4, m=8, layers=32, head_time=2.6))
    assert costly.timeline.makespan == pytest.approx(3 * (4.325 + 7 * 1.325))  # 40.8: the last stage bottlenecks
    assert balanced_first_last(32, 4, 0.0, 2.6) == (8, 6)
    fixed = simulate(PipelineParams(schedule="gpipe", p=4, m=8, layers=32, last_stage_layers=6, first_stage_layers=8,
                                    head_time=2.6))
    assert fixed.timeline.makespan == pytest.approx(3 * (4.325 + 7 * 1.125))  # 36.6
    assert "--first-stage-layers 8 --last-stage-layers 6" in balance_hint(costly)
    assert balance_hint(fixed) == ""


def test_output_layer_memory_lands_on_the_last_stage_device():
    one = simulate(PipelineParams(schedule="1f1b", p=4, m=8, layers=32, head_memory=5.0)).summary()
    assert one["peak_activation"] == pytest.approx([4.0, 3.0, 2.0, 13 / 8])  # 1 micro-batch of 8 + 5 layers
    assert one["peak_inflight"] == [4, 3, 2, 1]  # the unweighted count is unchanged
    assert one["stage_layers"] == [8, 8, 8, 8] and one["stage_memory"][-1] == pytest.approx(13 / 8)
    # in a V both ends of the model sit on device 0
    v = simulate(PipelineParams(schedule="zbv", p=4, m=8, tf=1, tb=1, tw=1, layers=32, head_memory=5.0)).summary()
    assert v["peak_activation"][0] > v["peak_activation"][1] == 4.0


def test_stage_table_names_devices_layers_and_ends():
    r = simulate(PipelineParams(schedule="dualpipe", p=4, m=8, tf=1, tb=1, layers_per_stage=(7, 9, 9, 7)))
    rows = stage_table(r)
    assert [row["devices"] for row in rows] == ["0, 3", "1, 2", "1, 2", "0, 3"]  # two copies of each stage
    assert rows[0]["holds"] == "embedding" and rows[-1]["holds"] == "output layer + loss"
    assert [row["layers"] for row in rows] == [7, 9, 9, 7]
    assert stage_table(simulate(PipelineParams())) == []


@pytest.mark.parametrize("kw,match", [
    ({"layers_per_stage": (8.0, 8.0)}, "lists 2 stage"),
    ({"layers_per_stage": (8.5, 8.0, 8.0, 8.0)}, "whole number"),
    ({"head_time": 2.0}, "set layers"),
    ({"layers": 3}, "cannot fill 4 stages"),
])
def test_bad_splits_are_explained(kw, match):
    with pytest.raises(InputError, match=match):
        simulate(PipelineParams(p=4, m=8, **kw))


def test_cli_prints_the_stage_table():
    out = subprocess.run([sys.executable, "-m", "core", "simulate", "-p", "4", "-m", "8", "--layers", "32",
                          "--head-time", "2.6", "--head-memory", "5"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "output layer + loss" in out.stdout and "--last-stage-layers 6" in out.stdout
