"""Megatron-Bridge recipes (NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/recipes/<family>/<gpu>/<model>.py,
2026: one function per run, each editing `_pretrain_common()`'s ConfigContainer field by field), read from the
syntax tree, never run (core.configs.pyeval), into Megatron-LM arguments that core.configs.megatron_args
interprets like every other Megatron input: `cfg.model.*` are Megatron-Core's TransformerConfig fields, `cfg.train`,
`cfg.ddp`, `cfg.optimizer`, `cfg.mixed_precision` and `cfg.comm_overlap` the rest of Megatron-LM's arguments.

The model is `AutoBridge.from_hf_pretrained("<hub id>")`, mapped to the planner's preset of that model. The launch
command (`scripts/training/train.sh --nodes 2 --gpus-per-node 8 --recipe NAME key.path=value ...`) names the recipe,
the GPUs and overrides fields, as Megatron-Bridge's own command line does.
"""

from __future__ import annotations

import re
import shlex

from core.configs import megatron_args
from core.configs.account import Reading, python_tree
from core.configs.pyeval import Call, Entries, Evaluator, Text, choose, constants, functions, plain, set_path
from core.errors import InputError
from core.model import presets

MAX_NODES = 200_000  # syntax-tree nodes (a recipe file is ~1,000 lines, ~15,000 nodes)
ENTRIES = Entries("recipe", "ConfigContainer", "train.sh --recipe NAME ...")
# Hugging Face hub ids -> the planner's preset of that architecture (Llama 3, 3.1 and 3.3 share their sizes' shapes;
# an -Instruct, -Base or dated id is the same shape)
HF_MODELS = ((r"meta-llama/(meta-)?llama-3(\.[13])?-8b", "llama3-8b"),
             (r"meta-llama/(meta-)?llama-3(\.[13])?-70b", "llama3-70b"),
             (r"meta-llama/(meta-)?llama-3(\.1)?-405b", "llama3-405b"), (r"qwen/qwen3-32b", "qwen3-32b"),
             (r"qwen/qwen3-30b-a3b", "qwen3-30b-a3b"), (r"qwen/qwen3-235b-a22b", "qwen3-235b-a22b"),
             (r"deepseek-ai/deepseek-v3(-base|-0324)?", "deepseek-v3"),
             (r"mistralai/mixtral-8x7b(-v0\.1)?", "mixtral-8x7b"),
             (r"mistralai/mixtral-8x22b(-v0\.1)?", "mixtral-8x22b"))
# megatron/bridge/recipes/common.py _pretrain_common() (Megatron-Bridge, 2026): the base every pre-training recipe
# edits; only the fields that move bytes or time
PRETRAIN_COMMON = Call("_pretrain_common", [], {
    "train": Call("TrainingConfig", [], {"global_batch_size": 32, "micro_batch_size": 2}),
    "ddp": Call("DistributedDataParallelConfig", [], {"grad_reduce_in_fp32": True, "overlap_grad_reduce": True,
                                                      "overlap_param_gather": True,
                                                      "use_distributed_optimizer": True}),
    "dataset": Call("GPTDatasetConfig", [], {"seq_length": 4096}), "mixed_precision": "bf16_mixed"})
DEFAULT_DTYPES = {"main_grads_dtype", "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"}
# TransformerConfig / ConfigContainer field -> Megatron-LM flag where the two names differ
RENAMED = {"virtual_pipeline_model_parallel_size": "num-virtual-stages-per-pipeline-rank",
           "num_moe_experts": "num-experts", "gated_linear_unit": "swiglu",
           "moe_a2a_overlap": "overlap-moe-expert-parallel-comm", "average_in_collective": "ddp-average-in-collective",
           "check_for_nan_in_grad": "check-for-nan-in-loss-and-grad"}
MODEL_NO_EFFECT = {
    "pipeline_dtype": "the dtype of the pipeline's sends (the planner sends 16-bit activations)",
    "cuda_graph_warmup_steps": "warm-up iterations before CUDA graph capture",
    "cuda_graph_scope": "what CUDA graphs capture (read with cuda_graph_impl)",
    "use_te_rng_tracker": "the random-number tracker", "bias_activation_fusion": "fused kernels (the release's)",
    "apply_rope_fusion": "fused kernels (the release's)", "moe_hybridep_num_sms": "SMs HybridEP's kernels take",
    "moe_flex_dispatcher_backend": "DeepEP or HybridEP: both timed as DeepEP's once-per-server forwarding",
    "moe_router_force_load_balancing": "forced balanced routing, the planner's balanced default (capacity 1)",
    "moe_router_padding_for_fp8": "routing-map padding for FP8 GEMMs", "offload_modules": "with offloading only",
    "init_model_with_meta_device": "initialisation", "tensor_model_parallel_comm_backend": "collective backend",
}
SECTIONS_NO_EFFECT = ("validation", "scheduler", "logger", "tokenizer", "checkpoint", "rng", "dist", "env_vars",
                      "profiling", "ft", "straggler", "nvrx_straggler", "inprocess_restart", "peft",
                      "rerun_state_machine", "dataset")
PRECISIONS = {"bf16_mixed": {}, "fp16_mixed": {"fp16": "true"},
              "bf16_with_fp8_delayed_scaling_mixed": {"fp8-format": "hybrid", "fp8-recipe": "delayed"},
              "bf16_with_fp8_current_scaling_mixed": {"fp8-format": "hybrid", "fp8-recipe": "tensorwise"},
              "bf16_with_fp8_subchannel_scaling_mixed": {"fp8-format": "e4m3", "fp8-recipe": "blockwise"},
              "bf16_with_mxfp8_mixed": {"fp8-format": "e4m3", "fp8-recipe": "mxfp8"}}
DTYPES = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.uint8": "fp8"}
GPU_NAMES = {"h100": "h100-80gb", "a100": "a100-80gb", "h200": "h200-141gb", "b200": "b200-180gb"}
NAME = re.compile(r"_(\d+)gpus?_(h100|a100|h200|b200|gb200|gb300|b300)_", re.I)


def is_recipe(text: str) -> bool:
    return "ConfigContainer" in text and "def " in text


def is_command(text: str) -> bool:
    return "--recipe" in text and "def " not in text


def read(text: str, source: str = "recipe.py", command: str = "", entry: str = "", gpus: int = 0) -> Reading:
    tree = python_tree(text, source)
    funcs = functions(tree, source, MAX_NODES)
    launch = launch_command(command) if command else {}
    name = choose(funcs, ENTRIES, entry or launch.get("recipe", ""), source)
    r = Reading("megatron-bridge", "megatron", source=source)
    ev = Evaluator(funcs, constants(tree), {"apply_flex_dispatcher_backend": _flex},
                   {"_pretrain_common": PRETRAIN_COMMON})
    cfg = ev.run(funcs[name])
    if not isinstance(cfg, Call):
        raise InputError(f"{source}: {name}() does not return a ConfigContainer the checker can follow")
    r.read("(recipe)", name, {}, f"the run is {name}()" + (" (the launch command's --recipe)" if launch else ""))
    for what in ev.skipped:
        r.unsupported(f"{name}()", what, "control flow and helper calls are not followed: what they set is not read")
    return read_container(cfg, r, launch, gpus, name)


def read_container(cfg: Call, r: Reading, launch: dict, gpus: int = 0, name: str = "") -> Reading:
    """A ConfigContainer (a recipe's, or a run's saved YAML) with the launch command's overrides, into `r`."""
    for path, value in launch.get("fields", {}).items():
        set_path(cfg, path.split("."), value)
        r.read(path, value, {}, "from the launch command (it wins over the config)")
    _gpus(name, launch, gpus, r)
    preset = _model(cfg.kwargs.get("model"), r)
    megatron_args.apply(_flags(cfg, r), r, preset)
    return r


def _flex(model: object, backend: object = None) -> None:
    """Megatron-Bridge's apply_flex_dispatcher_backend: DeepEP or HybridEP runs the flex token dispatcher."""
    if isinstance(model, Call) and backend in ("deepep", "hybridep"):
        model.kwargs["moe_token_dispatcher_type"] = "flex"


def _gpus(name: str, launch: dict, given: int, r: Reading) -> None:
    """The GPUs: the user's, the launch command's nodes x GPUs per node, else what the recipe's name says."""
    m = NAME.search(name + "_")
    if m and m.group(2).lower() in GPU_NAMES:
        r.read("(recipe name)", m.group(2), {"gpu": GPU_NAMES[m.group(2).lower()]}, f"gpu = "
               f"{GPU_NAMES[m.group(2).lower()]} (as the recipe's name says)")
    elif m:
        r.unsupported("(recipe name)", m.group(2), "no preset for this GPU; give --gpu (custom for its numbers)")
    if given:
        r.raw["gpus"] = str(given)
    elif "gpus" in launch:
        r.read("--nodes x --gpus-per-node", launch["gpus"], {"gpus": launch["gpus"]})
    elif m:
        r.read("(recipe name)", f"{m.group(1)} GPUs", {"gpus": int(m.group(1))}, f"gpus = {m.group(1)} (as the "
               "recipe's name says)")


def hub_preset(hub: str) -> str | None:
    """The planner's preset of a Hugging Face hub id (an -Instruct, -Base or -hf id is the same shape), or None."""
    bare = re.sub(r"-(instruct|hf|base)$", "", hub.lower())
    return next((k for pattern, k in HF_MODELS if re.fullmatch(pattern, bare)), None)


def _model(model: object, r: Reading) -> presets.ModelConfig | None:
    """The preset a hub id names; None when the model states its own architecture (a saved config's num_layers,
    hidden_size, ...), which megatron_args reads as flags."""
    if isinstance(model, Call) and "num_layers" in model.kwargs and "hidden_size" in model.kwargs:
        return None
    hub = hub_id(model)
    key = hub_preset(hub) if hub else None
    if not key:
        known = ", ".join(sorted({k for _, k in HF_MODELS}))
        raise InputError(f"cfg.model: {(hub or str(plain(model)))[:60]!r} is not a model the checker maps to a preset "
                         f"({known}); give its architecture with --model custom and the layer flags")
    r.read("cfg.model", hub, {"model": key}, f"model = {key}: the Hugging Face model {hub} is this preset's "
           "architecture")
    return presets.model(key)


def hub_id(model: object) -> str:
    """The hub id an AutoBridge.from_hf_pretrained(...) chain names, wherever in the chain it is."""
    if isinstance(model, Call):
        for value in model.args:
            if isinstance(value, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", value):
                return value
            found = hub_id(value)
            if found:
                return found
    return ""


def _flags(cfg: Call, r: Reading) -> dict[str, str]:
    """The ConfigContainer as Megatron-LM flags (name without dashes -> value, "true" for a switch)."""
    flags: dict[str, str] = {}
    top = dict(cfg.kwargs)
    model = top.pop("model", None)
    for key, value in (model.kwargs.items() if isinstance(model, Call) else []):
        _model_field(key, value, flags, r)
    for section in ("train", "ddp", "optimizer"):
        body = top.pop(section, None)
        aware = isinstance(body, Call) and body.kwargs.get("use_precision_aware_optimizer") is True
        for key, value in (body.kwargs.items() if isinstance(body, Call) else []):
            if key in DEFAULT_DTYPES and not aware and str(value) == "torch.float32":
                r.no_effect(f"cfg.{section}.{key}", str(value), "fp32: Megatron-LM's default")
            else:
                _field(f"cfg.{section}.{key}", key, value, flags, r)
    _precision(top.pop("mixed_precision", None), flags, r)
    overlap = top.pop("comm_overlap", None)
    for key, value in (overlap.kwargs.items() if isinstance(overlap, Call) else []):
        if key == "tp_comm_overlap_cfg":
            r.no_effect(f"cfg.comm_overlap.{key}", plain(value), "how the userbuffers split each GEMM")
        else:
            _field(f"cfg.comm_overlap.{key}", key, value, flags, r)
    dataset = top.get("dataset")
    seq = dataset.kwargs.get("seq_length") if isinstance(dataset, Call) else None
    if isinstance(seq, int) and "seq-length" not in flags:
        flags["seq-length"] = str(seq)
    for name, value in top.items():
        why = "data, schedule, logging, checkpoints and environment: no bytes, no time"
        (r.no_effect if name in SECTIONS_NO_EFFECT else r.unsupported)(f"cfg.{name}", plain(value), why if name in
                                                                       SECTIONS_NO_EFFECT else "not read")
    return flags


def _model_field(key: str, value: object, flags: dict[str, str], r: Reading) -> None:
    if key == "share_embeddings_and_output_weights" and value is False:
        flags["untie-embeddings-and-output-weights"] = "true"
        return
    if key == "num_query_groups" and isinstance(value, int):
        flags["group-query-attention"] = "true"
    if key == "cuda_graph_impl":
        if value not in (None, "none"):
            r.unsupported("cfg.model.cuda_graph_impl", value, "CUDA graphs cut the host's launch time, which the "
                          "planner does not model")
        return
    if key == "fine_grained_activation_offloading" and value:
        r.unsupported(f"cfg.model.{key}", value, "activation offloading is not modelled")
        return
    if key in MODEL_NO_EFFECT or key == "fine_grained_activation_offloading":
        r.no_effect(f"cfg.model.{key}", plain(value), MODEL_NO_EFFECT.get(key, "off"))
        return
    _field(f"cfg.model.{key}", key, value, flags, r)


def _field(name: str, key: str, value: object, flags: dict[str, str], r: Reading) -> None:
    """One field as the Megatron-LM flag of the same name: True a switch, False and None left at the default."""
    flag = RENAMED.get(key, key.replace("_", "-"))
    if key == "grad_reduce_in_fp32":
        flag, value = "grad-reduce-in-bf16", value is False
    if value is None or value is False:
        r.no_effect(name, plain(value), "unset or off: Megatron-LM's default")
    elif value is True:
        flags[flag] = "true"
    elif isinstance(value, (int, float, str)):
        flags[flag] = str(value)
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        flags[flag] = " ".join(value)
    elif isinstance(value, Text) and str(value) in DTYPES:
        flags[flag] = DTYPES[str(value)]
    else:
        r.unsupported(name, plain(value), "a value the checker cannot read")


def _precision(mp: object, flags: dict[str, str], r: Reading) -> None:
    """cfg.mixed_precision: a preset's name (or its function, bf16_mixed()), then its own fields."""
    name = mp if isinstance(mp, str) else mp.short() if isinstance(mp, Call) else "bf16_mixed"
    if isinstance(mp, Call) and mp.short() == "get_mixed_precision_config" and mp.args:
        name = str(mp.args[0])
    if isinstance(mp, Call) and mp.short() == "MixedPrecisionConfig":  # a saved config's own fields
        name = "fp16_mixed" if mp.kwargs.get("fp16") is True else "bf16_mixed"
    if name not in PRECISIONS:
        r.unsupported("cfg.mixed_precision", name, "not a mixed-precision preset the checker knows; counted as bf16")
        name = "bf16_mixed"
    flags.update({"bf16": "true"} if "fp16" not in PRECISIONS[name] else {})
    flags.update(PRECISIONS[name])
    r.read("cfg.mixed_precision", name, {}, "Megatron-LM " + " ".join(f"--{k} {v}" for k, v in
                                                                      PRECISIONS[name].items()) if PRECISIONS[name]
           else "--bf16")
    for key, value in (mp.kwargs.items() if isinstance(mp, Call) else []):
        if key in ("fp8", "fp8_recipe", "fp8_param_gather", "grad_reduce_in_fp32") and value not in (None, False):
            _field(f"cfg.mixed_precision.{key}", {"fp8": "fp8_format"}.get(key, key), value, flags, r)
        else:
            r.no_effect(f"cfg.mixed_precision.{key}", plain(value), "numerics of the recipe")


def launch_command(text: str) -> dict:
    """Megatron-Bridge's launch: --recipe, --nodes and --gpus-per-node, --seq_length, and key.path=value
    overrides (its scripts/training/train.sh and run_recipe.py)."""
    try:
        words = shlex.split(text.replace("\\\n", " "), comments=True)
    except ValueError as exc:
        raise InputError(f"launch command: {exc}") from None
    out: dict = {"fields": {}}
    for i, w in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        key, eq, val = w.partition("=")
        value = val if eq else nxt
        if key in ("--recipe", "--nodes", "--gpus-per-node", "--gpus_per_node", "--seq_length", "--seq-length"):
            out[key.lstrip("-").replace("-", "_")] = value
        elif eq and not w.startswith("-") and re.fullmatch(r"[a-z_]+(\.[a-z_0-9]+)+", key):
            out["fields"][key] = _word(val)
    if "nodes" in out or "gpus_per_node" in out:
        out["gpus"] = int(_word(out.get("nodes", "1")) or 1) * int(_word(out.get("gpus_per_node", "8")) or 8)
    if "seq_length" in out:
        for path in ("model.seq_length", "dataset.seq_length"):
            out["fields"].setdefault(path, _word(out["seq_length"]))
    return out


def _word(text: object) -> object:
    text = str(text)
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    return int(text) if re.fullmatch(r"-?\d{1,15}", text) else text
