"""A chosen Layout as configs to paste: a DeepSpeed config, a Megatron-LM command line and a runnable PyTorch
(FSDP2 / pipelining) script.

Each export reproduces its layout exactly (t, p, d, schedule and v, micro-batch, recompute, ZeRO stage, offload) or
refuses with the reasons core.planner.frameworks gives; nothing falls back to another layout. Only option names a
tool has are emitted (assets/tool_options.json with sources; assets/megatron_flags.json for every Megatron-LM flag).
"""

from __future__ import annotations

from core.planner.export_base import Export, confirmed, flatten_keys, launch, megatron_parser_flags
from core.planner.export_deepspeed import deepspeed_config, deepspeed_export, deepspeed_setup
from core.planner.export_megatron import megatron_args, megatron_export
from core.planner.export_torch import torch_export
from core.planner.layout import Layout

__all__ = ["Export", "confirmed", "deepspeed_config", "deepspeed_export", "deepspeed_setup", "export_all",
           "flatten_keys", "fsdp2_export", "launch", "megatron_args", "megatron_export", "megatron_parser_flags",
           "torch_export"]

KINDS = {"deepspeed": "deepspeed", "megatron": "megatron", "fsdp2": "torch"}  # export -> framework it runs on
fsdp2_export = torch_export  # the name the page and the CLI have used


def export_all(layout: Layout) -> dict[str, Export]:
    return {"deepspeed": deepspeed_export(layout), "megatron": megatron_export(layout), "fsdp2": torch_export(layout)}
