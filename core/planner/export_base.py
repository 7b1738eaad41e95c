"""What every export shares: the artefact type, the confirmed option names, the torchrun launch, and the refusal
of a layout the target framework cannot run (core.planner.frameworks says which, and why)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from core.params.catalog import ASSETS
from core.planner import frameworks
from core.planner.layout import Layout

PORT = 29500


@dataclass(frozen=True)
class Export:
    """An artefact to copy (JSON, shell or Python text) and what it does not cover.

    `setup` holds the few lines of code a JSON config cannot carry (DeepSpeed takes t and p from the model code);
    `refused` is non-empty, and `text` empty, when the framework cannot run the layout exactly.
    """

    text: str
    notes: tuple[str, ...]
    setup: str = ""
    refused: tuple[str, ...] = ()


@lru_cache(maxsize=1)
def confirmed() -> dict:
    """The confirmed option names per tool, with their sources (assets/tool_options.json)."""
    return json.loads((ASSETS / "tool_options.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def megatron_parser_flags() -> dict:
    """Every option of Megatron-LM's argument parser at the pinned release (assets/megatron_flags.json)."""
    return json.loads((ASSETS / "megatron_flags.json").read_text(encoding="utf-8"))


def flatten_keys(config: dict, prefix: str = "") -> list[str]:
    """Dotted paths of every key in a nested dict ('zero_optimization.offload_optimizer.device')."""
    out = []
    for key, value in config.items():
        path = f"{prefix}{key}"
        out.append(path)
        if isinstance(value, dict):
            out.extend(flatten_keys(value, path + "."))
    return out


def refusal(layout: Layout, key: str) -> Export | None:
    """An empty Export saying why framework `key` cannot run `layout` exactly, or None when it can."""
    reasons = framework_refusals(layout, key)
    if not reasons:
        return None
    f = frameworks.framework(key)
    runs = not _model_refusals(layout, key) and not f.refusals(_setting(layout), export=False)
    hint = (f"{f.label} runs this layout, but the planner's export for it does not write it: configure it in "
            "the framework's own trainer (the reasons name where)." if runs
            else f"Rank with framework {key} (--framework {key}) to list only layouts {f.label} runs.")
    return Export("", (hint,), refused=tuple(reasons))


def framework_refusals(layout: Layout, key: str) -> list[str]:
    return frameworks.framework(key).refusals(_setting(layout)) + _model_refusals(layout, key)


def _setting(layout: Layout) -> frameworks.Setting:
    return frameworks.Setting(layout.t, layout.p, layout.zero_stage, layout.schedule, layout.sequence_parallel,
                              layout.recompute, layout.offload, kv_heads=layout.model.kv_heads, cp=layout.cp,
                              ep=layout.ep, fp8=layout.precision == "fp8",
                              moe=layout.model.is_moe or layout.model.mla is not None, replicate=layout.replicate,
                              recompute_layers=layout.recompute_layers if layout.recompute == "full" else 0)


def _model_refusals(layout: Layout, key: str) -> list[str]:
    """What a framework's export cannot write for this particular model (beyond the capability table)."""
    if key == "torch" and layout.cp > 1 and layout.model.position == "alibi":
        return ["the exported script builds ALiBi biases for the whole sequence; under context parallelism each "
                "rank holds a shard of it (not generated)"]
    return []


def launch(layout: Layout) -> tuple[list[str], list[str]]:
    """torchrun arguments: one process per GPU, the same count on every node."""
    n, gpn = layout.n_gpus, layout.gpus_per_node
    notes = []
    if n <= gpn:
        return ["torchrun", "--standalone", "--nproc-per-node", str(n)], notes
    if n % gpn:
        notes.append(f"{n} GPUs is not a multiple of {gpn} per server; torchrun starts the same number of "
                     "processes on every node, so pick G as a multiple of the server size.")
    nodes = -(-n // gpn)
    return ["torchrun", "--nnodes", str(nodes), "--nproc-per-node", str(gpn), "--rdzv-id", "planner",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"$MASTER_ADDR:{PORT}"], notes
