"""NeMo Automodel recipe YAMLs read into planner rows: its own benchmark recipes (tests/data/configs, SOURCES.md),
whose runs are rows of the step-time validation (NeMo Automodel's performance summary)."""

from pathlib import Path

import pytest

from core.configs import bridge_yaml
from core.configs.account import yaml_data
from core.configs.check import check
from core.configs.formats import detect
from core.errors import InputError
from core.planner import validation

DATA = Path(__file__).parent / "data" / "configs"
QWEN = (DATA / "automodel_qwen3_moe_30b_te_deepep.yaml").read_text()
DSV3 = (DATA / "automodel_deepseek_v3_te_deepep.yaml").read_text()


def test_the_qwen3_moe_benchmark_recipe_reads_to_its_validation_row():
    assert detect("q.yaml", QWEN) == "automodel" and not bridge_yaml.is_container(yaml_data(QWEN, "q"))
    done = check([("q.yaml", QWEN)], {"release": "bridge-25.09"})
    raw = done.reading.raw
    assert (raw["model"], raw["gpus"], raw["batch"], raw["mb_sizes"], raw["seq"]) == (
        "qwen3-30b-a3b", "8", "512", "4", "4096")  # the pipeline's micro-batch 2 is unused at pp 1
    assert (raw["fix_ep"], raw["fix_etp"], raw["zero"], raw["recompute"], raw["moe_dispatcher"], raw["grouped_gemm"]) \
        == ("8", "1", "3", "full", "deepep", "true")
    # Automodel builds the model in bf16 and FSDP2 keeps those shards; gradients reduced in fp32
    assert (raw["optimizer_dtype"], raw["grad_dtype"], raw["grad_reduce_bytes"]) == ("pure-bf16", "bf16", "4")
    assert raw["loss"] == "bf16"  # MaskedCrossEntropy with fp32_upcast false
    row = next(r for r in validation.data()["rows"] if r["key"] == "am-qwen3-30b-a3b-8")
    assert done.row["fits"]
    assert done.row["step_time_s"] == pytest.approx(validation.step_row(row)["predicted_s"], rel=0.02)


def test_the_deepseek_recipe_pipeline_and_model():
    raw = check([("d.yaml", DSV3)], {}).reading.raw
    assert (raw["model"], raw["layers"], raw["experts"], raw["gpus"], raw["fix_p"], raw["fix_ep"]) == (
        "custom", "61", "256", "256", "4", "64")  # DeepSeek-V3's block, without the MTP depth Automodel omits
    assert "mtp_layers" not in raw
    # 61 layers at 2 per stage: 31 virtual stages, rounded down to a multiple of pp 4: 7 per rank (Automodel's
    # calculate_virtual_stages); HybridEP timed as DeepEP's forwarding
    assert (raw["schedule"], raw["v"], raw["moe_dispatcher"]) == ("interleaved", "7", "deepep")


def test_sizes_refusals_and_an_fp32_master():
    edited = QWEN.replace("  tp_size: 1\n", "  tp_size: 1\n  dp_size: 4\n")
    assert check([("q.yaml", edited)], {}).reading.raw["fix_d"] == "4"
    master = QWEN.replace("  _target_: torch.optim.Adam\n", "  _target_: transformer_engine.pytorch.optimizers."
                          "FusedAdam\n  master_weights: true\n")
    assert check([("q.yaml", master)], {}).reading.raw["optimizer_dtype"] == "fp32"
    with pytest.raises(InputError, match="LoRA"):
        check([("q.yaml", QWEN + "peft:\n  dim: 8\n")])
    with pytest.raises(InputError, match="'acme/x' is not a hub id"):
        check([("q.yaml", QWEN.replace("Qwen/Qwen3-30B-A3B", "acme/x"))])


def test_hub_ids_resolve_to_presets_or_known_shapes():
    # a -Base id is the same shape as its preset; Llama 3.2 and the small Qwen3 sizes are published shapes (the
    # flavors torchtitan spells out), read as custom models (core.configs.hub)
    raw = check([("q.yaml", QWEN.replace("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B-Base"))], {}).reading.raw
    assert raw["model"] == "qwen3-30b-a3b"
    small = QWEN.replace("Qwen/Qwen3-30B-A3B", "meta-llama/Llama-3.2-1B").replace("  ep_size: 8\n", "  ep_size: 1\n")
    raw = check([("l.yaml", small)], {}).reading.raw
    assert (raw["model"], raw["layers"], raw["hidden"], raw["kv_heads"], raw["tied"]) == ("custom", "16", "2048", "8",
                                                                                        "true")
    raw = check([("q.yaml", small.replace("meta-llama/Llama-3.2-1B", "Qwen/Qwen3-4B-Base"))], {}).reading.raw
    assert (raw["layers"], raw["hidden"], raw["qk_norm"]) == ("36", "2560", "true")
