"""LLM Foundry train YAMLs (Composer's FSDP, MPT or Hugging Face models) read into planner rows. The YAMLs are
written for these tests in the shape of llm-foundry's scripts/train/yamls (variables resolved as OmegaConf does)."""

import re

import pytest

from core.configs import bridge_yaml, interpolation
from core.configs.account import yaml_data
from core.configs.check import check
from core.configs.formats import detect
from core.cost import releases
from core.errors import InputError
from core.planner import validation

MPT = """variables:
  seq: 2048
  seed: 17
max_seq_len: ${variables.seq}
run_name: mpt-7b-${variables.seed}
model:
  name: mpt_causal_lm
  init_device: meta
  d_model: 4096
  n_heads: 32
  n_layers: 32
  expansion_ratio: 4
  max_seq_len: ${variables.seq}
  vocab_size: 50368
  attn_config:
    attn_impl: flash
tokenizer:
  name: EleutherAI/gpt-neox-20b
optimizer:
  name: decoupled_adamw
  lr: 1.2e-4
scheduler:
  name: cosine_with_warmup
max_duration: 1000ba
global_train_batch_size: 768
device_train_microbatch_size: 6
precision: amp_bf16
fsdp_config:
  sharding_strategy: FULL_SHARD
  mixed_precision: DEFAULT
  activation_checkpointing: false
  limit_all_gathers: true
"""


def test_an_mpt_pretraining_yaml_reads_into_its_row():
    assert detect("mpt-7b.yaml", MPT) == "llm-foundry" and not bridge_yaml.is_container(yaml_data(MPT, "x"))
    done = check([("mpt-7b.yaml", MPT)], {"gpus": "128", "gpu": "h100-80gb"})
    raw = done.reading.raw
    assert (raw["model"], raw["layers"], raw["hidden"], raw["heads"], raw["ffn"], raw["vocab"], raw["tied"]) == (
        "custom", "32", "4096", "32", "16384", "50368", "true")
    assert (raw["seq"], raw["batch"], raw["mb_sizes"], raw["zero"], raw["reshard"], raw["recompute"]) == (
        "2048", "768", "6", "3", "on", "none")
    assert raw["grad_reduce_bytes"] == "4" and raw["dropout"] == "false" and raw["loss"] == "fused"
    assert raw["release"] == releases.base() and done.reading.framework == "torch"
    # LLM Foundry's own benchmark row of this run (MPT-7B, 128 H100, batch 768 x 2048, micro-batch 6, FULL_SHARD,
    # no checkpointing, DEFAULT precision): the checker times the file as the validation times the row (the row
    # keeps the GPT block's dropout, which the YAML's zero pdrop turns off: 1 % faster)
    row = next(r for r in validation.data()["rows"] if r["key"] == "lf-h100-80gb-bf16-7b-s2048-g128")
    assert done.row["step_time_s"] == pytest.approx(validation.step_row(row)["predicted_s"], rel=0.02)
    assert done.row["d"] == 128 and done.row["fits"]


def test_composer_precision_modes_checkpointing_and_sharding():
    pure = MPT.replace("mixed_precision: DEFAULT", "mixed_precision: PURE").replace(
        "activation_checkpointing: false", "activation_checkpointing: true").replace("FULL_SHARD", "SHARD_GRAD_OP")
    raw = check([("x.yaml", pure)], {"gpus": "128"}).reading.raw
    assert (raw["grad_reduce_bytes"], raw["recompute"], raw["zero"], raw["reshard"]) == ("2", "full", "3", "off")
    hybrid = MPT.replace("FULL_SHARD", "HYBRID_SHARD\n  data_parallel_replicate_degree: 16")
    assert check([("x.yaml", hybrid)], {"gpus": "128"}).reading.raw["fix_replicate"] == "16"
    with pytest.raises(InputError, match="sharding_strategy: 'HALF_SHARD'"):
        check([("x.yaml", MPT.replace("FULL_SHARD", "HALF_SHARD"))])


def test_gqa_glu_and_moe_mpt_shapes():
    gqa = MPT.replace("    attn_impl: flash\n", "    attn_impl: flash\n    attn_type: grouped_query_attention\n"
                      "    kv_n_heads: 8\n").replace("  expansion_ratio: 4\n", "  expansion_ratio: 3.5\n"
                                                   "  ffn_config:\n    ffn_type: mptglu\n")
    raw = check([("x.yaml", gqa)], {"gpus": "128"}).reading.raw
    assert (raw["kv_heads"], raw["ffn"], raw["mlp"]) == ("8", "14336", "swiglu")
    moe = MPT.replace("  expansion_ratio: 4\n", "  expansion_ratio: 4\n  ffn_config:\n    ffn_type: mb_dmoe\n"
                      "    moe_num_experts: 16\n    moe_top_k: 4\n")
    raw = check([("x.yaml", moe)], {"gpus": "128"}).reading.raw
    assert (raw["experts"], raw["top_k"], raw["expert_ffn"]) == ("16", "4", "16384")


def test_hugging_face_models_tensor_parallelism_and_refusals():
    hf_model = ("model:\n  name: hf_causal_lm\n  pretrained_model_name_or_path: meta-llama/Meta-Llama-3-8B\n"
                "  pretrained: true\n  use_flash_attention_2: true\n")
    hf = re.sub(r"model:\n(?:  .*\n)+", hf_model, MPT, count=1)  # the MPT model section replaced
    hf += "parallelism_config:\n  tp:\n    tensor_parallel_degree: 2\n"
    raw = check([("x.yaml", hf.replace("fsdp_config:", "unused_fsdp:"))], {"gpus": "128"}).reading.raw
    assert raw["model"] == "llama3-8b" and raw["flash"] == "true" and raw["fix_t"] == "2" and raw["sp"] == "on"
    assert raw["zero"] == "0"  # no FSDP section anywhere: Composer's DDP
    with pytest.raises(InputError, match="not a hub id the checker maps"):
        check([("x.yaml", hf.replace("meta-llama/Meta-Llama-3-8B", "acme/secret-model"))])
    with pytest.raises(InputError, match="LoRA fine-tuning"):
        check([("x.yaml", hf + "  peft_config:\n    peft_type: LORA\n".replace("  peft", "peft"))])


def test_references_resolve_within_the_file_and_every_reading_is_bounded():
    # one resolver for every YAML reader (core.configs.interpolation, NeMo's too): a whole-string reference keeps
    # its value's type, one inside a string is text; a reference to a reference, a loop or a missing key is left
    # as written, and the reader says the field is not a number
    data = interpolation.resolve({"variables": {"a": 7, "b": "${variables.a}"}, "x": "${variables.a}",
                                  "y": "run-${variables.a}", "z": "${variables.b}", "w": "${w}"})
    assert (data["x"], data["y"], data["z"], data["w"]) == (7, "run-7", "${variables.b}", "${w}")
    missing = MPT.replace("max_seq_len: ${variables.seq}\nrun", "max_seq_len: ${variables.missing}\nrun")
    done = check([("x.yaml", missing)], {"gpus": "128"})
    said = {e.name: e.meaning for e in done.reading.entries if e.kind == "unsupported"}
    assert "unresolved reference" in said["max_seq_len"] and "seq" not in done.reading.raw
    # an alias tree of 10^8 nodes from a 1 KB file, and references that multiply a long string, are one line each
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "\n".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]" for i in range(7))
    with pytest.raises(InputError, match="too large"):
        check([("x.yaml", MPT + bomb)], {"gpus": "8"})
    long = MPT.replace("  seed: 17\n", "  seed: 17\n  big: " + "x" * 60_000 + "\n") + \
        "run_name: ${variables.big}${variables.big}\n"
    with pytest.raises(InputError, match="longer than 100,000 characters"):
        check([("x.yaml", long)], {"gpus": "8"})
