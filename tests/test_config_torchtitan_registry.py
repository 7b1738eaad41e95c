"""torchtitan's 2026 Python config registry (one function per run returning Trainer.Config), read from the syntax
tree with its launch command, into the same planner rows a TOML train config gives. The registries below are
written for these tests in the shape torchtitan/models/<module>/config_registry.py has since 9810191b."""

import pytest

from core.cli import main
from core.configs.check import check
from core.configs.formats import detect
from core.errors import InputError
from core.frameworks import KERNELS
from core.frameworks import loss as loss_record
from core.params.memory import LOSS_CHUNKS

LLAMA = '''
from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss
from torchtitan.config import CompileConfig, ParallelismConfig, TrainingConfig
from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
from torchtitan.trainer import Trainer

from . import model_registry
from .model import Llama3Model


def llama3_8b() -> Trainer.Config:
    """One GPU node's FSDP run."""
    spec = model_registry("8B")
    return Trainer.Config(
        loss=ChunkedLossWrapper.Config(loss_fn=CrossEntropyLoss.Config()),
        hf_assets_path="./assets/hf/Llama-3.1-8B",
        model_spec=spec,
        optimizer=default_adamw(lr=3e-4),
        training=TrainingConfig(num_tokens_per_microbatch_per_dp_rank=2 * 8192, max_context_length=8192, steps=100),
        activation_checkpoint=SelectiveAC.Config(),
    )


def llama3_8b_tp() -> Trainer.Config:
    config = llama3_8b()
    config.parallelism.tensor_parallel_degree = 4
    config.compile = CompileConfig(enable=True, enable_async_tensor_parallel=True)
    config.activation_checkpoint = FullAC.Config()
    return config


def llama3_70b_pp() -> Trainer.Config:
    config = llama3_8b()
    config.model_spec = model_registry("70B")
    config.parallelism = ParallelismConfig(tensor_parallel_degree=8, pipeline_parallel_degree=4,
                                           num_pp_microbatches=8, enable_sequence_parallel=False)
    config.training.num_tokens_per_train_step = 4 * 8192 * 8 * 2 * 2
    return config
'''

QWEN = '''
from torchtitan.models.qwen3 import model_registry


def qwen3_30b_a3b():
    return Trainer.Config(
        model_spec=model_registry("30B-A3B"),
        training=TrainingConfig(num_tokens_per_microbatch_per_dp_rank=2 * 4096, max_context_length=4096),
        parallelism=ParallelismConfig(expert_parallel_degree=8),
        activation_checkpoint=FullAC.Config(),
    )
'''


def run(text, name="config_registry.py", entry="", command="", **given):
    texts = [(name, text)] + ([("launch.sh", command)] if command else [])
    return check(texts, {k: str(v) for k, v in given.items()}, entry=entry)


def test_a_registry_entry_reads_as_its_toml_would_with_token_counted_batches():
    done = run(LLAMA, entry="llama3_8b", gpus=64)
    row, raw = done.row, done.reading.raw
    assert (row["t"], row["p"], row["d"], row["micro_batch_size"]) == (1, 1, 64, 2)  # dp_shard -1: the rest
    assert raw["batch"] == "128" and raw["seq"] == "8192"  # 2 x 8192 tokens = 2 sequences per rank, one round
    assert raw["loss"] == "chunked" and row["recompute"] == "selective" and raw["compile"] == "false"
    assert raw["model"] == "llama3-8b" and done.reading.framework == "torch"
    assert {e.name for e in done.reading.entries if e.kind == "no effect"} >= {"hf_assets_path", "training.steps"}


def test_several_entries_need_a_name_and_a_derived_entry_follows_its_edits():
    with pytest.raises(InputError, match="3 configs .*llama3_8b, llama3_8b_tp, llama3_70b_pp.*--entry"):
        run(LLAMA)
    done = run(LLAMA, entry="llama3_8b_tp", gpus=16)
    row, raw = done.row, done.reading.raw
    assert (row["t"], row["d"]) == (4, 4) and bool(row["sequence_parallel"]) and raw["sp"] == "on"
    assert raw["tp_comm_overlap"] == "on"  # CompileConfig.enable_async_tensor_parallel (under [compile] in 2026)
    assert raw["recompute"] == "full" and raw["compile"] == "true" and raw["loss"] == "chunked"


def test_pipeline_microbatches_the_token_step_and_torchtitans_split_are_read():
    done = run(LLAMA, entry="llama3_70b_pp", gpus=128)
    row, raw = done.row, done.reading.raw
    assert (row["t"], row["p"], row["d"], row["m"]) == (8, 4, 4, 16)  # 8 per round x 2 accumulation steps
    assert raw["batch"] == "128" and raw["sp"] == "off" and raw["ends_in_split"] == "true"


def test_the_launch_command_names_the_entry_the_gpus_and_overrides_fields():
    command = ("NGPU=32 MODULE=llama3 CONFIG=llama3_8b_tp ./run_train.sh --parallelism.tensor_parallel_degree 2 "
               "--training.num_tokens_per_microbatch_per_dp_rank=8192 --compile.no-enable")
    done = run(LLAMA, command=command)
    row, raw = done.row, done.reading.raw
    assert (row["t"], row["d"], row["micro_batch_size"]) == (2, 16, 1) and raw["gpus"] == "32"
    assert raw["compile"] == "false"
    assert any(e.name == "(entry)" and "launch command" in e.meaning for e in done.reading.entries)
    with pytest.raises(InputError, match="give its config registry"):
        check([("launch.sh", command)])


def test_a_qwen3_moe_flavor_is_the_preset_and_runs_expert_parallel():
    done = run(QWEN, gpus=8)
    assert done.reading.raw["model"] == "qwen3-30b-a3b" and done.row["ep"] == 8
    assert done.reading.raw["recompute"] == "full"


def test_what_is_not_followed_is_said_and_bad_files_get_one_line():
    text = LLAMA + '''

def tuned() -> Trainer.Config:
    config = llama3_8b()
    enable_fused_swiglu(config)
    if True:
        config.parallelism.tensor_parallel_degree = 2
    return config
'''
    done = run(text, entry="tuned", gpus=8)
    unsupported = [e.value for e in done.reading.entries if e.kind == "unsupported"]
    assert any("enable_fused_swiglu" in v for v in unsupported) and any(v.startswith("if True") for v in unsupported)
    with pytest.raises(InputError, match="no config function 'nope'"):
        run(LLAMA, entry="nope")
    with pytest.raises(InputError, match="more than 6 deep"):
        run("def a() -> Trainer.Config:\n    return a()\n", name="llama3_config_registry.py")
    with pytest.raises(InputError, match="gpt_oss models are not a family"):
        run("def g() -> Trainer.Config:\n    return Trainer.Config(model_spec=model_registry('20b'))\n",
            name="gpt_oss_config_registry.py")
    with pytest.raises(InputError, match="not valid Python"):
        run("def a() -> Trainer.Config:\n    return (\n")
    assert detect("config_registry.py", LLAMA) == "torchtitan"


def test_the_chunked_loss_keeps_no_logits_and_peaks_at_one_chunk():
    chunked, compiled = loss_record("torch", "chunked", compiled=True), KERNELS["compiled"]
    assert chunked.held == 0.0 and chunked.peak == compiled.peak / LOSS_CHUNKS == 0.5
    upcast = loss_record("torch", "upcast")
    assert loss_record("torch", "chunked").peak == upcast.peak / 8
    whole = run(LLAMA, entry="llama3_8b", gpus=8, loss="compiled", compile="true", recompute="none",
                gpu="b200-180gb").row
    cut = run(LLAMA, entry="llama3_8b", gpus=8, compile="true", recompute="none", gpu="b200-180gb").row
    logits = 2 * 8192 * 128256  # s x b x V on one rank (t = 1); no recompute buffer competes with the loss peak
    assert whole["activation_bytes"] - cut["activation_bytes"] == pytest.approx(
        logits * (compiled.peak - chunked.peak), rel=1e-9)


def test_a_toml_config_with_the_rest_of_the_gpus_takes_the_count_the_user_gives(tmp_path):
    from pathlib import Path
    data = Path(__file__).parent / "data" / "configs"
    done = check([("torchtitan_llama3_70b.toml", (data / "torchtitan_llama3_70b.toml").read_text())],
                 {"gpus": "256"})
    assert (done.row["t"], done.row["d"]) == (8, 32) and done.reading.raw["batch"] == str(8 * 32)
    path = tmp_path / "config_registry.py"
    path.write_text(LLAMA)
    assert main(["check", str(path), "--entry", "llama3_8b", "--gpus", "8", "--json"]) == 0
    assert main(["check", str(path), "--entry", "no such"]) != 0
