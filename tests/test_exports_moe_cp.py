"""Exports for context and expert parallelism, MoE and latent attention, FP8 (issue 12).

Flags are checked against the pinned Megatron-LM parser (assets/megatron_flags.json, core_v0.19.0) by
test_config_export.py; here: the values. Layouts: DeepSeek-V3 (arXiv:2412.19437: PP 16, EP 64, ZeRO-1, FP8, first
3 layers dense) and Llama 3 405B's 128K stage (arXiv:2407.21783 Table 4: TP 8, CP 16, PP 16).
"""

import ast

from core.model import presets
from core.planner.export_deepspeed import deepspeed_export
from core.planner.export_megatron import megatron_export
from core.planner.export_torch import torch_export
from core.planner.layout import Layout, from_published
from tests import export_readers as read

H100 = presets.gpu("h100-80gb")


def _flags(text: str) -> dict:
    ws = read.words(text)
    return {w: ws[i + 1] if i + 1 < len(ws) and not ws[i + 1].startswith("--") else True
            for i, w in enumerate(ws) if w.startswith("--")}


def test_megatron_writes_deepseek_v3s_experts_latent_attention_and_fp8():
    art = megatron_export(from_published("deepseek-v3", schedule="1f1b", v=1))
    assert not art.refused
    f = _flags(art.text)
    assert (f["--num-experts"], f["--moe-router-topk"], f["--moe-ffn-hidden-size"]) == ("256", "8", "2048")
    assert (f["--expert-model-parallel-size"], f["--expert-tensor-parallel-size"]) == ("64", "1")
    assert f["--moe-shared-expert-intermediate-size"] == "2048" and f["--moe-layer-freq"] == "([0]*3+[1]*58)"
    assert f["--multi-latent-attention"] is True and (f["--q-lora-rank"], f["--kv-lora-rank"]) == ("1536", "512")
    assert (f["--qk-head-dim"], f["--qk-pos-emb-head-dim"], f["--v-head-dim"]) == ("128", "64", "128")
    assert f["--fp8-format"] == "hybrid" and f["--fp8-param-gather"] is True and f["--bf16"] is True
    assert "--context-parallel-size" not in f
    assert read.megatron(art.text)["d"] == 128


def test_megatron_writes_llamas_128k_context_parallelism():
    art = megatron_export(from_published("llama3-405b", which=1, zero_stage=1))
    f = _flags(art.text)
    assert (f["--context-parallel-size"], f["--cp-comm-type"], f["--seq-length"]) == ("16", "p2p", "131072")
    assert (f["--tensor-model-parallel-size"], f["--pipeline-model-parallel-size"]) == ("8", "16")
    assert read.megatron(art.text)["d"] == 8  # 16,384 / (8 x 16 x 16)
    assert any("8,192 tokens each" in n for n in art.notes)


def test_deepspeed_says_plainly_what_its_config_cannot_express():
    mixtral = presets.model("mixtral-8x7b")
    base = dict(model=mixtral, gpu=H100, t=1, p=1, d=8, global_batch=64, zero_stage=2)
    ep = deepspeed_export(Layout(ep=8, **base))
    assert ep.text == "" and "deepspeed.moe.layer.MoE(ep_size=...)" in ep.refused[0]
    cp = deepspeed_export(Layout(cp=2, **base))
    assert "Ulysses" in cp.refused[0]
    fp8 = deepspeed_export(Layout(precision="fp8", **base))
    assert "no FP8" in fp8.refused[0]
    plain = deepspeed_export(Layout(**base))  # experts replicated (ep = 1): the config applies, the model is yours
    assert plain.text and any("ep_size=1" in n for n in plain.notes)


def test_fsdp2_script_uses_context_parallel_on_a_cp_mesh():
    layout = Layout(model=presets.model("llama3-8b"), gpu=H100, t=2, p=1, d=2, cp=4, global_batch=16, zero_stage=3)
    art = torch_export(layout)
    assert not art.refused
    ast.parse(art.text)
    assert "mesh_dim_names=('pp', 'dp', 'cp', 'tp')" in art.text and "(1, 2, 4, 2)" in art.text
    assert 'dp_mesh = mesh["dp", "cp"]._flatten("dp_cp")' in art.text and "fully_shard(block, mesh=dp_mesh" in art.text
    assert ('with context_parallel(mesh["cp"], buffers=[inputs, targets, ANGLE], buffer_seq_dims=[1, 1, 0]):'
            in art.text)
    assert read.torch_script(art.text)["cp"] == 4
    moe = torch_export(Layout(model=presets.model("mixtral-8x7b"), gpu=H100, t=1, p=1, d=8, global_batch=8,
                              zero_stage=3))
    assert moe.text == "" and "builds a dense decoder" in moe.refused[0]
    assert "PyTorch (FSDP2, torch.distributed.pipelining) runs this layout" in moe.notes[0]
    alibi = torch_export(Layout(model=presets.model("bloom-176b"), gpu=H100, t=1, p=1, d=2, cp=2, global_batch=4,
                                zero_stage=3))
    assert "ALiBi" in alibi.refused[-1]
