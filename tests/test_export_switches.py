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
        _layout(loss="liger")


def test_qk_norm_is_exported_and_read_back_as_the_preset():
    # Qwen3 normalises q and k per head: the command says --qk-layernorm, and reading it back gives Qwen3's preset
    # (an architecture without it would be a custom model whose activations miss the norms' inputs)
    qwen = _layout(model=presets.model("qwen3-32b"), t=8, p=1, d=8)
    assert "--qk-layernorm" in megatron_export(qwen).text
    assert _read(qwen)["model"] == "qwen3-32b"
    assert "--qk-layernorm" not in megatron_export(_layout()).text
    # with latent attention the flag norms the latents, which MLA counts already: not exported, read as no effect
    dsv3 = replace(presets.model("deepseek-v3"), qk_norm=True)
    mla = _layout(model=dsv3, t=1, p=8, d=8, ep=8, sequence_parallel=False)
    assert "--qk-layernorm" not in megatron_export(mla).text


def test_grouped_gemm_is_exported_and_read_back():
    # the plan counts Transformer Engine's grouped-GEMM workspaces: the command asks for it, and a script without the
    # flag reads as Megatron-LM's default SequentialMLP (no workspaces)
    mixtral = presets.model("mixtral-8x7b")
    moe = _layout(model=mixtral, t=1, p=1, d=8, ep=8, sequence_parallel=False)
    assert "--moe-grouped-gemm" in megatron_export(moe).text
    assert _read(moe)["grouped_gemm"] == "true"
    plain = replace(moe, grouped_gemm=False)
    assert "--moe-grouped-gemm" not in megatron_export(plain).text
    assert _read(plain)["grouped_gemm"] == "false"


def test_recompute_modules_are_exported_and_read_back():
    # selective recompute with the plan's modules: the ones this model has, in --recompute-modules (Megatron's
    # default, core_attn alone, needs none); a script's list reads back as the planner input
    mixtral = presets.model("mixtral-8x7b")
    moe = _layout(model=mixtral, t=1, p=1, d=8, ep=8, sequence_parallel=False, recompute="selective",
                  recompute_modules=("layernorm", "moe_act"))
    assert _flag(megatron_export(moe).text, "--recompute-modules") == "layernorm moe_act"
    assert _read(moe)["recompute_modules"] == "layernorm,moe_act"
    dense = _layout(recompute="selective")  # the default (core_attn, mla_up_proj) on a model without MLA
    text = megatron_export(dense).text
    assert "--recompute-granularity selective" in text and "--recompute-modules" not in text
    assert _read(dense)["recompute_modules"] == "core_attn"  # a script without the list: Megatron's default
    mla = megatron_export(_layout(model=presets.model("deepseek-v3"), t=1, p=8, d=8, ep=8, sequence_parallel=False,
                                  recompute="selective"))
    assert _flag(mla.text, "--recompute-modules") == "core_attn mla_up_proj"
    no_grouped = megatron_export(replace(moe, grouped_gemm=False))
    assert _flag(no_grouped.text, "--recompute-modules") == "layernorm"
    assert any("refuses moe_act" in n for n in no_grouped.notes)


def _flag(text: str, flag: str) -> str:
    """The values after `flag` in an exported command, up to the next flag (the command wraps long lists)."""
    words = text.replace("\\\n", " ").split()
    at = words.index(flag) + 1
    values = []
    while at < len(words) and not words[at].startswith("--"):
        values.append(words[at])
        at += 1
    return " ".join(values)


def test_the_default_recompute_modules_say_nothing_on_a_model_without_latent_attention():
    # the default (core_attn, mla_up_proj) on a dense Llama: Megatron's default selective, no list and no note
    export = megatron_export(_layout(recompute="selective"))
    assert "--recompute-modules" not in export.text
    assert not any("recompute" in n for n in export.notes)
    layernorm = megatron_export(_layout(recompute="selective", recompute_modules=("core_attn", "layernorm")))
    assert any("leaves out layernorm" in n for n in layernorm.notes)  # asked for, and no such module here


def test_pure_bf16_counts_no_master_and_megatron_says_it_keeps_one():
    # The optimizer steps the 16-bit weights: 2 (weights) + 2 (gradients) + 4 (bf16 Adam moments) bytes per parameter
    # in every framework's accounting, against 4 + 4 + 8 for FSDP2's mixed precision and 2 + 4 + 12 for Megatron-LM's
    from core.memory import framework_terms
    from core.memory.states import BytesPerParam
    adam = BytesPerParam(2.0, 2.0, 12.0)
    for key, mixed in (("torch", 16.0), ("megatron", 18.0), ("deepspeed", 16.0)):
        kw = framework_terms.state_kwargs(key, adam, False, 1.0)
        pure = framework_terms.state_kwargs(key, adam, False, 1.0, optimizer_dtype="pure-bf16")
        assert kw["param_bytes"] + kw["grad_bytes"] + kw["k"] == mixed, key
        assert (pure["param_bytes"], pure["grad_bytes"], pure["k"]) == (2.0, 2.0, 4.0), key
    # a gradient buffer the user names still wins (FSDP2 with reduce_dtype fp32 keeps bf16 shards: auto)
    assert framework_terms.state_kwargs("torch", adam, False, 1.0, "fp32", "pure-bf16")["grad_bytes"] == 4.0
    art = megatron_export(_layout(optimizer_dtype="pure-bf16"))
    assert "--use-precision-aware-optimizer" not in art.text
    assert any("always keeps an fp32 main copy" in n for n in art.notes)
