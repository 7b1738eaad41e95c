"""Memory where the embedding and the loss count as layers of the pipeline split (ends_in_split), and the end stages'
own micro-batch counts: the same whole-layer placement the step time runs (core.model.stage_split), so a planner row
and the ZeRO page it opens count the stages the run builds.

Llama 3 70B (80 layers, V x h = 1.05B, untied) at t = 8, p = 32: slots 82 over 32 stages, 3 per stage, the end stages
keep 2 layers each (one slot for the embedding, one for the loss), the 30 middle stages 76 layers, 3 on the fullest.
"""

import numpy as np
import pytest

from core.memory import device_activations, per_gpu
from core.model import presets, stage_split
from core.planner import simulation

LLAMA70 = per_gpu.ModelMemory.of(presets.model("llama3-70b"))


def test_whole_layers_per_device():
    assert [float(x) for x in stage_split.device_layers(80, 32, 1, 0, True)] == [2.0, 3.0, 2.0]
    assert [float(x) for x in stage_split.device_layers(80, 32, 1, 0, False)] == [3.0, 3.0, 3.0]  # ceil(80 / 32)
    # DeepSeek-V3 (61 layers, one MTP depth) at p = 16: slots 64, 4 per stage; first 3, last 4 - 1 - 1 = 2
    assert [float(x) for x in stage_split.device_layers(61, 16, 1, 1, True)] == [3.0, 4.0, 2.0]
    # interleaved, 2 chunks per device: the first device runs the first stage and one middle stage
    first, mid, last = (float(x) for x in stage_split.device_layers(80, 8, 2, 0, True))
    # slots 82 over 16 stages: at most 6 each; the ends keep 5 layers, the 14 middle stages 70 / 14 = 5
    assert (first, mid, last) == (5.0 + 5.0, 10.0, 5.0 + 5.0)
    # a V shape puts both end stages on the first device
    assert float(stage_split.device_layers(80, 8, 2, 0, True, True)[0]) == 5.0 + 5.0
    assert float(stage_split.device_layers(90, 8, 2, 0, True)[1]) == 12.0  # 92 slots: ends 5, middle 80 / 14 -> 6


def test_parameters_of_the_fullest_device_are_whole_layers():
    block, emb = LLAMA70.layer_params, LLAMA70.embedding
    even, _ = per_gpu.dense_split(LLAMA70, 8, 32)
    ends, _ = per_gpu.dense_split(LLAMA70, 8, 32, 1, True)
    # evenly: the body spread over 32 stages, the embedding on top; in the split: 2 layers + the embedding (first
    # and, with its own output matrix, last) against 3 layers in the middle
    assert float(even) * 8 == pytest.approx((LLAMA70.dense_params - 2 * emb) / 32 + emb)
    assert float(ends) * 8 == pytest.approx(max(emb + 2 * block, 3 * block))
    assert float(ends) < float(even)
    assert float(per_gpu.dense_split(LLAMA70, 8, 1, 1, True)[0]) == float(per_gpu.dense_split(LLAMA70, 8, 1)[0])



def test_a_v_shape_holds_both_ends_weights_on_its_first_device():
    emb = LLAMA70.embedding
    even, _ = per_gpu.dense_split(LLAMA70, 8, 8)
    v, _ = per_gpu.dense_split(LLAMA70, 8, 8, 2, False, True)
    assert float(v - even) * 8 == pytest.approx(emb)  # the output matrix beside the embedding
    # in the split: ends 5 + 5 layers and both matrices on the first device, 10 layers on the others
    ends_v, _ = per_gpu.dense_split(LLAMA70, 8, 8, 2, True, True)
    assert float(ends_v) * 8 == pytest.approx(2 * emb + 10 * LLAMA70.layer_params)
    assert float(per_gpu.dense_split(LLAMA70, 8, 1, 1, False, True)[0]) == float(per_gpu.dense_split(LLAMA70, 8, 1)[0])


def _ends(ends_in_split: bool, inflight: per_gpu.InFlight) -> device_activations.EndStages:
    cfg = per_gpu.MemoryConfig(LLAMA70, per_gpu.Layout(t=8, p=32, ends_in_split=ends_in_split),
                               per_gpu.Training(sequence_parallel=True), inflight)
    return device_activations.end_stages(cfg)


def test_a_middle_device_can_hold_the_most():
    one_f_one_b = per_gpu.InFlight(32.0, 1.0, False, 31.0, 32.0, 1.0)  # 1F1B at p = 32: device i holds 32 - i
    got = _ends(True, one_f_one_b)
    per_layer = float(device_activations.activation_shape(per_gpu.MemoryConfig(
        LLAMA70, per_gpu.Layout(t=8, p=32), per_gpu.Training(sequence_parallel=True))).per_layer())
    assert float(got.middle_total) == pytest.approx(3 * 31 * per_layer)  # 3 layers x 31 micro-batches
    assert float(got.first["layers"]) == pytest.approx(2 * 32 * per_layer)
    assert got.worst == "middle" and float(got.peak) == float(got.middle_total)
    even = _ends(False, one_f_one_b)  # split evenly the first device, 3 layers x 32 and the embedding, is fullest
    assert even.worst == "first" and float(even.first["layers"]) == pytest.approx(3 * 32 * per_layer)


def test_the_last_stage_keeps_its_logits_only_for_its_own_micro_batches():
    # an interleaved device holds several chunks' micro-batches (in units of its share); its last stage, whose fp32
    # logits the loss's backward needs, only those between that stage's forward and its backward
    device_count = per_gpu.InFlight(4.0, 2.5, False, 3.0, 8.0, 2.5)
    own_count = per_gpu.InFlight(4.0, 2.5, False, 3.0, 8.0, 1.0)
    a, b = _ends(False, device_count), _ends(False, own_count)
    assert float(a.last["output"]) == pytest.approx(2.5 * float(b.last["output"]))
    assert float(a.last["layers"]) == float(b.last["layers"])
    # and the first stage's embedding for its own 8, not the device's 4
    assert float(a.first["embedding"]) == pytest.approx(2 * float(_ends(False, per_gpu.InFlight(4.0, 2.5)).first[
        "embedding"]))


@pytest.mark.parametrize("name,p,m,v,own", [("interleaved", 4, 8, 2, (8.0, 1.0)), ("zbv", 4, 8, 2, (8.0, 1.0)),
                                            ("1f1b", 4, 8, 1, (4.0, 1.0))])
def test_the_planner_reads_the_end_stages_counts_from_the_schedule(name, p, m, v, own):
    simulation.clear_cache()
    got = simulation.in_flight(name, p, m, v)
    assert got[3:] == own
    # the device counts are in units of a device's share: never below an end stage's own count over its chunks
    assert got[0] >= own[0] / (2 if v > 1 else 1) and np.isfinite(got).all()


def test_end_devices_weigh_their_chunks_by_their_layers():
    # Megatron-LM's CI case: 6 layers + embedding + loss in 8 slots over p = 4, v = 2 (core.model.stage_split), m = 4.
    # The last device holds all 4 micro-batches of its layer chunk and 1 of its loss-only chunk: 5 chunk visits,
    # 2.5 full-stage units unweighted, 4 layers' worth weighted; the first device's embedding-only chunk weighs 0.
    from core.model.stage_split import end_ratios
    from core.planner.simulation import in_flight
    assert end_ratios(6, 0, 4, 2) == (0.0, 0.0) and end_ratios(32, 0, 4, 2) is None  # 32 layers: 4 on every stage
    plain, weighted = in_flight("interleaved", 4, 4, 2), in_flight("interleaved", 4, 4, 2, ends=(0.0, 0.0))
    assert plain[1] == 2.5 and weighted[1] == 4.0
    assert weighted[0] == 4.0 and weighted[2:] == plain[2:]  # middle devices and the ends' own counts unchanged
    assert in_flight("1f1b", 4, 8, 1, ends=(0.5, 0.5)) == in_flight("1f1b", 4, 8, 1)  # one chunk: nothing to weigh
