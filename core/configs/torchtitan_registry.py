"""torchtitan's Python config registry (since 9810191b, February 2026, torchtitan/models/<module>/config_registry.py:
one function per run, each returning a `Trainer.Config(...)`), read from the syntax tree, never run.

core.configs.pyeval follows what such a function does; the calls it keeps (`ParallelismConfig(...)`,
`FullAC.Config()`) map onto the sections a TOML train config had, which core.configs.torchtitan_toml reads.
The launch command (`CONFIG=llama3_8b NGPU=8 ./run_train.sh --parallelism.tensor_parallel_degree 2`, or torchrun
with `--module` and `--config`) names the entry and overrides fields, as torchtitan's own command line does.
"""

from __future__ import annotations

import ast
import re
import shlex

from core.configs import torchtitan_toml
from core.configs.account import Reading, python_tree
from core.configs.pyeval import Call, Entries, Evaluator, choose, functions, plain, set_path
from core.errors import InputError

MAX_NODES = 200_000  # syntax-tree nodes (torchtitan's largest registry, deepseek_v3, is ~6,000)
FAMILIES = ("deepseek_v3", "llama3", "qwen3")  # the modules whose flavors core.configs.torchtitan_flavors knows
OTHER_FAMILIES = ("gpt_oss", "llama4", "kimi_k2_7", "qwen3_5", "flux", "muse_glimmer")  # torchtitan models, 2026
MODEL_CLASSES = {"deepseek_v3": "DeepSeekV3Model", "llama3": "Llama3Model", "qwen3": "Qwen3Model"}
SECTIONS = ("training", "parallelism", "compile")  # Trainer.Config keywords that are a TOML table's fields as is
NO_EFFECT = {"hf_assets_path", "profiler", "metrics", "dataloader", "checkpoint", "validator", "lr_scheduler",
             "debug", "comm", "tokenizer", "dump_folder", "override", "fault_tolerance"}
CONVERTERS = {"Float8LinearConverter": "float8", "MXFP8LinearConverter": "mxfp8", "NVFP4LinearConverter": "nvfp4"}
ENTRIES = Entries("config", "Trainer.Config", "CONFIG=NAME ./run_train.sh ...")
COMMAND = re.compile(r"run_train\.sh|torchtitan\.train|--module\b|\bMODULE=|\bCONFIG=")


def is_registry(text: str) -> bool:
    return "Trainer.Config" in text and "def " in text


def is_command(text: str) -> bool:
    return bool(COMMAND.search(text)) and "def " not in text and "Trainer.Config" not in text


def read(text: str, source: str = "config_registry.py", command: str = "", entry: str = "", gpus: int = 0
         ) -> Reading:
    tree = python_tree(text, source)
    funcs = functions(tree, source, MAX_NODES)
    launch = _command(command) if command else {}
    name = choose(funcs, ENTRIES, entry or launch.get("config", ""), source)
    r = Reading("torchtitan", "torch", source=source)
    ev = Evaluator(funcs)
    cfg = ev.run(funcs[name])
    if not isinstance(cfg, Call):
        raise InputError(f"{source}: {name}() does not return a Trainer.Config the checker can follow")
    r.read("(entry)", name, {}, f"the run is {name}()" + (" (the launch command's CONFIG)" if launch else ""))
    for what in ev.skipped:
        r.unsupported(f"{name}()", what, "control flow and helper calls are not followed: what they set is not "
                      "read")
    module = launch.get("module") or _module(tree, source, name)
    _apply(cfg, launch.get("fields", {}), r)
    if "gpus" in launch:
        r.read("NGPU / --nproc_per_node", launch["gpus"], {"gpus": launch["gpus"]})
    return torchtitan_toml.read_sections(_sections(cfg, module, r), r, gpus)


def _module(tree: ast.Module, source: str, entry: str) -> str:
    """Which torchtitan model package the registry belongs to: its path, its imports, or the entry's name."""
    m = re.search(r"(?:models/(\w+)/|(\w+?)_config_registry\.py$)", source.replace("\\", "/"))
    named = m and (m.group(1) or m.group(2))
    if named in FAMILIES:
        return named
    if named and (m.group(1) or named in OTHER_FAMILIES):
        raise InputError(f"{source}: torchtitan's {named[:30]} models are not a family the importer knows "
                         f"({', '.join(FAMILIES)}); give the architecture with --model or a Hugging Face config.json")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found = re.match(r"torchtitan\.models\.(\w+)", node.module)
            if found and found.group(1) in FAMILIES:
                return found.group(1)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    for family, model_class in MODEL_CLASSES.items():
        if model_class in names:
            return family
    for family in sorted(FAMILIES, key=len, reverse=True):
        if entry.startswith(family) or entry.startswith(family.replace("_", "")):
            return family
    raise InputError(f"{source}: which torchtitan model {entry}() builds is not in the file (its path, a "
                     "torchtitan.models.<name> import, or a name starting llama3_, qwen3_ or deepseek_v3_); add "
                     "the launch command with --module")


def _command(text: str) -> dict:
    """The launch command: its config and module names, the GPU count and the dotted field overrides."""
    try:
        words = shlex.split(text.replace("\\\n", " "), comments=True)
    except ValueError as exc:
        raise InputError(f"launch command: {exc}") from None
    out: dict = {"fields": {}}
    i = 0
    while i < len(words):
        w = words[i]
        nxt = words[i + 1] if i + 1 < len(words) else ""
        key, eq, val = w.partition("=")
        if eq and key in ("CONFIG", "MODULE", "NGPU"):
            out[{"CONFIG": "config", "MODULE": "module", "NGPU": "gpus"}[key]] = val
        elif key in ("--config", "--module", "--nproc_per_node", "--nproc-per-node", "--nnodes"):
            value = val if eq else nxt
            i += 0 if eq else 1
            slot = {"--config": "config", "--module": "module", "--nnodes": "nodes"}.get(key, "per_node")
            out[slot] = value
        elif w.startswith("--") and "." in key:
            path = key[2:].replace("-", "_")
            if eq:
                out["fields"][path] = _word(val)
            elif nxt and not nxt.startswith("--"):
                out["fields"][path] = _word(nxt)
                i += 1
            else:
                out["fields"][re.sub(r"\.no_(\w+)$", r".\1", path)] = not re.search(r"\.no_\w+$", path)
        i += 1
    if "per_node" in out:
        out["gpus"] = int(_word(out["per_node"]) or 1) * int(_word(out.get("nodes", "1")) or 1)
    elif "gpus" in out:
        out["gpus"] = int(_word(out["gpus"]) or 1)
    return out


def _word(text: str) -> object:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    return int(text) if re.fullmatch(r"-?\d{1,15}", text) else text


def _apply(cfg: Call, fields: dict, r: Reading) -> None:
    for path, value in fields.items():
        parts = path.split(".")
        if any(not p.isidentifier() for p in parts):
            r.unsupported(f"--{path}", value, "not a field path")
            continue
        set_path(cfg, parts, value)
        r.read(f"--{path}", value, {}, "from the launch command (it wins over the config function)")


def _sections(cfg: Call, module: str, r: Reading) -> dict:
    """Trainer.Config's keywords as the tables of a TOML train config."""
    top = dict(cfg.kwargs)
    sections: dict[str, object] = {"model": _model(top.pop("model_spec", None), module, r)}
    for name in SECTIONS:
        body = top.pop(name, None)
        if isinstance(body, Call):
            sections[name] = {k: plain(v) for k, v in body.kwargs.items()}
    sections["activation_checkpoint"] = _recompute(top.pop("activation_checkpoint", None), r)
    sections["loss"] = _loss(top.pop("loss", None), r)
    optimizer = top.pop("optimizer", None)
    if isinstance(optimizer, Call):
        sections["optimizer"] = {"name": optimizer.short()} | {k: plain(v) for k, v in optimizer.kwargs.items()}
    for name, value in top.items():
        if name in NO_EFFECT:
            r.no_effect(name, plain(value), "paths, logging, data, checkpoints and validation: no bytes, no time")
        else:
            r.unsupported(name, plain(value), "a Trainer.Config field the importer does not know")
    return sections


def _model(spec: object, module: str, r: Reading) -> dict:
    if not (isinstance(spec, Call) and spec.name.split(".")[-1] == "model_registry" and spec.args
            and isinstance(spec.args[0], str)):
        raise InputError(f"model_spec: {str(plain(spec))[:60]!r} is not model_registry(\"FLAVOR\", ...) with the "
                         "flavor written out")
    out = {"name": module, "flavor": spec.args[0]}
    for key, value in spec.kwargs.items():
        if key == "converters" and isinstance(value, list):
            out["converters"] = [CONVERTERS.get(c.short(), c.short()) if isinstance(c, Call) else str(c)
                                 for c in value]
        elif key == "attn_backend":
            r.no_effect("model_registry(attn_backend)", value, "counted as a fused (flash) attention kernel")
        else:
            r.unsupported(f"model_registry({key})", plain(value), "not read")
    return out


def _recompute(ac: object, r: Reading) -> dict:
    """torchtitan's activation-checkpoint policy class (SelectiveAC, its per-op policy, is Trainer.Config's
    default)."""
    if ac is None:
        return {"mode": "selective", "selective_ac_option": "op"}
    kind = ac.short() if isinstance(ac, Call) else str(ac)
    for key, value in (ac.kwargs.items() if isinstance(ac, Call) else []):
        r.no_effect(f"{kind}.{key}", plain(value), "which matmuls the policy recomputes besides its rule "
                    "(the router's gate) and debugging switches")
    if kind == "FullAC":
        return {"mode": "full"}
    if kind != "SelectiveAC":
        r.unsupported("activation_checkpoint", kind, "counted as torchtitan's per-op selective policy")
    return {"mode": "selective", "selective_ac_option": "op"}


def _loss(loss: object, r: Reading) -> str | None:
    if loss is None:
        return None
    if isinstance(loss, Call) and loss.short() == "ChunkedLossWrapper":
        chunks = loss.kwargs.get("num_chunks", 8)
        if chunks != 8:
            r.unsupported("ChunkedLossWrapper(num_chunks)", chunks, "counted as torchtitan's default 8 chunks")
        return "chunked"
    if isinstance(loss, Call) and loss.short() == "CrossEntropyLoss":
        return "cross_entropy"
    return str(plain(loss))
