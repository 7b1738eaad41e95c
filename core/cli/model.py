"""`python -m core model`: a model's architecture and its parameter counts, total and active.

    python -m core model --model deepseek-v3
    python -m core model --model mixtral-8x7b --json
    python -m core model --model llama3-405b --seq 131072
    python -m core model --model qwen3-30b-a3b
    python -m core model --layers 32 --hidden 4096 --heads 32 --kv-heads 8 --ffn 14336 --vocab 32000 --mlp swiglu \\
        --tied false --experts 8 --top-k 2

params_total is the count the memory model uses (the published one where the preset has it), params_active the
part one token passes through (top-k routed experts per MoE layer); the *_architecture counts come from the
shape alone (core.model.counts), so a reader can compare them with the published figures.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict

from core.cli import spec_args
from core.cli.plan import ARCH_FLAGS
from core.cli.text import print_json, render
from core.errors import InputError
from core.model import counts, presets
from core.model.config import ModelConfig
from core.params import parse_strict
from core.params.model import MODEL
from core.params.planner import PLAN


def build(parser: argparse.ArgumentParser) -> None:
    spec_args.add(parser, PLAN["model"], "--model")
    spec_args.add(parser, PLAN["seq"], "--seq")
    custom = parser.add_argument_group("custom architecture (instead of --model)")
    for key, flag in ARCH_FLAGS.items():
        spec_args.add(custom, PLAN[key], flag)
    custom.add_argument("--tied", choices=("true", "false"), default=None, help="Tied embeddings (default true).")
    spec_args.switch(parser, "--json", help="Print the architecture and counts as JSON.")


def model_from(args: argparse.Namespace) -> ModelConfig:
    raw = {k: getattr(args, k) for k in ARCH_FLAGS if getattr(args, k, None) is not None}
    if args.tied:
        raw["tied"] = args.tied
    seq = parse_strict({"seq": PLAN["seq"]}, {"seq": args.seq} if args.seq is not None else {})["seq"]
    if raw:
        if args.model not in (None, "custom"):
            raise InputError(f"give --model or a custom architecture ({', '.join(sorted(raw))}), not both")
        if "heads" in raw and "kv_heads" not in raw:
            raw["kv_heads"] = raw["heads"]
        if "hidden" in raw and "ffn" not in raw:
            raw["ffn"] = str(4 * MODEL["hidden"].parse(raw["hidden"]))
        return presets.chosen_model("custom", raw, seq)
    if args.model in (None, "custom"):
        raise InputError("give --model PRESET, or the custom architecture flags (--layers --hidden --heads ...)")
    return presets.chosen_model(PLAN["model"].parse(args.model), None, seq)


def describe(m: ModelConfig) -> dict:
    """Architecture and counts as plain data (what --json prints)."""
    parts = counts.breakdown(m)
    dense_layers = m.layers - m.moe_layers
    return {
        "key": m.key, "name": m.name, "layers": m.layers, "hidden": m.hidden, "heads": m.heads,
        "kv_heads": m.kv_heads, "head_dim": m.head_dim, "ffn": m.ffn, "vocab": m.vocab, "seq": m.seq, "mlp": m.mlp,
        "norm": m.norm,
        "tied": m.tied, "position": m.position,
        "moe": None if m.moe is None else {**asdict(m.moe), "moe_layers": m.moe_layers, "dense_layers": dense_layers},
        "mla": None if m.mla is None else asdict(m.mla),
        "params_total": m.params, "params_active": m.params_active,
        "params_expert": m.expert_params, "params_dense": m.dense_params,
        "params_architecture": parts["total"], "params_active_architecture": parts["active"],
        "params_published": m.params_published, "params_active_published": m.params_active_published,
        "breakdown": {k: parts[k] for k in ("embedding", "attention", "norms", "dense_mlp", "shared_experts",
                                            "router", "experts")},
        "source": m.source,
        "layouts": [{k: getattr(x, k) for k in ("label", "t", "p", "d", "cp", "ep", "gpus", "gpu", "seq")}
                    for x in m.layouts],
    }


def _b(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e9:,.2f}B"


def run(args: argparse.Namespace) -> int:
    m = model_from(args)
    info = describe(m)
    if args.json:
        print_json(info)
        return 0
    shape = (f"{m.name}: {m.layers} layers, hidden {m.hidden:,}, {m.heads} heads of {m.head_dim} "
             f"({m.kv_heads} key/value{'; heads x head size is not hidden' if m.decoupled_heads else ''}), "
             f"FFN {m.ffn:,} ({m.mlp}), vocabulary {m.vocab:,}, sequence {m.seq:,}, "
             f"{'tied' if m.tied else 'untied'} embeddings.")
    lines = [shape]
    if m.moe:
        moe = info["moe"]
        lines.append(f"Mixture of experts: {m.moe.experts} routed experts (top {m.moe.top_k} per token), "
                     f"{m.moe.shared} shared, expert FFN {m.moe.expert_ffn or m.ffn:,}; {moe['moe_layers']} MoE "
                     f"layers, {moe['dense_layers']} dense.")
    if m.mla:
        lines.append(f"Multi-head latent attention: q rank {m.mla.q_lora_rank}, kv rank {m.mla.kv_lora_rank}, "
                     f"head dims {m.mla.qk_head_dim} + {m.mla.qk_rope_dim} rope (query/key), {m.mla.v_head_dim} "
                     f"(value).")
    rows = [["params_total", _b(info["params_total"]), _b(info["params_architecture"]), _b(m.params_published)],
            ["params_active", _b(info["params_active"]), _b(info["params_active_architecture"]),
             _b(m.params_active_published)],
            ["params_expert (routed)", _b(info["params_expert"]), _b(info["breakdown"]["experts"]), "-"],
            ["params_dense (the rest)", _b(info["params_dense"]), _b(info["params_architecture"]
                                                                     - info["breakdown"]["experts"]), "-"]]
    lines += ["", render(["count", "in use", "architecture", "published"], rows), ""]
    lines.append("By part (architecture): " + ", ".join(f"{k} {_b(v)}" for k, v in info["breakdown"].items() if v))
    lines.append("B = 1e9 parameters. 'In use' = the published total where given, split as the architecture splits.")
    print("\n".join(lines))
    return 0
