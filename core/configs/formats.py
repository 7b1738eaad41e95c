"""Which reader a config file needs, decided from its content (never by running it), and several files merged.

Formats: a Megatron-LM command or launch script, a torchtitan TOML or Python config registry and a Megatron-Bridge
recipe or saved config (each with its launch command), a DeepSpeed JSON or an Accelerate YAML (with a Hugging Face
config.json for the model, and the Python that builds DeepSpeed's pipeline topology), a Hugging Face config.json
alone, a NeMo 1 YAML, the fine-tuning frameworks', LLM Foundry's, torchtune's and NeMo Automodel's run YAMLs, and
the planner's own PyTorch script (Python is read as a syntax tree, never run).
"""

from __future__ import annotations

import tomllib

from core.configs import (
    accelerate_yaml,
    automodel_yaml,
    bridge_recipe,
    bridge_yaml,
    deepspeed_json,
    finetune_yaml,
    foundry_yaml,
    hf_config,
    megatron_args,
    nemo2_recipe,
    nemo_yaml,
    torch_script,
    torchtitan_registry,
    torchtitan_toml,
    torchtune_yaml,
)
from core.configs.account import Reading, json_object, yaml_data
from core.errors import InputError

MAX_BYTES = 1_000_000  # per file: the largest real launch script or recipe is ~30 KB
MAX_FILES = 4
KINDS = ("auto", "megatron", "torchtitan", "deepspeed", "deepspeed-setup", "huggingface", "nemo", "nemo2",
         "megatron-bridge", "accelerate", "finetune", "llm-foundry", "torchtune", "automodel",
         "torch-script")


def read_any(texts: list[tuple[str, str]], kind: str = "auto", entry: str = "", gpus: int = 0) -> Reading:
    """One run from its files; `entry`: which function of a torchtitan config registry or a Megatron-Bridge recipe
    file is the run; `gpus`: the GPU count the user gives (a torchtitan data-parallel degree of -1 takes the GPUs
    left)."""
    if kind not in KINDS:
        raise InputError(f"format: {kind[:40]!r} is not one of {', '.join(KINDS)}")
    if len(texts) > MAX_FILES:
        raise InputError(f"check takes at most {MAX_FILES} files (one run: its config and its model's config.json)")
    for name, text in texts:
        if len(text.encode("utf-8", "replace")) > MAX_BYTES:
            raise InputError(f"{name}: larger than {MAX_BYTES // 1000:,} KB; not a training config")
        if "\x00" in text:
            raise InputError(f"{name}: binary content; not a training config")
    texts, command = _launch_command(texts)
    readings = []
    for name, text in texts:
        try:
            readings.append(_read_one(name, text, kind if len(texts) == 1 else "auto", gpus, command, entry))
        except RecursionError:
            raise InputError(f"{name}: nested too deeply; not a training config") from None
    if not readings:
        raise InputError("only launch commands or override files given; give the config they run or change")
    return merge(readings)


def _launch_command(texts: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], str]:
    """A launch command given beside the Python config it runs (a torchtitan registry, a Megatron-Bridge recipe) is
    read with it (it names the entry, the GPUs and overrides fields), not as a file of its own."""
    pairs = ((lambda n, t: torchtitan_registry.is_registry(t), torchtitan_registry.is_command),
             (lambda n, t: bridge_recipe.is_recipe(t) or _is_yaml(n) and bridge_yaml.is_container(_yaml(t))
              and not bridge_yaml.is_override(_yaml(t)), bridge_recipe.is_command))
    for is_config, is_command in pairs:
        if any(is_config(n, t) for n, t in texts):
            commands = [(n, t) for n, t in texts if is_command(t)]
            if len(commands) > 1:
                raise InputError("two launch commands given; keep the one you run")
            command = commands[0][1] if commands else ""
            overrides = [(n, t) for n, t in texts if is_command is bridge_recipe.is_command and _is_yaml(n)
                         and bridge_yaml.is_override(_yaml(t))]
            command = " ".join([command] + [bridge_yaml.as_command(_yaml(t)) for _, t in overrides])
            return [x for x in texts if x not in commands and x not in overrides], command.strip()
    return texts, ""


def _is_yaml(name: str) -> bool:
    return name.lower().endswith((".yaml", ".yml"))


def detect(name: str, text: str) -> str:
    stripped = text.lstrip()
    low = name.lower()
    if low.endswith(".json") or stripped.startswith("{"):
        data = json_object(text, name)
        if any(k in data for k in ("num_hidden_layers", "n_layer", "num_layers")) and "hidden_size" in data \
                or "architectures" in data or "model_type" in data:
            return "huggingface"
        return "deepspeed"
    if low.endswith(".toml"):
        return "torchtitan"
    if low.endswith((".yaml", ".yml")):
        return _yaml_kind(_yaml(text)) or "nemo"
    if torchtitan_registry.is_registry(text):
        return "torchtitan"
    if bridge_recipe.is_recipe(text):
        return "megatron-bridge"
    if torchtitan_registry.is_command(text) and "--" in text and "pretrain_" not in text:
        raise InputError(f"{name}: a torchtitan launch command; give its config registry (the config_registry.py "
                         "that defines the CONFIG it runs) with it")
    if bridge_recipe.is_command(text) and "pretrain_gpt" not in text:
        raise InputError(f"{name}: a Megatron-Bridge launch command; give the recipe file that defines its --recipe "
                         "with it")
    if low.endswith(".py") or "import " in text and "def " in text:
        if "run.Partial" in text or "nemo.collections" in text or "def pretrain_recipe" in text:
            return "nemo2"
        if "PipeModelDataParallelTopology" in text or "deepspeed.initialize" in text:
            return "deepspeed-setup"
        return "torch-script"
    if "--" in text and any(k in text for k in ("pretrain_", "--num-layers", "--tensor-model-parallel-size",
                                                "--hidden-size")):
        return "megatron"
    try:
        data = tomllib.loads(text)
        if isinstance(data, dict) and ("parallelism" in data or "training" in data):
            return "torchtitan"
    except tomllib.TOMLDecodeError:
        pass
    pasted = _yaml(text) if ":" in text else None  # YAML pasted without a file name
    if isinstance(pasted, dict):
        kind = _yaml_kind(pasted) or ("nemo" if isinstance(pasted.get("model"), dict) and "trainer" in pasted else "")
        if kind:
            return kind
    raise InputError(f"{name}: not a config the checker reads (a Megatron-LM command or script, a torchtitan TOML or "
                     "registry, a DeepSpeed JSON, an Accelerate, LLM Foundry, torchtune, NeMo Automodel or NeMo YAML, "
                     "a Hugging Face config.json, a NeMo or Megatron-Bridge recipe)")


def _read_one(name: str, text: str, kind: str, gpus: int = 0, command: str = "", entry: str = "") -> Reading:
    kind = detect(name, text) if kind == "auto" else kind
    python = kind in ("torchtitan", "megatron-bridge") and (torchtitan_registry.is_registry(text)
                                                           or bridge_recipe.is_recipe(text))
    reader = {"megatron": megatron_args.read, "deepspeed": deepspeed_json.read, "huggingface": hf_config.read,
              "nemo": nemo_yaml.read, "nemo2": nemo2_recipe.read, "accelerate": accelerate_yaml.read,
              "finetune": finetune_yaml.read, "llm-foundry": foundry_yaml.read,
              "torchtune": torchtune_yaml.read, "automodel": automodel_yaml.read,
              "deepspeed-setup": deepspeed_json.read_setup, "torch-script": torch_script.read,
              "torchtitan": lambda t, n: (torchtitan_registry.read(t, n, command, entry, gpus) if python
                                          else torchtitan_toml.read(t, n, gpus=gpus)),
              "megatron-bridge": lambda t, n: (bridge_recipe.read(t, n, command, entry, gpus) if python
                                               else bridge_yaml.read(t, n, command, gpus))}[kind]
    try:
        return reader(text, name)
    except InputError:
        raise
    except (ValueError, TypeError, AttributeError, ArithmeticError) as exc:  # a value of the wrong kind somewhere
        raise InputError(f"{name}: a value the importer cannot read ({type(exc).__name__}: {str(exc)[:80]})") from None


def _yaml_kind(data: object) -> str:
    """Which YAML reader a parsed YAML needs ("" when no reader recognises it)."""
    for kind, fits in (("megatron-bridge", bridge_yaml.is_container), ("accelerate", accelerate_yaml.is_accelerate),
                       ("finetune", finetune_yaml.is_finetune), ("llm-foundry", foundry_yaml.is_foundry),
                       ("torchtune", torchtune_yaml.is_torchtune), ("automodel", automodel_yaml.is_automodel)):
        if fits(data):
            return kind
    return ""


def _yaml(text: str) -> object:
    """The YAML's data when it parses (the readers say why when it does not)."""
    try:
        return yaml_data(text, "")
    except InputError:
        return None


def merge(readings: list[Reading]) -> Reading:
    """One run from several files: a field two files both set must agree (one clear error if not)."""
    if len(readings) == 1:
        return readings[0]
    order = sorted(readings, key=lambda r: r.kind != "huggingface")  # the model first, the training config after
    out = Reading("+".join(r.kind for r in order), next((r.framework for r in order if r.framework), ""),
                  source=", ".join(r.source for r in order), accumulation=max(r.accumulation for r in order))
    for r in order:
        for key, value in r.raw.items():
            if key in out.raw and out.raw[key] != value and not _assumed(r, key):
                if _assumed(out, key):
                    out.raw[key] = value
                    continue
                raise InputError(f"{r.source} sets {key} = {value}, {out.source} said {out.raw[key]}")
            out.raw.setdefault(key, value)
        out.entries.extend(e for e in r.entries if not (e.kind == "assumed" and _given(readings, r, e.name)))
    return out


def _assumed(r: Reading, key: str) -> bool:
    return any(e.kind == "assumed" and e.name == key for e in r.entries)


def _given(readings: list[Reading], r: Reading, key: str) -> bool:
    return any(o is not r and key in o.raw and not _assumed(o, key) for o in readings)
