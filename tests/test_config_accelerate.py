"""Hugging Face Accelerate configs (`accelerate config`'s YAML) with the model's config.json: the engine, its
sharding, offload and checkpointing, the GPUs and precision read into the planner row. The YAMLs are written for
these tests with the keys accelerate/commands/config writes."""

from pathlib import Path

import pytest

from core.configs.check import check
from core.configs.formats import detect
from core.errors import InputError

MODEL = (Path(__file__).parent / "data" / "configs" / "hf_llama3.1_8b_instruct_config.json").read_text()

FSDP1 = """compute_environment: LOCAL_MACHINE
distributed_type: FSDP
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_offload_params: false
  fsdp_sharding_strategy: {strategy}
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_activation_checkpointing: {ckpt}
machine_rank: 0
mixed_precision: bf16
num_machines: 2
num_processes: 16
use_cpu: false
"""

DEEPSPEED = """distributed_type: DEEPSPEED
deepspeed_config:
  gradient_accumulation_steps: 4
  offload_optimizer_device: cpu
  offload_param_device: none
  zero3_init_flag: false
  zero_stage: 2
mixed_precision: fp16
num_machines: 1
num_processes: 8
"""


def run(yaml_text, **given):
    return check([("default_config.yaml", yaml_text), ("config.json", MODEL)],
                 {"batch": "64", "seq": "8192", **{k: str(v) for k, v in given.items()}})


@pytest.mark.parametrize(("strategy", "zero", "reshard", "replicate"), [
    (1, "3", "on", None), ("FULL_SHARD", "3", "on", None), (2, "3", "off", None), ("NO_SHARD", "0", "on", None),
    ("HYBRID_SHARD", "3", "on", "2")])
def test_fsdp1_strategies_read_as_zero_stages(strategy, zero, reshard, replicate):
    done = run(FSDP1.format(strategy=strategy, ckpt="true"))
    raw = done.reading.raw
    assert (raw["zero"], raw["reshard"], raw.get("fix_replicate")) == (zero, reshard, replicate)
    assert raw["gpus"] == "16" and raw["model"] == "llama3-8b" and raw["recompute"] == "full"
    assert done.reading.framework == "torch" and done.row is not None


def test_deepspeed_through_accelerate_and_the_format_is_detected():
    done = run(DEEPSPEED)
    raw = done.reading.raw
    assert (raw["zero"], raw["offload"], raw["precision"], raw["gpus"]) == ("2", "optimizer", "fp16", "8")
    assert done.reading.framework == "deepspeed"
    assert detect("default_config.yaml", DEEPSPEED) == "accelerate"


def test_nd_parallelism_sizes_and_bad_values_get_one_line():
    text = FSDP1.format(strategy="FULL_SHARD", ckpt="false") + (
        "parallelism_config:\n  parallelism_config_tp_size: 2\n  parallelism_config_cp_size: 2\n")
    done = run(text)
    assert (done.row["t"], done.row["cp"], done.row["d"]) == (2, 2, 4) and done.reading.raw["recompute"] == "none"
    with pytest.raises(InputError, match="distributed_type 'XLA'"):
        run(DEEPSPEED.replace("DEEPSPEED", "XLA"))
    with pytest.raises(InputError, match="num_processes"):
        run(DEEPSPEED.replace("num_processes: 8", "num_processes: eight"))
    with pytest.raises(InputError, match="fsdp_sharding_strategy"):
        run(FSDP1.format(strategy="SOMETIMES", ckpt="false"))


def test_yaml_files_are_bounded_and_a_parsed_file_is_not_changed_by_its_reading():
    import time
    # an alias tree of 9^9 leaves in 346 bytes: the account shows it cut short, at once
    bomb = "distributed_type: FSDP\nnum_processes: 8\na: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    start = time.perf_counter()
    done = check([("default_config.yaml", bomb)])
    assert time.perf_counter() - start < 5 and any(e.name == "i" and len(e.value) <= 60 for e in done.reading.entries)
    with pytest.raises(InputError, match="nested too deeply"):
        check([("deep.yaml", "a: " + "[" * 5000 + "]" * 5000 + "\n")])
    text = FSDP1.format(strategy="FULL_SHARD", ckpt="false") + "parallelism_config:\n  parallelism_config_tp_size: 2\n"
    assert run(text).row["t"] == 2 and run(text).row["t"] == 2  # the second reading sees the same file
