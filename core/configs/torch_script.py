"""The planner's own PyTorch script (core.planner.export_torch), read back from its constants as a syntax tree:
nothing in it runs. Its "model" and "layout" constants are the row it was exported from."""

from __future__ import annotations

import ast

from core.configs.account import Reading, python_tree
from core.configs.model import settle
from core.errors import InputError

MODEL = {"LAYERS": "layers", "HIDDEN": "hidden", "HEADS": "heads", "KV_HEADS": "kv_heads", "FFN": "ffn",
         "VOCAB": "vocab"}
LAYOUT = {"T": "fix_t", "P": "fix_p", "D": "fix_d", "CP": "fix_cp", "REPLICATE": "fix_replicate", "ZERO": "zero",
          "RECOMPUTE_LAYERS": "recompute_layers",
          "RECOMPUTE": "recompute", "OFFLOAD": "offload", "SCHEDULE": "schedule", "V": "v",
          "MICRO_BATCH": "mb_sizes", "SEQ": "seq"}
NO_EFFECT = ("ROPE_THETA", "RMSNORM", "BIAS", "EMBED_NORM", "POSITION", "LR", "TP_RANK", "ANGLE")


def constants(text: str, source: str) -> dict[str, object]:
    """Top-level NAME = literal (and NAME, NAME = literal, literal) assignments; torch.bfloat16 as its name."""
    tree = python_tree(text, source)
    out: dict[str, object] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        pairs = list(zip(target.elts, value.elts, strict=False)) if isinstance(target, ast.Tuple) and \
            isinstance(value, ast.Tuple) else [(target, value)]
        for name, val in pairs:
            if isinstance(name, ast.Name):
                if isinstance(val, ast.Attribute):
                    out[name.id] = val.attr
                else:
                    try:
                        out[name.id] = ast.literal_eval(val)
                    except (ValueError, SyntaxError):
                        pass
    return out


def read(text: str, source: str = "train_torch.py") -> Reading:
    c = constants(text, source)
    if not all(k in c for k in ("LAYERS", "HIDDEN", "T", "P", "D")):
        raise InputError(f"{source}: not the planner's PyTorch script (no LAYERS, HIDDEN, T, P, D constants)")
    r = Reading("torch-script", "torch", source=source)
    arch: dict[str, object] = {}
    for name, key in MODEL.items():
        arch[key] = int(c.pop(name))
        r.read(name, arch[key], {}, f"{key} = {arch[key]}")
    head_dim = c.pop("HEAD_DIM", 0)
    if head_dim and head_dim != arch["hidden"] // arch["heads"]:
        arch["head_dim"] = head_dim
    r.read("HEAD_DIM", head_dim, {}, f"head size {head_dim}")
    arch["mlp"] = "swiglu" if c.pop("SWIGLU", False) else "gelu"
    arch["tied"] = bool(c.pop("TIED", True))
    r.read("SWIGLU, TIED", f"{arch['mlp']}, {arch['tied']}", {}, f"mlp = {arch['mlp']}, tied = {arch['tied']}")
    for name, key in LAYOUT.items():
        if name in c:
            r.read(name, c[name], {key: c.pop(name)})
    micro, count, d = c.pop("MICROBATCHES", None), int(r.raw["mb_sizes"]), int(r.raw["fix_d"])
    if isinstance(micro, int):
        r.read("MICROBATCHES", micro, {"batch": count * micro * d}, f"batch = {count} x {micro} x d {d}")
    t, p, cp = (int(r.raw.get(k, 1)) for k in ("fix_t", "fix_p", "fix_cp"))
    r.raw["gpus"] = str(t * p * d * cp)
    for name, key in (("SEQUENCE_PARALLEL", "sp"), ("RESHARD", "reshard")):
        if name in c:
            r.read(name, c[name], {key: "on" if c.pop(name) else "off"})
    dtype = c.pop("DTYPE", "bfloat16")
    precision = "fp8" if c.pop("FP8", False) else "bf16" if dtype == "bfloat16" else "fp16"
    r.read("DTYPE / FP8", dtype, {"precision": precision})
    for name, value in c.items():
        if name in NO_EFFECT:
            r.no_effect(name, value, "the block's details (O(h) parameters) or the script's own state")
        else:
            r.unsupported(name, value, "not a constant the importer knows")
    r.raw["fix_ep"] = "1"
    settle(r, arch)
    return r
