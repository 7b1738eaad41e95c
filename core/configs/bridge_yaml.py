"""A Megatron-Bridge run's saved ConfigContainer (`logger.save_config_filepath`, ConfigContainer.to_yaml: every
section a mapping with its `_target_` class and all its fields, the model's architecture included), or an override
YAML of the same shape, read as core.configs.bridge_recipe reads a recipe's ConfigContainer.

An override file (ConfigContainer sections without an architecture) only changes a recipe: given beside the recipe
it is read as the launch command's `section.field=value` overrides.
"""

from __future__ import annotations

import shlex

from core.configs import automodel_yaml, bridge_recipe, foundry_yaml, torchtune_yaml
from core.configs.account import Reading, yaml_object
from core.configs.pyeval import Call, Text
from core.errors import InputError

MAX_NODES = 100_000  # mappings, lists and values (a saved ConfigContainer has ~1,500)
SECTIONS = ("train", "ddp", "optimizer", "dataset", "logger", "checkpoint", "mixed_precision", "scheduler",
            "tokenizer", "rng", "comm_overlap", "dist", "validation")
NOISE = {"activation_func": "the activation (its matrices follow gated_linear_unit)",
         "init_method": "initialisation", "output_layer_init_method": "initialisation",
         "bias_init_method": "initialisation", "params_dtype": "the parameters' dtype (mixed_precision's)",
         "autocast_dtype": "the autocast dtype (mixed_precision's)", "generation_config": "inference",
         "hf_model_id": "its hub id (the architecture is the file's own)", "layernorm_epsilon": "numerics",
         "rotary_base": "numerics", "rotary_percent": "numerics", "seq_len_interpolation_factor": "numerics",
         "make_vocab_size_divisible_by": "the vocabulary's padding (vocab_size is the padded size)"}


def is_container(data: object) -> bool:
    """A mapping shaped like a ConfigContainer: a model section and two or more of its other sections, no NeMo 1
    `trainer` section, and not an LLM Foundry, torchtune or NeMo Automodel run (their model, optimizer and scheduler
    sections beside a top-level batch)."""
    return (isinstance(data, dict) and isinstance(data.get("model"), dict) and "trainer" not in data
            and sum(k in data for k in SECTIONS) >= 2 and not foundry_yaml.is_foundry(data)
            and not torchtune_yaml.is_torchtune(data) and not automodel_yaml.is_automodel(data))


def read(text: str, source: str = "ConfigContainer.yaml", command: str = "", gpus: int = 0) -> Reading:
    data = yaml_object(text, source, is_container, "a Megatron-Bridge ConfigContainer (a model section and its "
                       "train, ddp, optimizer, ... sections)")
    cfg = _call("ConfigContainer", data, [MAX_NODES])
    model = cfg.kwargs["model"]
    if "num_layers" not in model.kwargs and not bridge_recipe.hub_id(model):
        raise InputError(f"{source}: a Megatron-Bridge override file (no architecture in its model section); give "
                         "the recipe it overrides with it")
    r = Reading("megatron-bridge", "megatron", source=source)
    for key in list(model.kwargs):
        if key in NOISE:
            r.no_effect(f"cfg.model.{key}", str(model.kwargs.pop(key))[:60], NOISE[key])
    launch = bridge_recipe.launch_command(command) if command else {}
    return bridge_recipe.read_container(cfg, r, launch, gpus)


def is_override(data: object) -> bool:
    """An override YAML of a recipe: ConfigContainer sections only, and no architecture of its own."""
    return (isinstance(data, dict) and bool(data) and all(k in SECTIONS or k == "model" for k in data)
            and not (isinstance(data.get("model"), dict) and "num_layers" in data["model"]))


def as_command(data: dict) -> str:
    """An override file's scalar fields as the launch command's `section.field=value` words."""
    words, budget = [], [MAX_NODES]

    def walk(node: dict, prefix: str) -> None:
        for key, value in node.items():
            budget[0] -= 1
            if budget[0] < 0:
                raise InputError(f"more than {MAX_NODES:,} values; not an override file")
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
            elif isinstance(value, (bool, int, float, str)) and not str(key).startswith("_"):
                words.append(shlex.quote(f"{prefix}{key}={value}"))
    walk(data, "")
    return " ".join(words)


def _call(name: str, node: dict, budget: list[int]) -> Call:
    """A mapping as the Call that built it: `_target_` its class, the other keys its fields."""
    kwargs = {}
    for key, value in node.items():
        if key in ("_target_", "_call_", "_partial_"):
            continue
        kwargs[str(key)] = _value(value, budget)
    return Call(str(node.get("_target_", name)), [], kwargs)


def _value(node: object, budget: list[int]) -> object:
    budget[0] -= 1
    if budget[0] < 0:
        raise InputError(f"more than {MAX_NODES:,} values; not a saved config")
    if isinstance(node, dict):
        if "_target_" in node and node.get("_call_") is False:  # a class or function named, not built
            return Text(str(node["_target_"]))
        return _call("dict", node, budget)
    if isinstance(node, list):
        return [_value(v, budget) for v in node]
    if isinstance(node, str) and node.startswith("torch."):
        return Text(node)
    return node
