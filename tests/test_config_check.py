"""`python -m core check`: real configs from the frameworks' repositories (tests/data/configs, cited in SOURCES.md)
read into planner rows, every field accounted for, each row the one the same run typed into `plan` gives."""

import json
import time
import tomllib
from pathlib import Path

import pytest

from core.cli import main
from core.cli import plan as plan_cli
from core.configs.check import check
from core.configs.formats import detect
from core.errors import InputError
from core.model import presets

DATA = Path(__file__).parent / "data" / "configs"
CONFIGS = sorted(p for p in DATA.iterdir() if p.suffix in (".sh", ".toml", ".json", ".yaml", ".py"))


def checked(*names, **overrides):
    return check([(n, (DATA / n).read_text()) for n in names], {k: str(v) for k, v in overrides.items()})


def typed_params(command: str):
    """The PlannerParams the `plan` command line gives."""
    import argparse
    import shlex

    parser = argparse.ArgumentParser()
    plan_cli.build(parser)
    return plan_cli.params_from(parser.parse_args(shlex.split(command)[4:]))


def test_at_least_twelve_real_configs_from_four_frameworks_are_kept_with_their_sources():
    sources = (DATA / "SOURCES.md").read_text()
    assert len(CONFIGS) >= 12
    assert all(p.name in sources for p in CONFIGS)
    kinds = {p.name.split("_")[0] for p in CONFIGS}
    assert {"megatron", "torchtitan", "ds", "hf", "nemo"} <= kinds


@pytest.mark.parametrize("path", [p for p in CONFIGS if p.suffix != ".json" or not p.name.startswith("ds_")],
                         ids=lambda p: p.name)
def test_each_real_config_reads_into_the_row_its_plan_command_gives(path):
    if path.name == "megatron_gpt3_175b.sh":  # as shipped: t 8 x p 16 on one 8-GPU node
        with pytest.raises(InputError):
            done = check([(path.name, path.read_text())])
            raise InputError(done.result.why_empty())
        return
    done = check([(path.name, path.read_text())])
    assert done.reading.entries and all(e.meaning for e in done.reading.entries)
    assert typed_params(done.typed) == done.params  # the same run typed by hand: the same inputs, so the same row
    assert done.row is not None


def _leaves(node, prefix=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else k)
    else:
        yield prefix


@pytest.mark.parametrize("path", [p for p in CONFIGS if p.suffix in (".toml", ".json")], ids=lambda p: p.name)
def test_every_field_of_a_structured_config_is_accounted_for(path):
    text = path.read_text()
    data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    done = check([(path.name, text)], {"fix_t": "1"} if path.name.startswith("ds_") else None)
    names = [e.name for e in done.reading.entries]
    flat = " | ".join(names)

    def accounted(leaf: str) -> bool:  # by name, or as part of a block accounted whole
        return leaf.split(".")[-1] in flat or any(leaf.startswith(n + ".") for n in names)

    missing = [leaf for leaf in _leaves(data) if not accounted(leaf)]
    assert not missing, missing


def test_torchtitan_405b_reads_its_3d_layout_fp8_and_the_gpus_its_comment_names():
    done = checked("torchtitan_llama3_405b.toml")
    q, row = done.params, done.row
    assert (q.model, q.gpus, q.gpu, q.precision, q.compile) == ("llama3-405b", 128, "h100-80gb", "fp8", True)
    assert (row["t"], row["p"], row["d"], row["zero_stage"], row["recompute"]) == (8, 1, 16, 3, "full")
    assert row["sequence_parallel"] and row["tp_comm_overlap"] and row["fits"]
    assert q.batch == 2 * 16 and q.seq == 8192 and done.refusals() == []


def test_torchtitan_deepseek_16b_is_fsdp2_with_expert_parallelism_and_torchtitan_runs_it():
    done = checked("torchtitan_deepseek_v3_16b.toml")
    m, row = done.result.model, done.row
    assert m.moe.experts == 64 and m.moe.top_k == 6 and m.moe.shared == 2 and m.mla.kv_lora_rank == 512
    assert (row["ep"], row["zero_stage"], row["recompute"]) == (8, 3, "selective")
    assert done.refusals() == []  # torchtitan runs FSDP2 + EP (the planner's own script would not)
    assert done.params.loss == "compiled" and not done.params.compile  # components = ["loss"]


def test_megatron_fsdp_deepseek_v3_is_the_preset_with_zero3_and_its_expert_layout():
    done = checked("megatron_fsdp_deepseek_v3_sbatch.sh", gpus=256)
    q, row = done.params, done.row
    assert q.model == "deepseek-v3" and (row["zero_stage"], row["ep"], row["etp"], row["micro_batch_size"]) == \
        (3, 8, 1, 4)
    assert q.batch == 2048 and q.seq == 4096 and not q.grad_accum_fusion
    unsupported = {e.name for e in done.reading.entries if e.kind == "unsupported"}
    assert "--moe-layer-freq" not in unsupported  # ([0]*3+[1]*58) read as three dense layers


def test_nemo2_recipes_read_from_their_syntax_tree():
    small = checked("nemo2_recipe_llama3_8b.py").row
    assert (small["t"], small["p"], small["cp"], small["d"], small["zero_stage"], small["sequence_parallel"]) == \
        (1, 1, 2, 4, 1, False)
    big = checked("nemo2_recipe_llama3_70b.py")
    row = big.row
    assert (row["t"], row["p"], row["cp"], row["d"], row["schedule"], row["v"], row["sequence_parallel"]) == \
        (4, 4, 2, 1, "interleaved", 5, True)
    assert (big.result.model.name, big.result.params.gpus, big.result.params.batch, big.result.model.seq) == \
        ("Llama 3 70B", 32, 512, 8192)
    assumed = {e.name: e.meaning for e in big.reading.entries if e.kind == "assumed"}
    assert "fewer than t x p x cp = 32" in assumed["gpus"]  # pretrain_recipe's 1 x 8 cannot hold its own layout
    import ast
    tree = ast.parse((DATA / "nemo2_recipe_llama3_70b.py").read_text())
    trainer = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "trainer")
    said = " | ".join(e.name for e in big.reading.entries)
    for call in (n for n in ast.walk(trainer) if isinstance(n, ast.Call) and n.keywords):
        for kw in call.keywords:  # every keyword of MegatronStrategy, its DDP config and the Trainer is accounted
            assert kw.arg in said or kw.arg in ("devices", "num_nodes", "plugins", "strategy", "ddp"), kw.arg
    with pytest.raises(InputError, match="not one the checker maps to a preset"):
        check([("r.py", "def trainer():\n    pass\ndef pretrain_recipe():\n    pass\n"
                        "def model():\n    return run.Config(Nemotron4Config340B)\n")])


def test_nemo_launcher_yaml_resolves_interpolations_and_reads_the_interleaved_layout():
    done = checked("nemo_launcher_gpt3_175b.yaml")
    q, row = done.params, done.row
    assert q.model == "gpt3-175b" and q.gpus == 1024 and q.batch == 2048
    assert (row["t"], row["p"], row["v"], row["d"], row["schedule"]) == (4, 8, 6, 32, "interleaved")
    llama = checked("nemo_launcher_llama3_70b.yaml")
    assert llama.params.model == "llama3-70b" and (llama.row["cp"], llama.row["v"]) == (2, 5)


def test_hugging_face_configs_become_their_presets_or_a_custom_model():
    assert checked("hf_llama3.1_8b_instruct_config.json").params.model == "llama3-8b"
    assert checked("hf_qwen3_32b_config.json").params.model == "qwen3-32b"
    assert checked("hf_deepseek_v3_config.json").params.model == "deepseek-v3"
    lite = checked("hf_deepseek_v2_lite_config.json").result.model
    assert (lite.layers, lite.moe.experts, lite.moe.shared, lite.moe.first_dense, lite.mla.q_lora_rank) == \
        (27, 64, 2, 1, 0)


def test_a_deepspeed_json_with_the_models_config_json():
    done = checked("ds_zero1_megatron_gpt2_bs4.json", "hf_llama3.1_8b_instruct_config.json", gpus=4)
    q, row = done.params, done.row
    assert (q.model, q.batch, q.precision, row["zero_stage"], row["d"]) == ("llama3-8b", 4, "fp16", 1, 4)
    auto = checked("ds_zero3_offload_auto_hf.json", "hf_llama3.1_8b_instruct_config.json", gpus=8, batch=64)
    assert auto.row["offload"] == "optimizer+params" and auto.row["zero_stage"] == 3
    assert any(e.kind == "unsupported" and "'auto'" in e.meaning for e in auto.reading.entries)
    pipe = checked("ds_pipeline_parallelism.json", fix_p=2)  # run.sh's -p 2; no GPU count: one replica assumed
    assert (pipe.row["p"], pipe.row["d"], pipe.row["micro_batch_size"], pipe.row["m"]) == (2, 1, 8, 32)
    assert any(e.kind == "unsupported" and "fp32" in e.meaning for e in pipe.reading.entries)


def test_hostile_or_malformed_configs_get_one_clear_error():
    cases = [("x.json", "{"), ("x.toml", "[a\n"), ("x.yaml", "model: [\n"), ("x.sh", "echo hi\n"),
             ("x.json", "[" * 100_000 + "]" * 100_000), ("x.bin", "\x00\x01"), ("x.sh", "a\n" * 30_000),
             ("x.toml", '[model]\nname = "llama3"\nflavor = "999B"\n'), ("x.txt", "hello"),
             ("x.sh", "python pretrain_gpt.py --num-layers $(rm -rf /) --hidden-size 8 --num-attention-heads 2\n")]
    for name, text in cases:
        with pytest.raises(InputError) as err:
            check([(name, text)])
        assert str(err.value) and "\n" not in str(err.value), name
    wrong_kind = [("t.py", "LAYERS, HIDDEN, HEADS, KV_HEADS, FFN, VOCAB = 'x', 8, 2, 2, 8, 10\nT, P, D = 1, 1, 1\n"),
                  ("t.toml", '[parallelism]\ntensor_parallel_degree = 0\n[model]\nname="llama3"\nflavor="8B"\n'),
                  ("t.toml", "model = 3\n[training]\nseq_len = 4096\n"),
                  ("n.yaml", "model:\n  num_layers: 2\n  hidden_size: 8\n  num_attention_heads: 2\n  tokenizer: 5\n"),
                  ("h.json", '{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 8, '
                             '"num_attention_heads": 2, "tie_word_embeddings": "no"}'),
                  ("x.sh", "X=" + "$Y" * 300_000 + "\npython pretrain_gpt.py --num-layers 2\n")]
    for name, text in wrong_kind:  # a value of the wrong kind: one line, not a traceback, and quickly
        start = time.perf_counter()
        with pytest.raises(InputError) as err:
            check([(name, text)], kind="megatron" if name.endswith(".sh") else "auto")
        assert "\n" not in str(err.value) and time.perf_counter() - start < 2.0, name
    odd = check([("ds.json", '{"tensor_parallel": {"autotp_size": "auto"}, "zero_optimization": "x", '
                              '"bf16": {"enabled": true}}')], {"gpus": "8"})
    assert {"tensor_parallel", "zero_optimization"} <= {e.name for e in odd.reading.entries if e.kind == "unsupported"}
    start = time.perf_counter()
    check([("c.toml", "#" * 999_000 + "\n[model]\nname = 'llama3'\nflavor = '8B'\n")])  # the comment search is bounded
    assert time.perf_counter() - start < 2.0
    big = "# " + "x" * 1_100_000
    with pytest.raises(InputError, match="larger than"):
        check([("big.sh", big)])


def test_the_command_line_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not valid JSON" in err
    assert main(["check", str(tmp_path / "missing.sh")]) == 2
    capsys.readouterr()
    assert main(["check", str(DATA / "torchtitan_llama3_8b.toml"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["row"]["t"] == 1 and out["counts"]["read"] > 5 and out["typed"].startswith("python -m core plan")


def test_a_presets_block_at_another_depth_reads_as_the_preset_with_depth():
    # Megatron-LM's Llama 3 8B arguments at 4 layers (a proxy run): the preset stacked 4 times, typed as --depth 4
    cmd = ("torchrun --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size 2 --num-layers 4 "
           "--hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --group-query-attention "
           "--num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 --swiglu "
           "--untie-embeddings-and-output-weights --normalization RMSNorm --disable-bias-linear "
           "--position-embedding-type rope --micro-batch-size 1 --global-batch-size 32 --bf16 --vocab-size 128256")
    done = check([("train.sh", cmd)], {"gpu": "h100-80gb"})
    assert (done.reading.raw["model"], done.reading.raw["depth"]) == ("llama3-8b", "4")
    assert done.result.model.name == "Llama 3 8B at 4 layers" and done.result.model.layers == 4
    assert "--depth 4" in done.typed
    assert done.result.model.params == pytest.approx(presets.model("llama3-8b").with_layers(4).params)


@pytest.mark.parametrize("text", [
    "def pretrain_recipe():\n    pass\nx = " + "-" * 200_000 + "1\n",  # CPython's parser gives up: MemoryError
    "def pretrain_recipe():\n    pass\n" + "x = 1\n" * 25_000,
    "def trainer():\n    pass\ndef pretrain_recipe():\n    pass\n" + "x = [" + "1, " * 110_000 + "]\n",
    "import deepspeed\ndeepspeed.initialize\nx = " + "(" * 300 + ")" * 300 + "\n",
], ids=["deep-unary", "many-lines", "wide-literal", "deep-parens"])
def test_hostile_python_gets_one_line_quickly(text):
    start = time.perf_counter()
    with pytest.raises(InputError) as err:
        check([("recipe.py", text)])
    assert time.perf_counter() - start < 2.0
    assert "\n" not in str(err.value) and str(err.value).startswith("recipe.py: ")


@pytest.mark.parametrize("flags, loss", [
    ("--cross-entropy-loss-fusion", "native"),  # Megatron-LM's default impl
    ("--cross-entropy-loss-fusion --cross-entropy-fusion-impl native", "native"),
    ("--cross-entropy-loss-fusion --cross-entropy-fusion-impl te", "fused"),  # Transformer Engine's, in place
    ("--cross-entropy-fusion-impl te", None),  # no fusion switch: the unfused path, said to have no effect
])
def test_megatron_cross_entropy_fusion_reads_as_its_kernel(flags, loss):
    from core.configs import megatron_args
    reading = megatron_args.read(f"torchrun pretrain_gpt.py --num-layers 2 --hidden-size 64 "
                                 f"--num-attention-heads 4 --seq-length 128 {flags}")
    assert reading.raw.get("loss") == loss
    kinds = {e.name: e.kind for e in reading.entries}
    assert kinds["--cross-entropy-fusion-impl" if loss is None else "--cross-entropy-loss-fusion"] == \
        ("no effect" if loss is None else "read")


def test_a_multimodal_config_is_read_from_its_text_config():
    # Llama 4 and Gemma 3 checkpoints nest the language model under text_config (a shape written here in their
    # keys): it is read, with QK norm from use_qk_norm, and the vision tower is said not to be counted
    cfg = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "tie_word_embeddings": False,
           "text_config": {"model_type": "llama4_text", "num_hidden_layers": 4, "hidden_size": 1024,
                           "intermediate_size": 2048, "num_attention_heads": 8, "num_key_value_heads": 2,
                           "vocab_size": 32000, "num_local_experts": 4, "num_experts_per_tok": 1,
                           "use_qk_norm": True},
           "vision_config": {"hidden_size": 1408}}
    done = check([("config.json", json.dumps(cfg))], {"gpus": "8"})
    p = done.params
    assert (p.model, p.layers, p.hidden, p.experts, p.top_k, p.mlp, p.qk_norm, p.tied) == \
        ("custom", 4, 1024, 4, 1, "swiglu", True, False)
    skipped = {e.name for e in done.reading.entries if e.kind == "unsupported"}
    assert "vision_config" in skipped and "architectures" not in skipped
    # gpt-oss names its top-k twice and gates its experts (a clamped SwiGLU)
    oss = {"model_type": "gpt_oss", "num_hidden_layers": 4, "hidden_size": 512, "intermediate_size": 512,
           "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 32000,
           "num_local_experts": 8, "num_experts_per_tok": 2, "experts_per_token": 2, "swiglu_limit": 7.0}
    q = check([("config.json", json.dumps(oss))], {"gpus": "8"}).params
    assert (q.mlp, q.experts, q.top_k) == ("swiglu", 8, 2)
    # experts every other layer (Llama 4 Maverick's interleave step 2) is not an input: the reading says so
    every = {**cfg["text_config"], "interleave_moe_layer_step": 2}
    entries = check([("config.json", json.dumps(every))], {"gpus": "8"}).reading.entries
    assert any(e.kind == "unsupported" and e.name == "interleave_moe_layer_step" for e in entries)
    ones = {**cfg["text_config"], "interleave_moe_layer_step": 1}
    entries = check([("config.json", json.dumps(ones))], {"gpus": "8"}).reading.entries
    assert any(e.kind == "no effect" and e.name == "interleave_moe_layer_step" for e in entries)


@pytest.mark.parametrize("path", [p for p in CONFIGS if p.suffix == ".yaml"], ids=lambda p: p.name)
def test_a_yaml_pasted_without_a_file_name_is_read_as_its_file(path):
    # the Planner page's text area names its text "pasted": a YAML is recognised by its content, not its extension
    text = path.read_text()
    assert detect("pasted", text) == detect(path.name, text)
