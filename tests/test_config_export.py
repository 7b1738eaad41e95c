"""Each export reproduces its layout exactly (read back from the text) or refuses with core.planner.frameworks'
reasons; exports name only options the tools have; bad layouts are InputErrors."""

import ast
import itertools
import json

import pytest

from core.errors import InputError
from core.model import presets
from core.params.pipeline import SCHEDULE_NAMES
from core.planner import frameworks
from core.planner.export_base import framework_refusals
from core.planner.exports import (
    confirmed,
    deepspeed_config,
    deepspeed_export,
    export_all,
    flatten_keys,
    megatron_args,
    megatron_export,
    megatron_parser_flags,
    torch_export,
)
from core.planner.layout import SCHEDULES, Layout, from_published
from tests import export_readers as read


def layouts():
    """Published layouts plus a grid over every switch and schedule, on models where each combination is valid."""
    out = [from_published(k) for k in presets.model_keys() if presets.model(k).layout is not None]
    llama, gpt3, h100, v100 = (presets.model("llama3-70b"), presets.model("gpt3-175b"), presets.gpu("h100-80gb"),
                               presets.gpu("v100-32gb"))
    for t, p, zero, offload, recompute, sp in itertools.product((1, 8), (1, 4), range(4),
                                                                ("none", "optimizer", "optimizer+params"),
                                                                ("none", "selective", "full"), (False, True)):
        if (offload != "none" and zero == 0) or (offload == "optimizer+params" and zero != 3):
            continue
        out.append(Layout(model=llama, gpu=h100, t=t, p=p, d=8, global_batch=256, micro_batch_size=2,
                          zero_stage=zero, offload=offload, recompute=recompute, sequence_parallel=sp))
    for schedule, zero in itertools.product(SCHEDULES, range(4)):
        v = {"interleaved": 4, "zbv": 2, "dualpipev": 2}.get(schedule, 1)
        out.append(Layout(model=gpt3, gpu=v100, t=4, p=8, d=2, global_batch=64, schedule=schedule, v=v,
                          precision="fp16", zero_stage=zero))
    out.append(Layout(model=gpt3, gpu=h100, t=1, p=1, d=4, global_batch=8, zero_stage=0))   # one server
    # the plan's memory switches as flags (core.planner.export_switches)
    out.append(Layout(model=llama, gpu=h100, t=8, p=4, d=2, global_batch=64, zero_stage=1, grad_dtype="bf16",
                      optimizer_dtype="bf16", loss="native"))
    out.append(Layout(model=gpt3, gpu=v100, t=4, p=8, d=2, global_batch=64, precision="fp16", zero_stage=1,
                      grad_dtype="fp32"))
    # Context and expert parallelism, FP8, MoE and latent attention (issue 12): published and synthetic.
    out.append(from_published("llama3-405b", which=1, zero_stage=1))  # Llama 3's 128K stage, CP 16
    out.append(from_published("deepseek-v3", schedule="1f1b", v=1))    # EP 64, FP8, MLA, 3 dense layers
    mixtral = presets.model("mixtral-8x7b")
    for cp, ep, zero, precision in itertools.product((1, 2), (1, 8), (1, 3), ("bf16", "fp8")):
        out.append(Layout(model=mixtral, gpu=h100, t=1, p=1, d=8, global_batch=64, cp=cp, ep=ep, zero_stage=zero,
                          precision=precision))
    for cp, sp, zero in itertools.product((2, 4), (False, True), (1, 3)):
        out.append(Layout(model=llama, gpu=h100, t=2, p=2 if zero == 1 else 1, d=2, cp=cp, global_batch=32,
                          zero_stage=zero, sequence_parallel=sp))
    return out


LAYOUTS = layouts()
EXPORTERS = {"megatron": megatron_export, "deepspeed": deepspeed_export, "torch": torch_export}


def read_back(key, export):
    if key == "megatron":
        return read.megatron(export.text)
    if key == "deepspeed":
        return read.deepspeed(export.text, export.setup)
    return read.torch_script(export.text)


def test_layout_schedules_are_engine_schedules():
    assert set(SCHEDULES) <= set(SCHEDULE_NAMES)


@pytest.mark.parametrize("key", EXPORTERS)
def test_every_export_reproduces_its_layout_or_refuses_with_the_tables_reasons(key):
    exported = refused = 0
    for layout in LAYOUTS:
        art = EXPORTERS[key](layout)
        reasons = framework_refusals(layout, key)
        assert list(art.refused) == reasons
        if reasons:
            assert art.text == "" and refused >= 0
            refused += 1
            continue
        exported += 1
        assert read_back(key, art) == read.of_layout(layout), (key, layout)
    assert exported > 10 and refused > 5  # the grid exercises both sides for every framework


def test_what_each_framework_refuses_is_what_its_engine_refuses():
    gpt3, h100 = presets.model("gpt3-175b"), presets.gpu("h100-80gb")
    base = dict(model=gpt3, gpu=h100, t=8, p=8, d=2, global_batch=64)
    zero3_pipe = Layout(zero_stage=3, **base)
    assert "incompatible with pipeline parallelism" in deepspeed_export(zero3_pipe).refused[0]  # engine.py assert
    assert deepspeed_export(Layout(zero_stage=1, **base)).text  # ZeRO-1 with the pipeline engine: exported
    zb = Layout(zero_stage=2, schedule="zb-h1", **base)
    assert megatron_export(zb).refused and deepspeed_export(zb).refused and not torch_export(zb).refused
    selective = Layout(zero_stage=1, recompute="selective", **base)
    assert deepspeed_export(selective).refused and not megatron_export(selective).refused
    offload_params = Layout(**{**base, "p": 1, "d": 16}, zero_stage=3, offload="optimizer+params")
    assert megatron_export(offload_params).refused and not deepspeed_export(offload_params).refused
    assert set(frameworks.TABLE) == {"megatron", "deepspeed", "torch"}
    for f in frameworks.TABLE.values():
        assert all(len(src) > 30 for src in f.sources.values()), f.key


@pytest.mark.parametrize("layout", LAYOUTS)
def test_deepspeed_json_round_trips_and_uses_confirmed_keys(layout):
    art = deepspeed_export(layout)
    if art.refused:
        return
    cfg, _ = deepspeed_config(layout)
    assert json.loads(art.text) == cfg
    assert set(flatten_keys(cfg)) <= set(confirmed()["deepspeed"]["options"])
    zero = cfg["zero_optimization"]
    assert "offload_param" not in zero or zero["stage"] == 3
    assert all(not k.startswith("stage3_") for k in zero) or zero["stage"] == 3
    assert "overlap_comm" not in zero or zero["stage"] >= 2
    assert layout.p == 1 or zero["stage"] <= 1   # the pipeline engine's assert
    assert ("bf16" in cfg) == (layout.half == "bf16") and ("fp16" in cfg) == (layout.half == "fp16")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_megatron_command_flags_exist_in_the_pinned_parser_each_with_its_value(layout):
    art = megatron_export(layout)
    if art.refused:
        return
    ws = read.words(art.text)
    parser = megatron_parser_flags()
    known = set(parser["flags"]) | set(confirmed()["torchrun"]["flags"])
    assert {w for w in ws if w.startswith("--")} <= known
    assert {w for w in ws if w.startswith("--")} - set(confirmed()["torchrun"]["flags"]) <= \
        set(confirmed()["megatron"]["flags"])
    env = [w.split("=")[0] for w in ws if "=" in w and not w.startswith("--")]
    assert set(env) <= set(confirmed()["megatron"]["env"])
    start = ws.index(confirmed()["megatron"]["entry"])
    args = ws[start + 1:]
    for i, w in enumerate(args):
        if w.startswith("--") and w not in parser["switches"]:
            assert i + 1 < len(args) and not args[i + 1].startswith("--"), f"{w} has no value"
            if w in parser["choices"]:  # an enum-typed flag lists its members (AttnBackend.unfused) and takes names
                names = {c.split(".", 1)[-1] for c in parser["choices"][w]} | set(parser["choices"][w])
                assert args[i + 1] in names, (w, args[i + 1])
        elif w.startswith("--"):
            assert i + 1 == len(args) or args[i + 1].startswith("--"), f"{w} takes no value"


def test_the_megatron_flag_list_is_pinned_and_complete():
    parser = megatron_parser_flags()
    assert parser["release"] == frameworks.MEGATRON_RELEASE and parser["commit"] == frameworks.MEGATRON_COMMIT
    assert len(parser["flags"]) > 800 and set(parser["switches"]) <= set(parser["flags"])
    assert set(confirmed()["megatron"]["flags"]) <= set(parser["flags"])


def _flag(words, name):
    return words[words.index(name) + 1]


def test_bloom_published_layout_exports():
    lay = from_published("bloom-176b")
    ws = read.words(megatron_export(lay).text)
    assert (_flag(ws, "--tensor-model-parallel-size"), _flag(ws, "--pipeline-model-parallel-size")) == ("4", "12")
    assert (_flag(ws, "--micro-batch-size"), _flag(ws, "--global-batch-size")) == ("2", "2048")
    assert (_flag(ws, "--nnodes"), _flag(ws, "--nproc-per-node")) == ("48", "8")
    assert _flag(ws, "--recompute-granularity") == "full" and "--use-distributed-optimizer" in ws
    assert "--account-for-embedding-in-pipeline-split" in ws          # (70 + 2) / 12 = 6 per stage
    art = deepspeed_export(lay)          # BLOOM trained with DeepSpeed's pipeline engine, ZeRO-1, t = 4 from Megatron
    cfg = json.loads(art.text)
    assert (cfg["gradient_accumulation_steps"], cfg["zero_optimization"]["stage"], cfg["bf16"]) == \
        (128, 1, {"enabled": True})
    assert "PipeModelDataParallelTopology(num_pp=12, num_mp=4, num_dp=8)" in art.setup
    assert cfg["pipeline"] == {"activation_checkpoint_interval": 1}


def test_llama_405b_published_layout_exports():
    ws = read.words(megatron_export(from_published("llama3-405b", zero_stage=1)).text)
    assert _flag(ws, "--num-query-groups") == "8" and "--group-query-attention" in ws
    assert _flag(ws, "--num-virtual-stages-per-pipeline-rank") == "2"
    assert "--sequence-parallel" in ws and "--swiglu" in ws and "--untie-embeddings-and-output-weights" in ws
    assert "--account-for-loss-in-pipeline-split" in ws               # (126 + 2) / 16 = 8 per stage
    assert _flag(ws, "--nnodes") == "1024" and ws[0] == "CUDA_DEVICE_MAX_CONNECTIONS=1"
    # As published (FSDP, ZeRO-3-like, with p = 16): Megatron-FSDP with a pipeline is not confirmed, so refused.
    assert "ZeRO 0 or 1 with pipeline parallelism" in megatron_export(from_published("llama3-405b")).refused[0]


def test_uneven_layers_get_explicit_first_and_last_stages():
    m = presets.model("gpt3-175b")          # 96 layers over 10 stages: 8 middle stages of 10, 8 + 8 at the ends
    lay = Layout(model=m, gpu=presets.gpu("h100-80gb"), t=8, p=10, d=1, global_batch=16)
    args, notes = megatron_args(lay)
    first = int(_flag(args, "--decoder-first-pipeline-num-layers"))
    last = int(_flag(args, "--decoder-last-pipeline-num-layers"))
    assert (first, last) == (8, 8) and first + last + (10 - 2) * 10 == 96
    assert any("first 8, last 8" in n for n in notes)


def test_no_export_falls_back_to_another_schedule():
    for lay in LAYOUTS:
        for art in export_all(lay).values():
            assert not any("falls back" in n for n in art.notes + art.refused)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_torch_script_parses_and_uses_confirmed_names(layout):
    art = torch_export(layout)
    if art.refused:
        return
    tree = ast.parse(art.text)
    names = set(confirmed()["pytorch"]["names"])
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module.startswith("torch.distributed."):
            for alias in node.names:
                assert f"{node.module}.{alias.name}" in names, alias.name
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "fully_shard", "MixedPrecisionPolicy", "CPUOffloadPolicy", "init_device_mesh"):
            for kw in node.keywords:
                assert f"{node.func.id}({kw.arg}=)" in names
    assert ("fully_shard(" in art.text) == (layout.zero_stage >= 2)
    assert ("ZeroRedundancyOptimizer(" in art.text) == (layout.zero_stage == 1)
    assert ("CPUOffloadPolicy(" in art.text) == (layout.offload != "none")
    assert "placeholder" not in art.text and "build_model" not in art.text


def test_torch_notes_explain_the_zero_mapping():
    base = dict(model=presets.model("llama3-8b"), gpu=presets.gpu("h100-80gb"), t=1, p=1, d=8, global_batch=64)
    notes = {z: " ".join(torch_export(Layout(zero_stage=z, **base)).notes) for z in range(4)}
    assert "ZeRO-3 = reshard_after_forward=True" in notes[3]
    assert "ZeRO-2 = reshard_after_forward=False" in notes[2]
    assert "ZeroRedundancyOptimizer" in notes[1] and "DistributedDataParallel" in notes[0]


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
