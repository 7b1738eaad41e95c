"""torchtune recipe configs (full fine-tuning under FSDP2, the model from its builder) read into planner rows: the
real llama3_1/8B_full.yaml and qwen3/8B_full.yaml (tests/data/configs, SOURCES.md), and edits of them for the
single-device recipe, the 2025 device-mesh sizes and what is refused."""

from pathlib import Path

import pytest

from core.configs import bridge_yaml
from core.configs.account import yaml_data
from core.configs.check import check
from core.configs.formats import detect
from core.cost import releases
from core.errors import InputError

DATA = Path(__file__).parent / "data" / "configs"
LLAMA = (DATA / "torchtune_llama3_1_8b_full.yaml").read_text()
QWEN = (DATA / "torchtune_qwen3_8b_full.yaml").read_text()


def _account(done, kind):
    return {e.name: e.meaning for e in done.reading.entries if e.kind == kind}


def test_llama_full_finetune_distributed_reads_its_recipe():
    assert detect("8B_full.yaml", LLAMA) == "torchtune" and not bridge_yaml.is_container(yaml_data(LLAMA, "x"))
    done = check([("8B_full.yaml", LLAMA)], {"gpus": "8", "seq": "4096"})
    raw = done.reading.raw
    assert (raw["model"], raw["mb_sizes"], raw["batch"], raw["seq"]) == ("llama3-8b", "2", "16", "4096")
    assert (raw["zero"], raw["reshard"], raw["recompute"], raw["offload"], raw["loss"]) == (
        "3", "on", "full", "none", "chunked")  # LinearCrossEntropyLoss: the output layer a chunk at a time
    # pure bf16: the model is built in bf16 with no mixed-precision policy: 16-bit weights, gradients and moments
    assert (raw["precision"], raw["grad_dtype"], raw["optimizer_dtype"]) == ("bf16", "bf16", "pure-bf16")
    assert raw["release"] == releases.base() and done.reading.framework == "torch"
    assert "give --seq" in _account(done, "unsupported")["tokenizer.max_seq_len"]
    # 8.03 B parameters x (2 + 2 + 4) bytes over 8 GPUs, half of mixed precision's 16
    assert done.row["model_state_bytes"] == pytest.approx(8.03e9 * 8 / 8, rel=0.01)
    assert done.row["fits"] and done.row["d"] == 8


def test_qwen3_builder_and_accumulation():
    done = check([("qwen3_8B_full.yaml", QWEN)], {"gpus": "16"})
    raw = done.reading.raw
    assert (raw["model"], raw["layers"], raw["hidden"], raw["kv_heads"], raw["qk_norm"], raw["head_dim"]) == (
        "custom", "36", "4096", "8", "true", "128")
    assert raw["batch"] == str(2 * 8 * 16)  # batch_size x gradient_accumulation_steps x d


def test_single_device_recipe_and_device_mesh_sizes():
    single = LLAMA.replace("full_finetune_distributed", "full_finetune_single_device", 1)
    raw = check([("x.yaml", single)], {}).reading.raw
    assert (raw["gpus"], raw["zero"]) == ("1", "0")
    meshed = LLAMA + "tensor_parallel_dim: 2\ndata_parallel_replicate_dim: 2\n"
    raw = check([("x.yaml", meshed)], {"gpus": "16"}).reading.raw
    assert (raw["fix_t"], raw["sp"], raw["fix_replicate"]) == ("2", "on", "2")


def test_adapters_qat_preference_and_unknown_builders_are_one_line():
    with pytest.raises(InputError, match="lora_llama3_1_8b: LoRA"):
        check([("x.yaml", LLAMA.replace("llama3_1.llama3_1_8b", "llama3_1.lora_llama3_1_8b"))])
    with pytest.raises(InputError, match="quantization-aware"):
        check([("x.yaml", LLAMA + "quantizer:\n  _component_: torchtune.training.quantization.QATQuantizer\n")])
    with pytest.raises(InputError, match="preference, RL or distillation"):
        check([("x.yaml", LLAMA.replace("LinearCrossEntropyLoss", "DPOLoss"))])
    with pytest.raises(InputError, match="'gemma_2b' is not a builder"):
        check([("x.yaml", LLAMA.replace("llama3_1.llama3_1_8b", "gemma.gemma_2b"))])
