"""Megatron-Bridge's 2026 recipes (one function per run editing `_pretrain_common()`'s ConfigContainer), read from
the syntax tree with their launch command into the Megatron-LM arguments core.configs.megatron_args interprets.
The recipes below are written for these tests in the shape src/megatron/bridge/recipes/<family>/h100/*.py has."""

import pytest

from core.configs.check import check
from core.configs.formats import detect
from core.errors import InputError

RECIPES = '''
import torch

from megatron.bridge import AutoBridge
from megatron.bridge.recipes.common import _pretrain_common
from megatron.bridge.training.comm_overlap import CommOverlapConfig
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.training.flex_dispatcher_backend import apply_flex_dispatcher_backend
from megatron.bridge.training.mixed_precision import bf16_mixed

_MODEL = "Qwen/Qwen3-30B-A3B"
LONG: int = 8192


def qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config() -> ConfigContainer:
    """TP 4, PP 2, EP 4 with full recompute."""
    cfg = _pretrain_common()
    cfg.model = AutoBridge.from_hf_pretrained(_MODEL, revision="abc").to_megatron_provider(load_weights=False)
    cfg.model.tensor_model_parallel_size = 4
    cfg.model.pipeline_model_parallel_size = 2
    cfg.model.expert_model_parallel_size = 4
    cfg.model.expert_tensor_parallel_size = 1
    cfg.model.sequence_parallel = True
    cfg.model.seq_length = 4096
    cfg.model.moe_token_dispatcher_type = "alltoall"
    cfg.model.moe_flex_dispatcher_backend = "deepep"
    cfg.model.moe_grouped_gemm = True
    cfg.model.recompute_granularity = "full"
    cfg.model.recompute_method = "uniform"
    cfg.model.recompute_num_layers = 1
    cfg.model.cuda_graph_impl = "none"
    cfg.optimizer.main_grads_dtype = torch.float32
    cfg.ddp.use_distributed_optimizer = True
    apply_flex_dispatcher_backend(cfg.model, cfg.model.moe_flex_dispatcher_backend)
    return cfg


def qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config() -> ConfigContainer:
    cfg = qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config()
    cfg.mixed_precision = bf16_mixed()
    cfg.ddp.grad_reduce_in_fp32 = False
    cfg.model.recompute_granularity = None
    cfg.model.tensor_model_parallel_size = 1
    cfg.model.pipeline_model_parallel_size = 1
    cfg.model.expert_model_parallel_size = 16
    cfg.model.sequence_parallel = False
    cfg.train.global_batch_size = 1024
    cfg.train.micro_batch_size = 1
    cfg.model.cuda_graph_impl = "transformer_engine"
    cfg.model.moe_a2a_overlap = True
    cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=True)
    return cfg


def llama3_8b_pretrain_8gpu_h100_fp8cs_config() -> ConfigContainer:
    cfg = _pretrain_common()
    cfg.model = AutoBridge.from_hf_pretrained("meta-llama/Meta-Llama-3.1-8B").get_model_config()
    cfg.mixed_precision = "bf16_with_fp8_current_scaling_mixed"
    cfg.model.seq_length = LONG
    cfg.model.context_parallel_size = 2
    return cfg
'''


def run(entry="", command="", **given):
    texts = [("qwen3_moe.py", RECIPES)] + ([("launch.sh", command)] if command else [])
    return check(texts, {k: str(v) for k, v in given.items()}, entry=entry)


def test_a_recipe_reads_its_layout_model_and_the_base_configs_defaults():
    done = run("qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config")
    row, raw = done.row, done.reading.raw
    assert raw["model"] == "qwen3-30b-a3b" and raw["gpus"] == "8" and raw["gpu"] == "h100-80gb"  # the name's
    assert (row["t"], row["p"], row["ep"], row["d"]) == (4, 2, 4, 1)
    assert raw["batch"] == "32" and raw["mb_sizes"] == "2"  # _pretrain_common's train defaults
    assert raw["moe_dispatcher"] == "deepep"  # apply_flex_dispatcher_backend: deepep runs the flex dispatcher
    assert raw["recompute"] == "full" and raw["zero"] == "1" and raw.get("grad_dtype", "auto") in ("fp32", "auto")
    assert done.reading.framework == "megatron"


def test_a_derived_recipe_follows_its_base_and_its_edits():
    done = run("qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config")
    row, raw = done.row, done.reading.raw
    assert (row["t"], row["p"], row["ep"], row["d"], row["micro_batch_size"]) == (1, 1, 16, 16, 1)
    assert raw["batch"] == "1024" and raw["recompute"] == "none" and raw["moe_a2a_overlap"] == "true"
    assert raw["grad_dtype"] == "bf16"  # ddp.grad_reduce_in_fp32 = False: Megatron-LM's --grad-reduce-in-bf16
    unsupported = {e.name for e in done.reading.entries if e.kind == "unsupported"}
    assert "cfg.model.cuda_graph_impl" in unsupported  # CUDA graphs are said, not silently dropped


def test_precision_presets_module_constants_and_hub_id_variants_are_read():
    done = run("llama3_8b_pretrain_8gpu_h100_fp8cs_config")
    raw = done.reading.raw
    assert raw["model"] == "llama3-8b" and raw["precision"] == "fp8" and raw["seq"] == "8192"
    assert done.row["cp"] == 2 and done.row["d"] == 4


def test_the_launch_command_names_the_recipe_gpus_and_overrides():
    command = ("./scripts/training/train.sh --nodes 4 --gpus-per-node 8 --recipe "
               "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config --max_steps 50 train.global_batch_size=2048")
    done = run(command=command)
    assert done.reading.raw["gpus"] == "32" and done.reading.raw["batch"] == "2048" and done.row["d"] == 32
    with pytest.raises(InputError, match="3 recipes"):
        run()
    with pytest.raises(InputError, match="give the recipe file"):
        check([("launch.sh", command)])
    assert detect("qwen3_moe.py", RECIPES) == "megatron-bridge"


def test_an_unknown_model_gets_one_line():
    text = RECIPES.replace("Qwen/Qwen3-30B-A3B", "acme/Unknown-7B")
    with pytest.raises(InputError, match="'acme/Unknown-7B' is not a model the checker maps"):
        check([("r.py", text)], entry="qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config")


SAVED = """
model:
  _target_: megatron.bridge.models.qwen.qwen_provider.Qwen3MoEModelProvider
  num_layers: 48
  hidden_size: 2048
  ffn_hidden_size: 6144
  num_attention_heads: 32
  num_query_groups: 4
  kv_channels: 128
  vocab_size: 151936
  seq_length: 4096
  gated_linear_unit: true
  activation_func: {_target_: torch.nn.functional.silu, _call_: false}
  share_embeddings_and_output_weights: false
  qk_layernorm: true
  num_moe_experts: 128
  moe_router_topk: 8
  moe_ffn_hidden_size: 768
  expert_model_parallel_size: 16
  hidden_dropout: 0.0
  attention_dropout: 0.0
train: {_target_: megatron.bridge.training.config.TrainingConfig, global_batch_size: 1024, micro_batch_size: 1}
ddp: {_target_: megatron.core.distributed.DistributedDataParallelConfig, use_distributed_optimizer: true}
mixed_precision: {_target_: megatron.bridge.training.mixed_precision.MixedPrecisionConfig, bf16: true,
                  fp8: hybrid, fp8_recipe: tensorwise}
"""

OVERRIDE = """
model:
  expert_model_parallel_size: 8
train:
  global_batch_size: 256
scheduler:
  lr_warmup_iters: 10
"""


def test_a_saved_config_container_yaml_states_its_own_architecture():
    done = check([("ConfigContainer.yaml", SAVED)], {"gpus": "16"})
    raw = done.reading.raw
    assert raw["model"] == "qwen3-30b-a3b"  # the fields are this preset's shape exactly
    assert raw["precision"] == "fp8" and raw["batch"] == "1024" and done.row["ep"] == 16
    assert detect("ConfigContainer.yaml", SAVED) == "megatron-bridge"
    assert any(e.name == "cfg.model.activation_func" and e.kind == "no effect" for e in done.reading.entries)


def test_an_override_yaml_changes_the_recipe_it_is_given_with():
    done = check([("qwen3_moe.py", RECIPES), ("override.yaml", OVERRIDE)],
                 entry="qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config")
    assert done.row["ep"] == 8 and done.reading.raw["batch"] == "256"
    with pytest.raises(InputError, match="override file"):
        check([("override.yaml", OVERRIDE + "dataset:\n  seq_length: 4096\n")])
