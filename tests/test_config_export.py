"""Exports name only confirmed options, round-trip, and agree with the layout; bad layouts are InputErrors."""

import ast
import itertools
import json
import shlex

import pytest

from core.errors import InputError
from core.model import presets
from core.params.pipeline import SCHEDULE_NAMES
from core.planner.exports import (
    confirmed,
    deepspeed_config,
    deepspeed_export,
    export_all,
    flatten_keys,
    fsdp2_export,
    megatron_args,
    megatron_export,
)
from core.planner.layout import SCHEDULES, Layout, from_published

# Megatron flags that take no value (action='store_true' in megatron/training/arguments.py).
MEGATRON_SWITCHES = {"--sequence-parallel", "--use-distributed-optimizer", "--overlap-grad-reduce",
                     "--overlap-param-gather", "--use-megatron-fsdp", "--optimizer-cpu-offload",
                     "--use-precision-aware-optimizer", "--bf16", "--fp16", "--group-query-attention", "--swiglu",
                     "--untie-embeddings-and-output-weights", "--disable-bias-linear", "--mock-data",
                     "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
                     "--standalone"}


def layouts():
    """Published layouts plus a grid over the switches, on small models so every combination is valid."""
    out = [from_published(k) for k in presets.model_keys() if presets.model(k).layout is not None]
    llama, gpt3, h100, v100 = (presets.model("llama3-70b"), presets.model("gpt3-175b"), presets.gpu("h100-80gb"),
                               presets.gpu("v100-32gb"))
    for zero, offload, recompute, sp in itertools.product(range(4), ("none", "optimizer", "optimizer+params"),
                                                          ("none", "selective", "full"), (False, True)):
        if (offload != "none" and zero == 0) or (offload == "optimizer+params" and zero != 3):
            continue
        out.append(Layout(model=llama, gpu=h100, t=8, p=1, d=16, global_batch=256, micro_batch_size=2,
                          zero_stage=zero, offload=offload, recompute=recompute, sequence_parallel=sp))
    for schedule in SCHEDULES:
        v = {"interleaved": 4, "zbv": 2, "dualpipev": 2}.get(schedule, 1)
        out.append(Layout(model=gpt3, gpu=v100, t=4, p=8, d=2, global_batch=64, schedule=schedule, v=v,
                          precision="fp16", zero_stage=1))
    out.append(Layout(model=gpt3, gpu=h100, t=1, p=1, d=4, global_batch=8, zero_stage=0))   # one server
    return out


LAYOUTS = layouts()


def test_layout_schedules_are_engine_schedules():
    assert set(SCHEDULES) <= set(SCHEDULE_NAMES)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_deepspeed_json_round_trips_and_uses_confirmed_keys(layout):
    cfg, _ = deepspeed_config(layout)
    text = deepspeed_export(layout).text
    assert json.loads(text) == cfg
    allowed = set(confirmed()["deepspeed"]["options"])
    assert set(flatten_keys(cfg)) <= allowed
    assert cfg["train_batch_size"] == (cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"]
                                       * layout.d)
    zero = cfg["zero_optimization"]
    assert zero["stage"] == layout.zero_stage
    assert ("offload_param" in zero) == (layout.offload == "optimizer+params")
    assert ("offload_optimizer" in zero) == (layout.offload != "none")
    assert "offload_param" not in zero or zero["stage"] == 3
    assert all(not k.startswith("stage3_") for k in zero) or zero["stage"] == 3
    assert "overlap_comm" not in zero or zero["stage"] >= 2
    assert ("bf16" in cfg) == (layout.half == "bf16") and ("fp16" in cfg) == (layout.half == "fp16")


def _words(command: str) -> list[str]:
    body = "\n".join(line for line in command.splitlines() if not line.startswith("#"))
    return shlex.split(body.replace("$MASTER_ADDR", "node0"))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_megatron_command_uses_confirmed_flags_each_with_its_value(layout):
    words = _words(megatron_export(layout).text)
    known = set(confirmed()["megatron"]["flags"]) | set(confirmed()["torchrun"]["flags"])
    assert {w for w in words if w.startswith("--")} <= known
    env = [w.split("=")[0] for w in words if "=" in w and not w.startswith("--")]
    assert set(env) <= set(confirmed()["megatron"]["env"])
    assert confirmed()["megatron"]["entry"] in words
    for i, w in enumerate(words):
        if w.startswith("--") and w not in MEGATRON_SWITCHES:
            assert i + 1 < len(words) and not words[i + 1].startswith("--"), f"{w} has no value"


def _flag(words, name):
    return words[words.index(name) + 1]


def test_bloom_published_layout_exports():
    lay = from_published("bloom-176b")
    words = _words(megatron_export(lay).text)
    assert (_flag(words, "--tensor-model-parallel-size"), _flag(words, "--pipeline-model-parallel-size")) == ("4", "12")
    assert (_flag(words, "--micro-batch-size"), _flag(words, "--global-batch-size")) == ("2", "2048")
    assert (_flag(words, "--nnodes"), _flag(words, "--nproc-per-node")) == ("48", "8")
    assert _flag(words, "--recompute-granularity") == "full" and "--use-distributed-optimizer" in words
    assert "--account-for-embedding-in-pipeline-split" in words          # (70 + 2) / 12 = 6 per stage
    cfg, _ = deepspeed_config(lay)
    assert (cfg["gradient_accumulation_steps"], cfg["zero_optimization"]["stage"], cfg["bf16"]) == \
        (128, 1, {"enabled": True})


def test_llama_405b_published_layout_exports():
    words = _words(megatron_export(from_published("llama3-405b")).text)
    assert _flag(words, "--num-query-groups") == "8" and "--group-query-attention" in words
    assert _flag(words, "--num-virtual-stages-per-pipeline-rank") == "2"
    assert "--sequence-parallel" in words and "--swiglu" in words and "--untie-embeddings-and-output-weights" in words
    assert "--account-for-loss-in-pipeline-split" in words               # (126 + 2) / 16 = 8 per stage
    assert _flag(words, "--nnodes") == "1024" and words[0] == "CUDA_DEVICE_MAX_CONNECTIONS=1"


def test_uneven_layers_get_explicit_first_and_last_stages():
    m = presets.model("gpt3-175b")          # 96 layers over 10 stages: 8 middle stages of 10, 8 + 8 at the ends
    lay = Layout(model=m, gpu=presets.gpu("h100-80gb"), t=8, p=10, d=1, global_batch=16)
    args, notes = megatron_args(lay)
    first = int(_flag(args, "--decoder-first-pipeline-num-layers"))
    last = int(_flag(args, "--decoder-last-pipeline-num-layers"))
    assert (first, last) == (8, 8) and first + last + (10 - 2) * 10 == 96
    assert any("first 8, last 8" in n for n in notes)


@pytest.mark.parametrize("schedule,needle", [("zb-h1", "no switch"), ("zb-h2", "no switch"), ("zbv", "no switch"),
                                             ("dualpipev", "no switch"), ("gpipe", "no GPipe")])
def test_schedules_without_a_tool_switch_are_explained_not_invented(schedule, needle):
    lay = next(x for x in LAYOUTS if x.schedule == schedule)
    for name, export in export_all(lay).items():
        if name != "fsdp2" or lay.p > 1:
            assert any(needle in n for n in export.notes), name
    assert not any("zero-bubble" in w or "dualpipe" in w for w in _words(megatron_export(lay).text))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_fsdp2_snippet_parses_and_uses_confirmed_names(layout):
    text = fsdp2_export(layout).text
    tree = ast.parse(text)
    names = set(confirmed()["pytorch"]["names"])
    imported = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module.startswith("torch.distributed."):
            for alias in node.names:
                assert f"{node.module}.{alias.name}" in names
                imported[alias.name] = node.module
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "fully_shard", "MixedPrecisionPolicy", "CPUOffloadPolicy", "init_device_mesh"):
            for kw in node.keywords:
                assert f"{node.func.id}({kw.arg}=)" in names
    assert "fully_shard" in imported and "MixedPrecisionPolicy" in imported
    assert ("CPUOffloadPolicy" in imported) == (layout.offload != "none")
    assert f"reshard_after_forward={layout.zero_stage == 3}" in text
    assert ('"tp"' in text) == (layout.t > 1)


def test_fsdp2_notes_explain_the_zero_mapping():
    base = dict(model=presets.model("llama3-8b"), gpu=presets.gpu("h100-80gb"), t=1, p=1, d=8, global_batch=64)
    notes = {z: " ".join(fsdp2_export(Layout(zero_stage=z, **base)).notes) for z in range(4)}
    assert "ZeRO-3 ~ reshard_after_forward=True" in notes[3]
    assert "ZeRO-2 ~ reshard_after_forward=False" in notes[2]
    assert "no optimizer-state-only sharding" in notes[1]


@pytest.mark.parametrize("change,needle", [
    ({"global_batch": 100}, "multiple of micro-batch"),
    ({"t": 0}, "at least 1"),
    ({"t": 5}, "heads"),
    ({"zero_stage": 4}, "not 0, 1, 2 or 3"),
    ({"zero_stage": 0, "offload": "optimizer"}, "ZeRO stage 1"),
    ({"zero_stage": 2, "offload": "optimizer+params"}, "stage 3"),
    ({"schedule": "interleaved"}, "v >= 2"),
    ({"schedule": "zbv", "v": 3}, "v = 2"),
    ({"schedule": "pipedream"}, "not allowed"),
    ({"recompute": "some"}, "not allowed"),
    ({"d": 100000}, "out of range"),
    ({"gpu": presets.gpu("v100-32gb")}, "BF16"),
    ({"sequence_parallel": "yes"}, "true or false"),
])
def test_hostile_layouts_raise_input_error(change, needle):
    base = dict(model=presets.model("gpt3-175b"), gpu=presets.gpu("a100-80gb"), t=8, p=4, d=4, global_batch=64,
                micro_batch_size=2)
    with pytest.raises(InputError, match=needle):
        Layout(**{**base, **change})


def test_every_confirmed_list_names_its_source():
    for tool in ("deepspeed", "megatron", "torchrun", "pytorch"):
        assert len(confirmed()[tool]["source"]) > 30
