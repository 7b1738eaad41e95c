"""Every export reads back (python -m core check) to the row it was exported from: the same layout, memory and step
time. What an export cannot carry (the GPU; for DeepSpeed the model, which lives in code) is given with the check."""

import math

import pytest

from core.configs.check import check
from core.params.planner import PlannerParams
from core.planner import plan as planner

CASES = [  # (question, pinned layout, export kinds)
    ({"model": "llama3-70b", "gpus": "64", "batch": "512"},
     {"fix_t": "8", "fix_p": "4", "zero": "1", "mb_sizes": "1", "schedule": "interleaved", "v": "5",
      "recompute": "selective", "sp": "on", "tp_comm_overlap": "off"}, ("megatron",)),
    ({"model": "gpt3-175b", "gpus": "512", "batch": "1536", "gpu": "a100-80gb"},
     {"fix_t": "8", "fix_p": "8", "zero": "1", "mb_sizes": "1", "schedule": "1f1b", "recompute": "full",
      "sp": "off", "tp_comm_overlap": "off"}, ("megatron",)),
    ({"model": "mixtral-8x7b", "gpus": "64", "batch": "256"},
     {"fix_t": "2", "fix_p": "4", "fix_cp": "1", "fix_ep": "8", "zero": "1", "mb_sizes": "1", "schedule": "1f1b",
      "recompute": "selective", "sp": "on", "tp_comm_overlap": "off"}, ("megatron",)),
    ({"model": "llama3-8b", "gpus": "16", "batch": "64"},
     {"fix_t": "2", "fix_p": "2", "zero": "3", "mb_sizes": "1", "schedule": "1f1b", "recompute": "full",
      "sp": "on", "tp_comm_overlap": "off", "reshard": "on"}, ("torch",)),
    ({"model": "llama3-8b", "gpus": "16", "batch": "64"},
     {"fix_t": "1", "fix_p": "4", "zero": "1", "mb_sizes": "2", "schedule": "interleaved", "v": "2",
      "recompute": "none", "sp": "off", "tp_comm_overlap": "off"}, ("torch",)),
    ({"model": "llama3-8b", "gpus": "16", "batch": "64"},
     {"fix_t": "1", "fix_p": "4", "zero": "2", "mb_sizes": "1", "schedule": "gpipe", "recompute": "selective",
      "sp": "off", "tp_comm_overlap": "off"}, ("torch",)),
    ({"model": "llama3-8b", "gpus": "16", "batch": "64"},
     {"fix_t": "1", "fix_p": "2", "zero": "1", "mb_sizes": "1", "schedule": "1f1b", "recompute": "full",
      "sp": "off", "tp_comm_overlap": "off"}, ("deepspeed", "megatron", "torch")),
    # hybrid sharding: Megatron-LM's optimizer instances, FSDP2 on a (replicate, shard[, cp]) mesh
    ({"model": "llama3-70b", "gpus": "128", "batch": "256"},
     {"fix_t": "8", "fix_p": "2", "fix_replicate": "4", "zero": "1", "mb_sizes": "1", "schedule": "1f1b",
      "recompute": "selective", "sp": "on", "tp_comm_overlap": "off"}, ("megatron",)),
    ({"model": "llama3-8b", "gpus": "32", "batch": "64", "seq": "16384"},
     {"fix_t": "2", "fix_p": "1", "fix_cp": "2", "fix_replicate": "2", "zero": "3", "mb_sizes": "1",
      "recompute": "full", "sp": "on", "tp_comm_overlap": "off", "reshard": "on"}, ("torch",)),
    # DeepSpeed without a pipeline: ZeRO-3 with both offloads, AutoTP with ZeRO-2
    ({"model": "llama3-8b", "gpus": "8", "batch": "32"},
     {"fix_t": "1", "fix_p": "1", "zero": "3", "mb_sizes": "1", "offload": "optimizer+params", "recompute": "full",
      "sp": "off", "tp_comm_overlap": "off", "reshard": "on"}, ("deepspeed", "torch")),
    ({"model": "llama3-8b", "gpus": "16", "batch": "64"},
     {"fix_t": "2", "fix_p": "1", "zero": "2", "mb_sizes": "2", "recompute": "none", "sp": "off",
      "tp_comm_overlap": "off"}, ("deepspeed", "torch")),
    # full recompute on the first N layers of each stage only (Megatron's block method; the script's RECOMPUTE_LAYERS)
    ({"model": "llama3-8b", "gpus": "16", "batch": "64"},
     {"fix_t": "1", "fix_p": "4", "zero": "1", "mb_sizes": "1", "schedule": "1f1b", "recompute": "full",
      "recompute_layers": "3", "sp": "off", "tp_comm_overlap": "off"}, ("megatron", "torch")),
    # the memory switches the Megatron command carries: bf16 gradient buffer (reduced in bf16), the precision-aware
    # optimizer's bf16 moments, the native fused cross-entropy
    ({"model": "llama3-8b", "gpus": "16", "batch": "64", "grad_dtype": "bf16", "optimizer_dtype": "bf16",
      "loss": "native"},
     {"fix_t": "2", "fix_p": "2", "zero": "1", "mb_sizes": "1", "schedule": "1f1b", "recompute": "selective",
      "sp": "on", "tp_comm_overlap": "off"}, ("megatron",)),
    # every pipeline schedule the torch export writes (its own classes, or our action table in its runtime)
    *(({"model": "llama3-8b", "gpus": "16", "batch": "64"},
       {"fix_t": "1", "fix_p": "4", "zero": "1", "mb_sizes": "1", "schedule": sched, "recompute": "none",
        "sp": "off", "tp_comm_overlap": "off", **({"v": "2"} if sched == "interleaved" else {})}, ("torch",))
      for sched in ("1f1b", "zb-h1", "zb-h2", "zbv", "dualpipev")),
]


def _original(question, pins):
    q = PlannerParams.from_strings({**question, **pins, "framework": "any"})
    result = planner.plan(q)
    assert len(result.frame) == 1, "the pins leave one row"
    return q, result, result.frame.iloc[0]


@pytest.mark.parametrize(("question", "pins", "kinds"), CASES)
def test_each_export_reads_back_to_its_row(question, pins, kinds):
    q, result, row = _original(question, pins)
    for kind in kinds:
        art = result.export(kind, row)
        assert not art.refused, (kind, art.refused)
        given = {"gpu": q.gpu}
        if kind == "deepspeed":  # the JSON has no model and no t / p: those are the setup code's and the model's
            files = [("ds_config.json", art.text)] + ([("setup.py", art.setup)] if art.setup else [])
            given.update(model=q.model, seq=str(result.model.seq))
        else:
            files = [("train.sh" if kind == "megatron" else "train_torch.py", art.text)]
        framework = {"megatron": "megatron", "torch": "torch", "deepspeed": "deepspeed"}[kind]
        done = check(files, {**given, "memory_framework": framework})
        back = done.row
        for col in ("t", "p", "d", "cp", "ep", "replicate", "micro_batch_size", "m", "schedule", "v", "zero_stage",
                    "recompute", "recompute_layers", "sequence_parallel", "offload"):
            assert back[col] == row[col], (kind, col, back[col], row[col])
        again = planner.plan(PlannerParams.from_strings({**question, **pins, "framework": "any",
                                                          "memory_framework": framework})).frame.iloc[0]
        for col in ("memory_bytes", "activation_bytes", "model_state_bytes", "step_time_s", "bubble_fraction",
                    "dp_comm_s"):
            assert _same(back[col], again[col]), (kind, col, back[col], again[col])
        assert back["fits"] == again["fits"] and back["feasible"] == again["feasible"]


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9)
