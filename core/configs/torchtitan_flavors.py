"""torchtitan's model flavors as planner architectures (pytorch/torchtitan at 238fa995, the last commit with TOML
train configs: torchtitan/models/llama3/__init__.py llama3_args, models/deepseek_v3/__init__.py deepseekv3_args,
models/qwen3/__init__.py qwen3_args; tests/data/configs/SOURCES.md has the tables; and at 2026-08 (after the
Python config registry, 9810191b) llama3_configs' 1B and 3B and qwen3_configs' dense and MoE sizes, the
published Llama 3.2 and Qwen3 shapes)."""

from __future__ import annotations

import math

from core.errors import InputError

SOURCE = "pytorch/torchtitan torchtitan/models/{name}/__init__.py (238fa995; 2026 registry sizes)"


def _llama_ffn(dim: int, multiplier: float, multiple_of: int) -> int:
    """torchtitan FeedForward: 4 dim, two thirds of it, times the multiplier, rounded up to multiple_of."""
    hidden = int(multiplier * int(2 * 4 * dim / 3))
    return multiple_of * math.ceil(hidden / multiple_of)


def _llama(dim: int, layers: int, heads: int, kv: int, mult: float, multiple_of: int, vocab: int = 128256) -> dict:
    return {"layers": layers, "hidden": dim, "heads": heads, "kv_heads": kv, "ffn": _llama_ffn(dim, mult, multiple_of),
            "vocab": vocab, "mlp": "swiglu", "tied": False}


def _deepseek(*shape: int) -> dict:
    """vocab, dim, inter_dim, moe_inter_dim, n_layers, n_dense_layers, n_heads, experts, shared, top_k, q_lora_rank."""
    vocab, dim, inter, moe_inter, layers, dense, heads, experts, shared, top_k, q_lora = shape
    return {"layers": layers, "hidden": dim, "heads": heads, "kv_heads": heads, "ffn": inter, "vocab": vocab,
            "mlp": "swiglu", "tied": False, "experts": experts, "top_k": top_k, "shared_experts": shared,
            "expert_ffn": moe_inter, "dense_layers": dense, "kv_lora_rank": 512, "q_lora_rank": q_lora,
            "qk_head_dim": 128, "qk_rope_dim": 64, "v_head_dim": 128}


def _qwen3(dim: int, layers: int, heads: int, kv: int, ffn: int, tied: bool = False, experts: tuple = ()) -> dict:
    """Head size 128 and q/k RMSNorm in every size; an MoE size's layers are all MoE (experts, top-k, width)."""
    out = {"layers": layers, "hidden": dim, "heads": heads, "kv_heads": kv, "head_dim": 128, "ffn": ffn,
           "vocab": 151936, "mlp": "swiglu", "tied": tied, "qk_norm": True}
    if experts:
        out |= {"experts": experts[0], "top_k": experts[1], "shared_experts": 0, "expert_ffn": experts[2],
                "dense_layers": 0}
    return out


FLAVORS = {
    ("llama3", "debugmodel"): {"layers": 6, "hidden": 256, "heads": 16, "kv_heads": 16,
                               "ffn": _llama_ffn(256, 1.0, 256), "vocab": 2048, "mlp": "swiglu", "tied": False},
    ("llama3", "8B"): _llama(4096, 32, 32, 8, 1.3, 1024),
    ("llama3", "70B"): _llama(8192, 80, 64, 8, 1.3, 4096),
    ("llama3", "405B"): _llama(16384, 126, 128, 8, 1.2, 4096),
    ("deepseek_v3", "16B"): _deepseek(102400, 2048, 10944, 1408, 27, 1, 16, 64, 2, 6, 0),
    ("deepseek_v3", "236B"): _deepseek(102400, 5120, 12288, 1536, 60, 1, 128, 160, 2, 6, 1536),
    ("deepseek_v3", "671B"): _deepseek(129280, 7168, 18432, 2048, 61, 3, 128, 256, 1, 8, 1536),
    ("llama3", "1B"): {**_llama(2048, 16, 32, 8, 1.5, 1024), "tied": True},
    ("llama3", "3B"): {**_llama(3072, 28, 24, 8, 1.0, 1024), "tied": True},
    ("qwen3", "debugmodel"): {**_qwen3(256, 8, 16, 8, 3072, tied=True), "vocab": 2048},
    ("qwen3", "debugmodel_moe"): {**_qwen3(256, 8, 16, 8, 3072, experts=(64, 8, 768)), "vocab": 2048},
    ("deepseek_v3", "debugmodel"): {**_deepseek(2048, 256, 1024, 256, 6, 1, 16, 8, 2, 3, 0)},
    ("qwen3", "0.6B"): _qwen3(1024, 28, 16, 8, 3072, tied=True),
    ("qwen3", "1.7B"): _qwen3(2048, 28, 16, 8, 6144, tied=True),
    ("qwen3", "4B"): _qwen3(2560, 36, 32, 8, 9728, tied=True),
    ("qwen3", "8B"): _qwen3(4096, 36, 32, 8, 12288),
    ("qwen3", "14B"): _qwen3(5120, 40, 40, 8, 17408),
    ("qwen3", "32B"): _qwen3(5120, 64, 64, 8, 25600),
    ("qwen3", "30B-A3B"): _qwen3(2048, 48, 32, 4, 6144, experts=(128, 8, 768)),
    ("qwen3", "235B-A22B"): _qwen3(4096, 94, 64, 4, 12288, experts=(128, 8, 1536)),
}
for _alias in ("8B_flex", "8B_varlen"):
    FLAVORS[("llama3", _alias)] = FLAVORS[("llama3", "8B")]
FLAVORS[("qwen3", "debugmodel_non_fused_qkv")] = FLAVORS[("qwen3", "debugmodel")]


def flavor(name: str, size: str) -> tuple[dict, str]:
    """(architecture as planner inputs, its source) of a torchtitan model name and flavor."""
    key = (name, size)
    if key not in FLAVORS:
        known = ", ".join(f"{n} {s}" for n, s in FLAVORS)
        raise InputError(f"model: torchtitan's {name[:30]} {size[:30]} is not a flavor the importer knows ({known}); "
                         "give the architecture with --model or a Hugging Face config.json")
    return dict(FLAVORS[key]), SOURCE.format(name=name)
