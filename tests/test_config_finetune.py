"""LLaMA-Factory and Axolotl run YAMLs (full-parameter training through Hugging Face's Trainer, with DeepSpeed or
FSDP), read into planner rows; adapters and preference stages are refused with one line. The YAMLs are written for
these tests with the keys those frameworks' examples use."""

from pathlib import Path

import pytest

from core.configs.check import check
from core.configs.formats import detect
from core.errors import InputError

DATA = Path(__file__).parent / "data" / "configs"

FACTORY = """### model
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
### method
stage: sft
do_train: true
finetuning_type: full
deepspeed: examples/deepspeed/ds_z3_config.json
### dataset
dataset: identity
template: llama3
cutoff_len: 4096
### train
per_device_train_batch_size: 2
gradient_accumulation_steps: 4
learning_rate: 1.0e-5
bf16: true
"""

AXOLOTL = """base_model: Qwen/Qwen3-32B
sequence_len: 8192
micro_batch_size: 1
gradient_accumulation_steps: 2
bf16: auto
flash_attention: true
gradient_checkpointing: true
fsdp:
  - full_shard
  - auto_wrap
fsdp_config:
  fsdp_transformer_layer_cls_to_wrap: Qwen3DecoderLayer
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
num_epochs: 1
"""


def test_llama_factory_full_sft_under_deepspeed_zero3():
    done = check([("llama3_full_sft.yaml", FACTORY)], {"gpus": "16"})
    raw = done.reading.raw
    assert (raw["model"], raw["seq"], raw["mb_sizes"], raw["batch"]) == ("llama3-8b", "4096", "2", "128")
    assert raw["zero"] == "3" and raw["recompute"] == "full"  # LLaMA-Factory checkpoints unless told not to
    assert done.reading.framework == "deepspeed" and detect("x.yaml", FACTORY) == "finetune"


def test_the_deepspeed_json_given_with_it_sets_the_stage():
    done = check([("llama3_full_sft.yaml", FACTORY.replace("ds_z3_config", "ds_config")),
                  ("ds.json", (DATA / "ds_zero2_autotp4_auto.json").read_text())], {"gpus": "16"})
    assert done.reading.raw["zero"] == "2" and done.reading.raw["model"] == "llama3-8b"


def test_axolotl_full_shard_fsdp_with_checkpointing():
    done = check([("qwen3.yml", AXOLOTL)], {"gpus": "32"})
    raw = done.reading.raw
    assert (raw["model"], raw["seq"], raw["zero"], raw["recompute"], raw["batch"]) == (
        "qwen3-32b", "8192", "3", "full", "64")
    assert done.reading.framework == "torch" and done.row["d"] == 32


def test_adapters_and_preference_stages_are_refused_and_a_local_model_is_said():
    with pytest.raises(InputError, match="lora fine-tuning .* not modelled"):
        check([("x.yaml", FACTORY.replace("finetuning_type: full", "finetuning_type: lora"))])
    with pytest.raises(InputError, match="qlora fine-tuning"):
        check([("x.yml", AXOLOTL + "adapter: qlora\n")])
    with pytest.raises(InputError, match="stage dpo"):
        check([("x.yaml", FACTORY.replace("stage: sft", "stage: dpo"))])
    done = check([("x.yaml", FACTORY.replace("meta-llama/Meta-Llama-3-8B-Instruct", "/data/my-model"))])
    assert any(e.kind == "unsupported" and e.name == "model" for e in done.reading.entries)
    assert any(e.kind == "assumed" and e.name == "model" for e in done.reading.entries)
