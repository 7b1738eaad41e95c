"""NeMo 2 recipes (NeMo-Run Python, nemo/collections/llm/recipes/<model>.py), read from the syntax tree, never run.

A recipe states its run in three places: `trainer()`'s default arguments (the parallel sizes, nodes and GPUs), the
keywords `pretrain_recipe()` passes to `trainer(...)` (its own num_nodes and num_gpus_per_node, which win), and the
`run.Config(MockDataModule, seq_length=..., global_batch_size=..., micro_batch_size=...)` it builds. The model is a
class name (`run.Config(Llama3Config8B)`), mapped to the planner's preset of that model; `MegatronStrategy`'s
keywords are Megatron-LM's arguments, interpreted by core.configs.megatron_args like every other Megatron input.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from core.configs import megatron_args
from core.configs.account import Reading, python_tree
from core.errors import InputError
from core.model import presets

# NeMo 2's model config classes (nemo/collections/llm/gpt/model/*.py at NVIDIA/NeMo 8cfedd72) -> the preset with that
# architecture (Llama 3 8B / 70B checked field by field in tests/data/configs/SOURCES.md; the rest by the model they
# name: the 3.1 classes differ from 3.0 in rotary scaling only, which moves no bytes)
CLASSES = {"Llama3Config8B": "llama3-8b", "Llama31Config8B": "llama3-8b", "Llama3Config70B": "llama3-70b",
           "Llama31Config70B": "llama3-70b", "Llama31Config405B": "llama3-405b", "MixtralConfig8x7B": "mixtral-8x7b",
           "MixtralConfig8x22B": "mixtral-8x22b", "DeepSeekV3Config": "deepseek-v3", "Qwen3Config32B": "qwen3-32b",
           "Qwen3Config30B_A3B": "qwen3-30b-a3b", "Qwen3Config235B_A22B": "qwen3-235b-a22b",
           "GPTConfig175B": "gpt3-175b"}
# MegatronStrategy keyword -> Megatron-LM flag (NeMo passes them to Megatron-Core's parallel state unchanged)
STRATEGY = {"tensor_model_parallel_size": "tensor-model-parallel-size",
            "pipeline_model_parallel_size": "pipeline-model-parallel-size",
            "virtual_pipeline_model_parallel_size": "num-virtual-stages-per-pipeline-rank",
            "context_parallel_size": "context-parallel-size", "sequence_parallel": "sequence-parallel",
            "expert_model_parallel_size": "expert-model-parallel-size",
            "expert_tensor_parallel_size": "expert-tensor-parallel-size"}
DDP = {"overlap_grad_reduce": "overlap-grad-reduce", "overlap_param_gather": "overlap-param-gather"}
DATA = {"seq_length": "seq-length", "global_batch_size": "global-batch-size", "micro_batch_size": "micro-batch-size"}
MAX_NODES = 200_000  # syntax-tree nodes walked (a recipe is ~400 lines, ~4,000 nodes)


def read(text: str, source: str = "recipe.py") -> Reading:
    tree = python_tree(text, source)
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise InputError(f"{source}: larger than a recipe ({MAX_NODES:,} syntax nodes)")
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if "trainer" not in funcs or "pretrain_recipe" not in funcs:
        raise InputError(f"{source}: not a NeMo 2 recipe (no trainer() and pretrain_recipe() functions)")
    r = Reading("nemo2", "megatron", source=source)
    preset = _model(funcs.get("model"), r)
    recipe = _defaults(funcs["pretrain_recipe"])
    args = {**_defaults(funcs["trainer"]), **_passed(funcs["pretrain_recipe"], "trainer", recipe)}
    flags: dict[str, str] = {}
    _strategy(funcs["trainer"], args, flags, r)
    _gpus(args, _defaults(funcs["trainer"]), flags, r)
    for key, value in _keywords(funcs["pretrain_recipe"], "MockDataModule", recipe).items():
        if key in DATA and isinstance(value, int):
            flags[DATA[key]] = str(value)
        else:
            r.no_effect(f"data.{key}", value, "data loading: no bytes, no time")
    for key, value in _keywords(funcs["trainer"], "Trainer", args).items():
        if key not in ("devices", "num_nodes", "plugins", "strategy"):
            r.no_effect(f"Trainer.{key}", value, "run length, logging, validation and callbacks: no bytes, no time")
    for precision in ("bf16", "fp16"):
        if f"{precision}_mixed" in ast.unparse(funcs["trainer"]):
            flags[precision] = "true"
            break
    if "distributed_fused_adam" in ast.unparse(funcs["pretrain_recipe"]):
        flags["use-distributed-optimizer"] = "true"  # recipes/optim/adam.py sets use_distributed_optimizer=True
    for key in ("dir", "name", "fn"):
        if key in recipe:
            r.no_effect(f"pretrain_recipe({key})", recipe[key], "where and how the run is launched")
    if recipe.get("performance_mode"):
        r.unsupported("performance_mode", True, "pretrain_performance_optimizations (TP overlap and callbacks) is "
                      "not read; give --fix tp_overlap=on")
    else:
        r.no_effect("performance_mode", recipe.get("performance_mode", False), "off: the plain recipe")
    megatron_args.apply(flags, r, preset)
    spelled = {f"--{flag}": f"MegatronStrategy.{key}" for key, flag in STRATEGY.items()}
    spelled |= {f"--{flag}": f"data.{key}" for key, flag in DATA.items()}
    spelled |= {f"--{flag}": f"ddp.{key}" for key, flag in DDP.items()}
    spelled |= {"--bf16": "plugins (bf16_mixed)", "--fp16": "plugins (fp16_mixed)",
                "--use-distributed-optimizer": "optim (distributed_fused_adam_with_cosine_annealing)"}
    r.entries = [replace(e, name=spelled.get(e.name, e.name)) for e in r.entries]
    return r


def _model(func: ast.FunctionDef | None, r: Reading) -> presets.ModelConfig:
    names = [n.id for n in ast.walk(func) if isinstance(n, ast.Name)] if func else []
    known = [n for n in names if n in CLASSES]
    if not known:
        shown = next((n for n in names if "Config" in n), "none")
        raise InputError(f"model(): the model class {shown[:60]!r} is not one the checker maps to a preset "
                         f"({', '.join(sorted(CLASSES))}); give its Megatron-LM flags instead")
    key = CLASSES[known[0]]
    r.read("model()", known[0], {"model": key}, f"model = {key}: NeMo's {known[0]} is this preset's architecture")
    return presets.model(key)


def _literal(node: ast.AST | None) -> object:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return ast.unparse(node)[:60]  # an expression (torch.bfloat16, a call): kept as its text


def _defaults(func: ast.FunctionDef) -> dict[str, object]:
    """A function's parameters with their default values (literals, else their source text)."""
    a = func.args
    plain = a.posonlyargs + a.args
    out = {p.arg: _literal(d) for p, d in zip(plain[len(plain) - len(a.defaults):], a.defaults, strict=True)}
    out |= {p.arg: _literal(d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None}
    return out


def _passed(func: ast.FunctionDef, callee: str, scope: dict[str, object]) -> dict[str, object]:
    """The keywords `func` passes to `callee(...)`, names resolved in `scope` (the function's own defaults)."""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == callee:
            return {k.arg: scope.get(k.value.id) if isinstance(k.value, ast.Name) else _literal(k.value)
                    for k in node.keywords if k.arg}
    return {}


def _keywords(func: ast.FunctionDef, target: str, scope: dict[str, object]) -> dict[str, object]:
    """The keywords of the first run.Config(<target>, ...) in `func`."""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and node.args and ast.unparse(node.args[0]).split(".")[-1] == target:
            return {k.arg: scope.get(k.value.id, ast.unparse(k.value)) if isinstance(k.value, ast.Name)
                    else _literal(k.value) for k in node.keywords if k.arg}
    return {}


def _strategy(trainer: ast.FunctionDef, args: dict[str, object], flags: dict[str, str], r: Reading) -> None:
    """MegatronStrategy's keywords, each resolved through trainer()'s arguments, as Megatron-LM flags."""
    strategy = _keywords(trainer, "MegatronStrategy", args)
    for key, value in _keywords(trainer, "DistributedDataParallelConfig", args).items():
        if key in DDP and value is True:
            flags[DDP[key]] = "true"
        elif key == "data_parallel_sharding_strategy" and strategy.get("fsdp") == "megatron":
            flags |= {"use-megatron-fsdp": "true", "data-parallel-sharding-strategy": str(value)}
        elif key == "data_parallel_sharding_strategy":
            r.no_effect(f"ddp.{key}", value, f"Megatron-FSDP's strategy; the recipe's fsdp is {strategy.get('fsdp')}")
        else:
            r.no_effect(f"ddp.{key}", value, "NaN checks, averaging and the reduce dtype (the accounting's fp32 "
                        "gradient buffer already)" if key not in DDP else "off")
    for key, value in strategy.items():
        if key == "ddp":
            continue  # its keywords, above
        if key == "fsdp" and value not in (None, "megatron"):
            r.unsupported("MegatronStrategy.fsdp", value, "NeMo's PyTorch FSDP2 path (work in progress there) is not "
                          "read; counted as the distributed optimizer")
        elif key not in STRATEGY:
            r.no_effect(f"MegatronStrategy.{key}", value, "checkpointing, precision of the pipeline's sends, "
                        "gradient-buffer views, FSDP unset: no bytes or time the planner counts apart")
        elif value is None or value is False:
            r.no_effect(f"MegatronStrategy.{key}", value, "unset: Megatron-LM's default")
        elif value is True:
            flags[STRATEGY[key]] = "true"
        elif isinstance(value, int) and not isinstance(value, bool):
            flags[STRATEGY[key]] = str(value)
        else:
            r.unsupported(f"MegatronStrategy.{key}", value, "not a number the recipe states")


def _gpus(args: dict[str, object], trainer: dict[str, object], flags: dict[str, str], r: Reading) -> None:
    """num_nodes x num_gpus_per_node as pretrain_recipe passes them; where that is fewer GPUs than the layout needs
    (the 70B recipe's 1 x 8 under t x p x cp = 32), trainer()'s own default num_nodes, and say so."""
    nodes, per_node = args.get("num_nodes"), args.get("num_gpus_per_node")
    if not (isinstance(nodes, int) and isinstance(per_node, int)):
        return
    need = 1
    for flag in ("tensor-model-parallel-size", "pipeline-model-parallel-size", "context-parallel-size"):
        need *= int(flags.get(flag, "1"))
    if nodes * per_node < need and isinstance(trainer.get("num_nodes"), int):
        r.assume("gpus", trainer["num_nodes"] * per_node,
                 f"pretrain_recipe's {nodes} x {per_node} GPUs are fewer than t x p x cp = {need}; trainer()'s "
                 f"default num_nodes = {trainer['num_nodes']} (pass num_nodes to the recipe, or give --gpus)")
        return
    r.read("num_nodes x num_gpus_per_node", f"{nodes} x {per_node}", {"gpus": nodes * per_node})
