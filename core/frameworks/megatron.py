"""Megatron-LM / Megatron-Core with Transformer Engine (NeMo and Megatron-Bridge run the same code): how it stores
model states, what its transformer layer keeps for the backward, its loss and its buffers.

Read at core_v0.14.0 (23e00ed0) and checked against core_v0.19.0 (5be96267), Transformer Engine v2.8 (40c69e75):
- model states (docs/source/api-guide/dist_optimizer.md): bf16 parameters (2 bytes), the DDP gradient buffer in
  fp32 under bf16 (4: arguments.py validate_args sets accumulate_allreduce_grads_in_fp32 unless
  --grad-reduce-in-bf16; param_and_grad_buffer.py allocates it whole on every rank), fp32 master weights and Adam's
  moments (12); the distributed optimizer shards the last over the data-parallel x context-parallel group:
  6 + 12 / d bytes per parameter ("bf16 params, fp32 grads: 18 / 6 + 12/d"). Megatron-FSDP's optim_grads and
  optim_grads_params shard the gradients, then the parameters too.
- the layer (transformer_layer.py, attention.py, mlp.py with TE's LayerNormLinear, Linear and fused attention):
  TE's LayerNormLinear keeps the norm's input, its output (the GEMM input; the local sequence shard under sequence
  parallelism) and fp32 statistics (mu and rsigma for LayerNorm, rsigma for RMSNorm); get_qkv_layout makes q, k,
  v contiguous (the split views of the fused QKV output are not a supported layout), and FusedAttnFunc keeps q, k,
  v, its output and the fp32 softmax statistics [b, heads, s, 1]; the projection keeps that same output as its
  input; bias_swiglu_impl keeps the fc1 output [gate, up] and fc2 its input, bias_gelu_impl its input; hidden
  dropout (bias_dropout_add) keeps a one-byte mask only when p > 0 (F.dropout returns its input at p = 0).
  With --attention-backend unfused the core attention runs in PyTorch: K and V repeated to every query head, the
  s x s softmax output, its dropout mask and output.
  With --qk-layernorm (attention.py get_query_key_value_tensors: q_layernorm and k_layernorm, TENorm over the head
  size) each norm keeps its input made contiguous and its fp32 statistics per head (Transformer Engine
  ops/basic/layer_norm.py and rmsnorm.py op_forward: ctx.save_for_backward(x, means, rstdevs) with
  x = input_.contiguous()); the normed q and k pass the fused RoPE, which keeps only its frequencies.
- selective recompute (--recompute-granularity selective, --recompute-modules, default ["core_attn"]): each listed
  module's tensors are rebuilt in the backward (core_attn: the s x s matrices, the statistics; the others: _sel's
  callers); full recompute (--recompute-granularity full) keeps each layer's input only.
- loss (tensor_parallel/cross_entropy.py): the bf16 logits are cast to fp32 (calculate_logits_max:
  vocab_parallel_logits.float()) while the caller still holds them, the fp32 copy becomes the softmax in place and
  is kept for the backward, which writes the gradient into it and casts it to bf16: 4 bytes per logit held, 6 at
  the peak. --cross-entropy-loss-fusion ('native', core/fusions/fused_cross_entropy.py) does the same math in
  compiled pieces that keep the fp32 copy and the softmax apart: 10 at the peak (core.frameworks KERNELS).
- buffers: TE's cuBLAS workspace (module/base.py get_cublas_workspace_size_bytes: 32 MiB + 1 KiB on sm90, 4 MiB
  before) and PyTorch's per (handle, stream) cuBLAS workspace (CublasHandlePool.cpp: 32 MiB on sm90, 8 MiB + 128
  KiB before), both inside the caching allocator; with --tp-comm-overlap three more TE workspaces for the
  userbuffers' GEMM streams, with --moe-grouped-gemm four more, one per compute stream (cpp_extensions/gemm.py
  get_cublas_workspace).
"""

from __future__ import annotations

from core.frameworks.capability import Framework
from core.frameworks.records import (
    FULL_ONLY,
    NONE_ONLY,
    NOT_FULL,
    Accounting,
    Arch,
    Buffers,
    Kept,
    Loss,
    StateBytes,
)

READ_AT = "core_v0.14.0"  # the release the memory accounting here was read at (RELEASE, below: what it runs)
MIB = float(1 << 20)

STATES = StateBytes(
    param=2.0, grad=4.0, master=4.0,
    sharded_from=(("params", 3), ("grads", 2), ("optimizer", 1)),
    source=f"Megatron-LM {READ_AT} docs/source/api-guide/dist_optimizer.md: bf16 params + fp32 grads, 18 bytes per "
           "parameter, 6 + 12/d with --use-distributed-optimizer (ZeRO-1 here); Megatron-FSDP "
           "--data-parallel-sharding-strategy optim_grads (ZeRO-2) and optim_grads_params (ZeRO-3); under --fp16 the "
           "buffer keeps the parameters' dtype: arguments.py forces accumulate_allreduce_grads_in_fp32 only for bf16",
    grad_fp16=2.0)

LOSS = Loss(held=4.0, peak=6.0,
            source=f"Megatron-LM {READ_AT} megatron/core/tensor_parallel/cross_entropy.py: "
                   "vocab_parallel_logits.float(), in-place softmax kept by ctx.save_for_backward(exp_logits, ...)")

TE_WORKSPACE = 32 * MIB + 1024  # one Transformer Engine cuBLAS workspace on compute capability 9
BUFFERS = Buffers(
    workspace=TE_WORKSPACE + 2 * 32 * MIB, tp_overlap_workspace=3 * TE_WORKSPACE, grouped_workspace=4 * TE_WORKSPACE,
    sources=("Transformer Engine v2.8 pytorch/module/base.py get_cublas_workspace_size_bytes: 32 MiB + 1024 B on "
             "compute capability 9 (one shared workspace)",
             "Transformer Engine pytorch/cpp_extensions/gemm.py get_cublas_workspace (lru_cache, torch.empty): a GEMM "
             "with userbuffers (--tp-comm-overlap) takes one of _NUM_MAX_UB_STREAMS = 3 workspaces in one tensor, "
             "a grouped GEMM (--moe-grouped-gemm, TEGroupedMLP) one per compute stream, "
             "nvte_get_num_compute_streams() = 4 (common/util/multi_stream.cpp)",
             "PyTorch aten/src/ATen/cuda/CublasHandlePool.cpp: 4096 * 8 * 1024 bytes per (handle, stream) on sm90, "
             "allocated by the caching allocator (the forward and the autograd thread each have one)"))


def block(a: Arch) -> tuple[Kept, ...]:
    """What one Megatron-Core layer keeps for its backward (the module docstring says where each is read)."""
    norm_stats = 8.0 if a.norm == "layernorm" else 4.0  # TE keeps mu and rsigma, or rsigma, in fp32
    gemm_in = 1.0 if a.fp8 else 2.0  # TE keeps a linear layer's input in FP8 under FP8 training
    whole_mlp = not a.moe and "mlp" in a.recompute_modules  # the dense MLP checkpointed: its input only
    kept = [
        Kept("layer input (LayerNormLinear input)", "h", 2.0, "rep", NOT_FULL),
        Kept("layer input (checkpoint)", "h", 2.0, "rep", FULL_ONLY),
        Kept("input norm statistics", "token", norm_stats, "rep", NOT_FULL),
        # MLA's input norm is a module of its own (TENorm), which "layernorm" recomputes; else fused into the GEMM
        Kept("QKV input (norm output)", "h", gemm_in, "rep", _sel(a, "layernorm") if a.mla else NOT_FULL),
    ]
    kept += _mla(a, gemm_in) if a.mla else _attention(a)
    if a.dropout:
        kept.append(Kept("attention hidden-dropout mask", "h", 1.0, "rep", NOT_FULL))
    if not a.parallel:
        kept += [Kept("MLP input (LayerNormLinear input)", "h", 2.0, "rep", NOT_FULL),
                 Kept("MLP norm statistics", "token", norm_stats, "rep", _sel(a, "mlp") if not a.moe else NOT_FULL),
                 # a MoE layer's pre-MLP norm is a TENorm module ("layernorm"); a dense one is inside the MLP
                 Kept("fc1 input (norm output)", "h", gemm_in, "rep", _sel(a, "layernorm" if a.moe else "mlp"))]
    kept += moe_layer(a) if a.moe else _mlp(a, "f", "", NONE_ONLY if whole_mlp else NOT_FULL)
    if a.dropout:
        kept.append(Kept("MLP hidden-dropout mask", "h", 1.0, "rep", NOT_FULL))
    return tuple(kept)


def _attention(a: Arch) -> list[Kept]:
    kept = [Kept("attention output (projection input)", "q", 2.0, "tp", NOT_FULL)]
    if a.qk_norm:  # --qk-layernorm: TENorm on q and k per head; TE's norm op saves input_.contiguous() and fp32 stats
        stats = 8.0 if a.norm == "layernorm" else 4.0
        kept += [Kept("q before its norm (QK layernorm input, contiguous)", "q", 2.0, "tp", NOT_FULL),
                 Kept("k before its norm (QK layernorm input, contiguous)", "kv", 2.0, "tp", NOT_FULL),
                 Kept("q norm statistics (fp32, per head)", "heads", stats, "tp", NOT_FULL),
                 Kept("k norm statistics (fp32, per key/value head)", "kvheads", stats, "tp", NOT_FULL)]
    if a.fp8:
        kept.append(Kept("projection input in FP8", "q", 1.0, "tp", NOT_FULL))
    if a.flash:
        kept += [Kept("q (fused attention)", "q", 2.0, "tp", NOT_FULL),
                 Kept("k (fused attention)", "kv", 2.0, "tp", NOT_FULL),
                 Kept("v (fused attention)", "kv", 2.0, "tp", NOT_FULL),
                 Kept("softmax statistics (fp32)", "heads", 4.0, "tp", _sel(a, "core_attn"))]
    else:
        kv = "q" if a.gqa else "kv"  # the unfused path repeats K and V to every query head
        core = _sel(a, "core_attn")
        kept += [Kept("q", "q", 2.0, "tp", NOT_FULL),
                 Kept("k (core attention input)", "kv", 2.0, "tp", NOT_FULL),
                 Kept("v (core attention input)", "kv", 2.0, "tp", NOT_FULL),
                 Kept("softmax output", "scores", 2.0, "tp", core)]
        if a.gqa:
            kept += [Kept("k repeated to the query heads", kv, 2.0, "tp", core),
                     Kept("v repeated to the query heads", kv, 2.0, "tp", core)]
        if a.dropout:
            kept += [Kept("attention dropout mask", "scores", 1.0, "tp", core),
                     Kept("attention dropout output", "scores", 2.0, "tp", core)]
    return kept


def _sel(a: Arch, module: str) -> frozenset:
    """The recompute modes under which a tensor of `module` is kept: selective recompute drops it when the module is
    one of recompute_modules (transformer_config.py: --recompute-modules, default core_attn)."""
    return NONE_ONLY if module in a.recompute_modules else NOT_FULL


def _mla(a: Arch, gemm_in: float) -> list[Kept]:
    """Multi-head latent attention (multi_latent_attention.py MLASelfAttention with Transformer Engine's spec): the
    down-projections read the norm output kept above; each latent passes a fused norm + up-projection
    (TELayerNormColumnParallelLinear: its input, fp32 rsigma and normed GEMM input); RoPE and the concatenation
    build the query and key (heads x (qk + rope dims)) and the value (heads x v dim) the attention kernel keeps,
    as the unfused one keeps its softmax; the output feeds linear_proj. With mla_up_proj in recompute_modules (the
    planner's default, as Megatron-Bridge's DeepSeek-V3 and Moonlight performance configs run it) the
    up-projections and RoPE run again in the backward, so query, key and value are not kept
    (CheckpointWithoutOutput frees them once the attention has read them)."""
    latent = [("kv", "lat")] + ([("q", "qlat")] if a.q_lora else [])
    kept = [k for who, width in latent for k in (
        Kept(f"{who} latent (up-projection norm input)", width, 2.0, "rep", NOT_FULL),
        Kept(f"{who} latent norm rsigma (fp32)", "token", 4.0, "rep", NOT_FULL),
        Kept(f"{who} latent normed (up-projection input)", width, gemm_in, "rep", NOT_FULL))]
    up, core = _sel(a, "mla_up_proj"), _sel(a, "core_attn")
    kept += [Kept("query (RoPE applied)", "mqk", 2.0, "tp", up),
             Kept("key (RoPE applied)", "mqk", 2.0, "tp", up),
             Kept("value", "mv", 2.0, "tp", up),
             Kept("attention output (projection input)", "mv", 2.0, "tp", NOT_FULL)]
    if a.fp8:
        kept.append(Kept("projection input in FP8", "mv", 1.0, "tp", NOT_FULL))
    if a.flash:
        return kept + [Kept("softmax statistics (fp32)", "heads", 4.0, "tp", core)]
    kept.append(Kept("softmax output", "scores", 2.0, "tp", core))
    if a.dropout:
        kept += [Kept("attention dropout mask", "scores", 1.0, "tp", core),
                 Kept("attention dropout output", "scores", 2.0, "tp", core)]
    return kept


def _mlp(a: Arch, width: str, who: str, modes: frozenset = NOT_FULL, act: frozenset = NOT_FULL) -> list[Kept]:
    """An MLP's fc1 output and fc2 input, kept under `modes` (and the activation's output under `act` too)."""
    gated = a.mlp == "swiglu"
    return [Kept(f"{who}fc1 output (activation input)", width, 4.0 if gated else 2.0, "tp", modes),
            Kept(f"{who}activation output (fc2 input)", width, 1.0 if a.fp8 else 2.0, "tp", modes & act)]


def moe_layer(a: Arch) -> list[Kept]:
    """A MoE layer (moe_layer.py, TopKRouter with its auxiliary loss, MoEAlltoAllTokenDispatcher, TEGroupedMLP),
    replayed at core_v0.14.0 on CPU with saved_tensors_hooks: the router keeps fp32 scores, the routing map and
    bf16 probabilities (7 bytes per expert and token), the top-k indices, their fp32 weights, the permutation's
    indices and the permuted bf16 probabilities (22 bytes per routed copy, what is still held when the forward
    ends); the dispatched tokens are the grouped GEMM's input (tests/test_engine_megatron_moe.py replays it).
    The routing probabilities are applied inside the activation (experts.py bias_act_func), so the experts'
    outputs are not kept: a gated MLP's fused weighted SwiGLU keeps the fc1 output and fc2 its input, as the
    dense MLP; an ungated one keeps the activation's input, its output (read again by the weighting) and the
    weighted product (fc2's input). The shared experts run as the dense MLP. Recompute modules: "moe" checkpoints
    the layer (its input, the norm output, is kept), "moe_act" the experts' activation (output-discarding: fc1's
    output stays), "shared_experts" the shared experts."""
    layer, act = _sel(a, "moe"), _sel(a, "moe_act")
    kept = [Kept("router scores (fp32), routing map and probabilities", "experts", 7.0, "tp", layer),
            Kept("top-k indices and weights, permutation indices and permuted probabilities", "k", 22.0, "tp", layer),
            Kept("dispatched tokens (grouped GEMM input)", "kh", 1.0 if a.fp8 else 2.0, "tp", layer),
            *_mlp(a, "kf", "routed experts' ", layer, act)]
    if a.mlp != "swiglu":
        kept.append(Kept("routed experts' activation output (read by the probability weighting)", "kf", 2.0, "tp",
                         layer & act))
    return kept + _mlp(a, "sf", "shared experts' ", layer & _sel(a, "shared_experts"))


def head(a: Arch) -> tuple[Kept, ...]:
    """GPTModel's final_layernorm (TENorm: its input and fp32 statistics) and output_layer (ColumnParallelLinear: its
    input, the local sequence shard under sequence parallelism)."""
    return (Kept("final norm input", "h", 2.0, "rep"),
            Kept("final norm statistics", "token", 8.0 if a.norm == "layernorm" else 4.0, "rep"),
            Kept("output layer input", "h", 2.0, "rep"))


ACCOUNTING = Accounting(
    key="megatron", label="Megatron-LM (Megatron-Core + Transformer Engine)", version=READ_AT, states=STATES,
    block=block, head=head, loss=LOSS, buffers=BUFFERS,
    selective="the recompute_modules are rebuilt in the backward (default core_attn and, for MLA, mla_up_proj): the "
              "core attention's statistics (fused kernel) or s x s matrices (unfused), MLA's query, key and value")


# What it runs (core.frameworks.capability): the flags of the release the planner's export is checked against
RELEASE = "core_v0.19.0"
COMMIT = "5be9626709af2722333bf54797c954c09edeada3"
_MEGATRON_ARGS = f"NVIDIA/Megatron-LM megatron/training/arguments.py at {RELEASE} ({COMMIT[:12]})"

CAPABILITY = Framework(
    "megatron", "Megatron-LM", RELEASE,
    home=__name__,
    partial_recompute=True,
    schedules=("1f1b", "interleaved"),
    zero=(0, 1, 2, 3), zero_with_pipeline=(0, 1), zero_with_tp=(0, 1, 2, 3),
    sequence_parallel=True, recompute=("none", "selective", "full"), offload=("none", "optimizer"),
    kv_replication=True,
    sources={
        "schedules": f"{_MEGATRON_ARGS}: --pipeline-model-parallel-size runs 1F1B, "
                     "--num-virtual-stages-per-pipeline-rank the interleaved schedule; no flag selects GPipe, "
                     "zero-bubble or V schedules (assets/megatron_flags.json lists every flag)",
        "zero": f"{_MEGATRON_ARGS}: 0 = plain DDP, 1 = --use-distributed-optimizer, 2/3 = --use-megatron-fsdp "
                "with --data-parallel-sharding-strategy optim_grads / optim_grads_params",
        "zero_with_pipeline": "Megatron-FSDP together with pipeline parallelism is neither asserted against in "
                              f"validate_args nor documented as supported at {RELEASE}; the planner "
                              "keeps to the distributed optimizer (ZeRO 0/1) there",
        "sequence_parallel": f"{_MEGATRON_ARGS}: --sequence-parallel (switched off by validate_args at t = 1)",
        "recompute": f"{_MEGATRON_ARGS}: --recompute-granularity selective | full",
        "offload": f"{_MEGATRON_ARGS}: --optimizer-cpu-offload (needs --use-precision-aware-optimizer and the "
                   "distributed optimizer); no flag offloads parameters",
        "zero_with_tp": "the distributed optimizer and Megatron-FSDP shard over the data-parallel group of each "
                        "tensor-parallel rank",
        "kv_replication": f"Megatron-LM {RELEASE} transformer_config.py: num_query_groups must be a "
                          "multiple or a divisor of the tensor-parallel size",
        "context_parallel": f"{_MEGATRON_ARGS}: --context-parallel-size, --cp-comm-type p2p (ring attention in "
                            "Transformer Engine); docs/source/api-guide/context_parallel.rst",
        "expert_parallel": f"{_MEGATRON_ARGS}: --expert-model-parallel-size, --expert-tensor-parallel-size "
                           "(MoE parallel folding)",
        "fp8": f"{_MEGATRON_ARGS}: --fp8-format, --fp8-recipe, --fp8-param-gather (Transformer Engine)",
        "moe_blocks": f"{_MEGATRON_ARGS}: --num-experts, --moe-router-topk, --moe-ffn-hidden-size, "
                      "--moe-layer-freq, --moe-shared-expert-intermediate-size, --multi-latent-attention",
        "tp_comm_overlap": f"{_MEGATRON_ARGS}: --tp-comm-overlap (Transformer Engine userbuffers; needs "
                           "--sequence-parallel; TE overlaps TP communication only inside one server, "
                           "NVIDIA/TransformerEngine issue 1071)",
        "deepep": f"{_MEGATRON_ARGS}: --moe-token-dispatcher-type flex --moe-enable-deepep (DeepEP installed; "
                  "megatron/core/transformer/moe/fused_a2a.py)",
        "allgather": f"{_MEGATRON_ARGS}: --moe-token-dispatcher-type allgather, Megatron-Core's default "
                     "(megatron/core/transformer/moe/token_dispatcher.py MoEAllGatherTokenDispatcher)",
        "moe_a2a_overlap": f"{_MEGATRON_ARGS}: --overlap-moe-expert-parallel-comm --delay-wgrad-compute "
                           "(Megatron-Core >= 0.14; transformer_config.py asserts ep > 1, no full recompute, the "
                           "interleaved schedule when p > 1)",
        "partial": f"{_MEGATRON_ARGS}: --recompute-granularity full --recompute-method block "
                   "--recompute-num-layers N recomputes the first N layers of each pipeline stage (model chunk)",
        "hybrid": f"{_MEGATRON_ARGS}: --num-distributed-optimizer-instances R (the distributed optimizer "
                  "sharded within d x cp / R ranks, its gradients all-reduced across the R instances; "
                  "megatron/core/distributed/distributed_data_parallel.py, intra and inter distributed-optimizer "
                  "groups); ZeRO-1 only",
    }, context_parallel=True, expert_parallel=True, fp8=True, moe_blocks=True, switches=("tp_comm_overlap",),
    hybrid=(1,),
    moe_switches=("deepep", "allgather", "moe_a2a_overlap"))
