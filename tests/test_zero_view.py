"""The ZeRO page's view is assembled in core (core.views.zero) and carries the paper's numbers without streamlit."""

from __future__ import annotations

import pytest

from core.params.memory import ZeroParams
from core.views.zero import ActInputs, preset_shape, zero_view

GB = 1e9


def test_the_view_of_the_default_inputs_is_the_zero_papers_7_5b_column():
    view = zero_view(ZeroParams(), preset_shape("zero-7.5b"), None)
    totals = {bar.key: round(bar.total / GB, 2) for bar in view.bars}
    assert totals == {"dp": 120.0, "zero1": 31.41, "zero2": 16.64, "zero3": 1.88}
    row = view.table1.set_index("N_d").loc[1024] / GB  # the paper's Table 1, N_d = 1024: 120, 30.1, 15.1, 0.12
    assert [round(float(x), 2) for x in row] == [120.0, 30.09, 15.1, 0.12]
    assert view.comm["volume [x Psi]"].tolist() == [2.0, 2.0, 2.0, 3.0]
    assert view.notes == ()
    assert all(bar.activations == 0.0 for bar in view.bars)


def test_activations_are_added_to_every_bar_and_named_when_p_is_beyond_the_simulator():
    shape = preset_shape("gpt3-175b")
    act = ActInputs(micro_batch_size=1, sequence_parallel=True, recompute="selective", schedule="1f1b", m=8, v=2)
    view = zero_view(ZeroParams(params=175_000_000_000, nd=8, t=8, p=8), shape, act)
    assert view.act is not None and view.act.inflight == 8  # 1F1B's first stage holds p micro-batches
    assert {bar.activations for bar in view.bars} == {view.act.report["peak"]}
    assert view.act.report["peak"] > 0
    far = zero_view(ZeroParams(p=128, gpus=0), shape, act)
    assert far.act is None and any("p <= 64" in n for n in far.notes)


@pytest.mark.parametrize("stage", ["1", "2"])
def test_an_offload_a_stage_cannot_do_is_a_note_not_an_error(stage):
    view = zero_view(ZeroParams(stage=stage, offload="optimizer+params"), preset_shape("zero-7.5b"), None)
    assert view.notes and "offload" in view.notes[0]


def test_a_split_finer_than_the_model_names_the_typed_t_p_and_params():
    # issue 11: /zero?t=1024&p=16384&params=1 said "params: 5.96046e-08 is out of range" (a derived value)
    from core.errors import InputError
    from core.params.memory import ZeroParams
    from core.views.zero import build

    with pytest.raises(InputError) as exc:
        build(ZeroParams(params=1, t=1024, p=16384, nd=1, gpus=0))
    message = str(exc.value)
    assert "t x p = 1,024 x 16,384" in message and "Psi = 1 " in message and "e-08" not in message


def _page_inputs(**changes):
    """The ZeRO page's inputs at their defaults (by URL key), with `changes`."""
    from core.params import zero_page as zp
    from core.params.memory import ZERO

    v = {k: s.default for k, s in {**ZERO, **zp.PAGE, **zp.CUSTOM, **zp.ACT}.items()}
    return {**v, **changes}


def test_a_named_model_brings_its_largest_module_to_deepspeeds_zero3_estimate():
    from core.views.zero import from_inputs

    # DeepSpeed's model_to_params: the most parameters one module owns. Llama 3 70B: the embedding,
    # 128,256 x 8,192 = 1,050,673,152 (> one MLP matrix, 8,192 x 28,672); Megatron-LM 1T: one MLP matrix,
    # 25,600 x 102,400 = 2,621,440,000 (> its embedding, 51,200 x 25,600).
    for model, largest in (("llama3-70b", 1_050_673_152), ("megatron-1t", 2_621_440_000)):
        q, shape, act = from_inputs(_page_inputs(model=model, stage="3", offload="optimizer+params", deepspeed=True))
        assert q.largest_layer == largest
        ds = zero_view(q, shape, act).report.as_json()["zero3"]
        assert ds["deepspeed_gpu"] == 4 * largest  # stage 3, parameters offloaded: 4 bytes x the largest layer
    typed, _, _ = from_inputs(_page_inputs(model="llama3-70b", largest_layer=5))
    assert typed.largest_layer == 5  # a typed value wins


def test_dualpipe_activations_come_with_a_note_that_its_model_states_are_doubled():
    act = ActInputs(micro_batch_size=1, sequence_parallel=True, recompute="selective", schedule="dualpipe", m=16, v=2)
    view = zero_view(ZeroParams(params=175_000_000_000, nd=8, t=8, p=8), preset_shape("gpt3-175b"), act)
    assert any("two stages' parameters" in n for n in view.notes)
    v_shape = zero_view(ZeroParams(params=175_000_000_000, nd=8, t=8, p=8), preset_shape("gpt3-175b"),
                        ActInputs(**{**act.__dict__, "schedule": "dualpipev"}))
    assert not any("two stages" in n for n in v_shape.notes)


def test_a_custom_model_without_its_largest_layer_is_told_what_deepspeed_then_counts():
    from core.views.zero import from_inputs

    q, shape, act = from_inputs(_page_inputs(model="custom", deepspeed=True))
    assert q.largest_layer == 0
    notes = zero_view(q, shape, act).notes
    assert any("Largest layer is 0" in n and f"{shape.vocab * shape.hidden:,}" in n for n in notes)
    named, shape, act = from_inputs(_page_inputs(model="llama3-70b", deepspeed=True))
    assert not any("Largest layer" in n for n in zero_view(named, shape, act).notes)
