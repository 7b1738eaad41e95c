"""Inputs that describe a custom model, a custom cluster and a training run (planner page, `python -m core plan`).

The bounds are generous on purpose (a 1,024-layer, 131,072-wide model on 65,536 GPUs is allowed) but finite,
so every value that reaches core is a real number of sane size. `core.model` validates its data files and
every custom ModelConfig / GpuSpec against these same specs: the ranges live here and nowhere else.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from core.errors import InputError
from core.params import Spec, catalog, table

MLP_KINDS = ("gelu", "swiglu")

# `eff` (and `mem_eff`) = 0 means "the GPU's calibrated value" (assets/efficiency.json, fitted by
# scripts/fit_efficiency.py); a number overrides it. Before the per-operation time model, `eff` was one achievable
# fraction of peak for all compute (default 0.6); an old URL's eff=0.6 now sets the large-GEMM fraction to 0.6.
CALIBRATED = 0.0

# Largest accepted head size: published models use 64 to 256 (Gemma 2: 256); attention kernels (FlashAttention-2,
# cuDNN) support at most 256, so 1,024 leaves room without admitting nonsense.
MAX_HEAD_DIM = 1024

MODEL = table(
    Spec("layers", "int", 96, 1, 1024, label="Layers L", help="Transformer blocks."),
    Spec("hidden", "int", 12288, 1, 131072, label="Hidden size h",
         help="Model width; must divide by heads unless the head size is given."),
    Spec("heads", "int", 96, 1, 4096, label="Attention heads a",
         help="Query heads; the head size is hidden / heads unless given."),
    Spec("kv_heads", "int", 96, 1, 4096, label="Key/value heads",
         help="Grouped-query attention: heads must be a multiple of it (equal to heads = plain multi-head)."),
    Spec("head_dim", "int", 0, 0, MAX_HEAD_DIM, label="Head size d",
         help="Channels per attention head (Megatron-LM --kv-channels, Hugging Face head_dim); 0 = hidden / heads. "
              "Q is h x (heads d), K and V h x (kv_heads d), the output projection (heads d) x h; heads x d may differ "
              "from h (Qwen3, Gemma). Even with rotary positions (channels rotate in pairs)."),
    Spec("ffn", "int", 49152, 1, 1 << 20, label="FFN size",
         help="Inner MLP width (4 h for GPT-style GELU MLPs; about 8h/3 to 3.5 h for SwiGLU)."),
    Spec("vocab", "int", 50257, 1, 1 << 22, label="Vocabulary V", help="Embedding rows (padded size if known)."),
    Spec("seq", "int", 2048, 1, 1 << 20, label="Sequence length s", unit="tokens", help="Tokens per sample."),
    Spec("params", "float", 0.0, 0.0, 1e14, label="Parameter count", unit="parameters",
         help="0 = derive from the architecture; otherwise the count you want the memory model to use."),
    Spec("mlp", "choice", "gelu", choices=MLP_KINDS, label="MLP kind",
         help="gelu: two matrices h x ffn; swiglu: three (gate, up, down)."),
    Spec("tied", "bool", True, label="Tied embeddings",
         help="Input embedding and output projection share one V x h matrix."),
    Spec("experts", "int", 0, 0, 4096, label="Routed experts E",
         help="Mixture-of-experts: routed expert MLPs per MoE layer (0 = a dense model)."),
    Spec("top_k", "int", 2, 1, 4096, label="Experts per token k",
         help="Routed experts each token visits (Megatron --moe-router-topk); at most E."),
    Spec("shared_experts", "int", 0, 0, 64, label="Shared experts",
         help="Always-active experts of the expert width in every MoE layer (DeepSeekMoE); replicated like dense "
              "weights, not spread over the expert-parallel group."),
    Spec("expert_ffn", "int", 0, 0, 1 << 20, label="Expert FFN size",
         help="Inner width of each expert (0 = the FFN size above; fine-grained experts are narrower)."),
    Spec("dense_layers", "int", 0, 0, 1024, label="Leading dense layers",
         help="The first layers keep a dense MLP (DeepSeek-V3: 3); every later layer is MoE."),
    Spec("kv_lora_rank", "int", 0, 0, 1 << 16, label="MLA key/value latent rank",
         help="Multi-head latent attention (DeepSeek-V2/V3, Kimi K2; Megatron-LM --multi-latent-attention "
              "--kv-lora-rank, Hugging Face kv_lora_rank): keys and values pass through a latent of this width "
              "(DeepSeek-V3: 512). 0 = plain attention; the four MLA fields below apply only when this is set."),
    Spec("q_lora_rank", "int", 0, 0, 1 << 16, label="MLA query latent rank",
         help="MLA's query latent (DeepSeek-V3: 1536; Megatron-LM --q-lora-rank); 0 = queries projected directly "
              "from the hidden state (DeepSeek-V2-Lite, Moonlight)."),
    Spec("qk_head_dim", "int", 128, 1, 1 << 12, label="MLA query/key head dim",
         help="MLA's per-head query/key channels without rotary positions (Megatron-LM --qk-head-dim, Hugging "
              "Face qk_nope_head_dim; DeepSeek-V3: 128)."),
    Spec("qk_rope_dim", "int", 64, 0, 1 << 12, label="MLA rotary head dim",
         help="MLA's per-head rotary channels, shared by the heads on the key side (Megatron-LM "
              "--qk-pos-emb-head-dim, Hugging Face qk_rope_head_dim; DeepSeek-V3: 64)."),
    Spec("v_head_dim", "int", 128, 1, 1 << 12, label="MLA value head dim",
         help="MLA's per-head value channels (Megatron-LM --v-head-dim; DeepSeek-V3: 128)."),
    Spec("mtp_layers", "int", 0, 0, 8, label="Multi-token prediction layers",
         help="Extra prediction depths after the last layer (DeepSeek-V3: 1, arXiv:2412.19437 section 2.2; Megatron-LM "
              "--mtp-num-layers): each is one more transformer layer of the model's kind with a 2h x h projection, "
              "sharing the embedding and output layer, and runs on the last pipeline stage. Its parameters are "
              "not in the model's published count."),
    Spec("flash", "bool", False, label="Flash attention",
         help="Fused attention kernel: no s x s scores in memory or traffic (changes step time and activations)."),
    Spec("parallel", "bool", False, label="Parallel attention + MLP",
         help="GPT-J / GPT-NeoX / PaLM blocks: attention and MLP read the same normed input and add to one residual "
              "branch (one norm per layer); with tensor parallelism one all-reduce per block forward, not two."),
    Spec("window", "int", 0, 0, 1 << 20, label="Sliding attention window", unit="tokens",
         help="Sliding-window attention: each query attends to the last `window` keys only in the windowed layers "
              "(GPT-OSS: 128 in every other layer; Gemma 2: 4,096 in every other; Gemma 3: 1,024 in five of six; "
              "Mistral 7B v0.1: 4,096 in all; Hugging Face sliding_window, Megatron-LM --window-size). A fused "
              "kernel skips the keys outside the window (less attention time and FLOPs); an eager attention still "
              "computes and stores the whole s x s scores and masks them. 0 = full causal attention everywhere."),
    Spec("window_share", "float", 1.0, 0.0, 1.0, label="Share of layers windowed",
         help="The share of the layers that use the sliding window when `window` is set (GPT-OSS and Gemma 2: 0.5; "
              "Gemma 3: 5/6; Hugging Face layer_types, Megatron-LM --window-attn-skip-freq N = 1 - 1/N); the rest "
              "attend to every earlier token."),
    Spec("qk_norm", "bool", False, label="QK norm",
         help="q and k normalised per head before rotary positions (Qwen3, OLMo 2, Gemma 3; Megatron-LM "
              "--qk-layernorm, Hugging Face q_norm / k_norm): the norms' inputs and statistics are kept for the "
              "backward (activations), 2 x head size weights per layer."),
)

# A custom model's heads default to hidden / HEAD_SIZE (the head size of GPT-3, Llama and most published models),
# so changing the width alone keeps a valid model; 0 asks for that default, and key/value heads 0 means "= heads".
HEAD_SIZE = 128
AUTO_HEADS = table(
    replace(MODEL["heads"], default=0, lo=0,
            help=f"Query heads; 0 = hidden / the head size ({HEAD_SIZE} unless given). The head size is hidden / heads "
                 "unless given."),
    replace(MODEL["kv_heads"], default=0, lo=0,
            help="Grouped-query attention: heads must be a multiple of it; 0 = as many as the query heads."),
)


def resolve_heads(hidden: int, heads: int, kv_heads: int, head_dim: int = 0) -> tuple[int, int]:
    """(heads, kv_heads) with 0 replaced by its default (hidden / the head size, HEAD_SIZE unless head_dim is
    given); InputError saying what to give when none exists."""
    if not heads:
        size = head_dim or HEAD_SIZE
        if hidden % size:
            raise InputError(f"heads: hidden {hidden} is not a multiple of the head size {size}, so the heads cannot "
                             f"be derived; give the number of attention heads")
        heads = hidden // size
    return heads, kv_heads or heads


CLUSTER = table(
    Spec("gpus", "int", 1024, 1, 65536, label="GPUs G", help="Total GPUs; the planner factors G = t x p x d."),
    Spec("gpn", "int", 8, 1, 128, label="GPUs per server",
         help="GPUs joined by the fast intra-server link (NVLink / Infinity Fabric)."),
    Spec("gpu_mem", "float", 80.0, 1.0, 2048.0, label="GPU memory", unit="GB (1e9 bytes)",
         help="Memory per GPU available to training."),
    Spec("gpu_tflops", "float", 989.0, 1.0, 100000.0, label="Dense 16-bit peak", unit="TFLOP/s",
         help="Dense (not sparse) BF16/FP16 tensor throughput per GPU, from the datasheet."),
    Spec("intra_bw", "float", 450.0, 0.1, 100000.0, label="Intra-server bandwidth", unit="GB/s per direction",
         help="Per-GPU, one direction (NVLink 900 GB/s bidirectional = 450)."),
    Spec("inter_bw", "float", 50.0, 0.01, 100000.0, label="Inter-server bandwidth", unit="GB/s per direction",
         help="Per-GPU network share, one direction (400 Gb/s InfiniBand NDR = 50)."),
    Spec("gpu_bw", "float", 3350.0, 1.0, 100000.0, label="Memory bandwidth", unit="GB/s",
         help="HBM bandwidth per GPU from the datasheet (H100 SXM 3,350; A100 80GB 2,039): memory-bound operations "
              "(norms, activations, softmax, the optimizer step) run at it."),
    Spec("gpu_sms", "int", 132, 1, 1024, label="Streaming multiprocessors",
         help="SMs (NVIDIA) or compute units (AMD) per GPU: a GEMM runs its output tiles in waves of this many."),
    Spec("eff", "float", CALIBRATED, 0.0, 1.0, label="Large-GEMM fraction of peak",
         help="Share of dense peak a large matrix multiplication sustains; smaller ones get less (wave "
              "quantisation, short inner dimension). 0 = the GPU's calibrated value."),
    Spec("mem_eff", "float", CALIBRATED, 0.0, 1.0, label="Achieved fraction of memory bandwidth",
         help="Share of the HBM bandwidth memory-bound kernels sustain. 0 = the GPU's calibrated value."),
    Spec("batch", "int", 1536, 1, 1 << 22, label="Global batch", unit="sequences",
         help="Sequences per optimizer step across all data-parallel replicas."),
    Spec("mbs", "int", 1, 1, 1024, label="Micro-batch size b", unit="sequences",
         help="Sequences per micro-batch on one pipeline replica."),
)


@lru_cache(maxsize=1)
def preset_choices() -> dict[str, Spec]:
    """The planner's `model` and `gpu` URL keys: a preset name or `custom` (built lazily: the catalog reads files)."""
    return table(
        Spec("model", "choice", "gpt3-175b", choices=(*catalog.model_keys(), "custom"), label="Model",
             help="A published model, or custom to enter the architecture."),
        Spec("gpu", "choice", "h100-80gb", choices=(*catalog.gpu_keys(), "custom"), label="GPU",
             help="A datasheet GPU, or custom to enter memory, FLOP/s and bandwidths."),
    )
