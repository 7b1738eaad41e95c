"""The plan's memory switches in the exports (core.planner.export_switches): Megatron-LM's flags where it has them,
a note where the command or script runs something else, so the pasted run holds the bytes the plan counted."""

from dataclasses import replace

import pytest

from core.configs import megatron_args
from core.errors import InputError
from core.model import presets
from core.planner.export_deepspeed import deepspeed_export
from core.planner.export_megatron import megatron_export
from core.planner.export_torch import torch_export
from core.planner.layout import Layout


def _layout(**kw) -> Layout:
    base = dict(model=presets.model("llama3-8b"), gpu=presets.gpu("h100-80gb"), t=2, p=2, d=4, global_batch=64,
                zero_stage=1, sequence_parallel=True)
    return Layout(**{**base, **kw})


def _read(layout: Layout) -> dict:
    return megatron_args.read(megatron_export(layout).text).raw


def test_the_default_switches_add_no_flags():
    text = megatron_export(_layout()).text
    for flag in ("--grad-reduce-in-bf16", "--use-precision-aware-optimizer", "--cross-entropy-loss-fusion",
                 "--accumulate-allreduce-grads-in-fp32"):
        assert flag not in text


def test_megatron_flags_read_back_as_the_switches():
    raw = _read(_layout(grad_dtype="bf16", optimizer_dtype="bf16", loss="native"))
    assert (raw["grad_dtype"], raw["optimizer_dtype"], raw["loss"], raw["grad_reduce_bytes"]) == \
        ("bf16", "bf16", "native", "2")
    # under FP16 Megatron-LM's buffer is fp16 unless it is told to accumulate in fp32
    assert _read(_layout(precision="fp16", grad_dtype="fp32"))["grad_dtype"] == "fp32"


def test_what_megatron_cannot_run_is_said_not_flagged():
    art = megatron_export(_layout(loss="fused", optimizer_dtype="bf16", zero_stage=0))
    assert "--cross-entropy-loss-fusion" not in art.text and "--use-precision-aware-optimizer" not in art.text
    said = " ".join(art.notes)
    assert "refused at d98e8a6" in said and "distributed optimizer (ZeRO-1)" in said


def test_scripts_say_which_switches_they_do_not_run():
    switched = _layout(t=1, p=1, d=16, sequence_parallel=False, zero_stage=2, grad_dtype="bf16")
    for export in (torch_export, deepspeed_export):
        notes = " ".join(export(switched).notes)
        assert "gradient buffer bf16" in notes
        assert "gradient buffer" not in " ".join(export(replace(switched, grad_dtype="auto")).notes)


def test_a_layout_refuses_an_unknown_switch():
    with pytest.raises(InputError, match="loss"):
        _layout(loss="chunked")
