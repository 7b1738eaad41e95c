"""PyTorch FSDP2 with torchtitan's Llama (the reference PyTorch-native trainer): how it stores model states, what its
layer keeps for the backward (eager, or compiled), its loss and its buffers.

Read at torchtitan 9dec370 (December 2024, the commit its H100 benchmark ran) and e7c0cae (June 2025):
- model states (torchtitan parallelize_llama.py apply_fsdp; FSDP2 MixedPrecisionPolicy(param_dtype=bf16,
  reduce_dtype=fp32)): the sharded parameters are the fp32 master ("The optimizer step uses the sharded parameter
  in the original dtype"), gradients are reduce-scattered into fp32 shards, AdamW's moments are fp32: 16 bytes per
  parameter over the data-parallel x context-parallel ranks (dp_shard_cp). Gathered bf16 copies live per unit.
- the layer (models/llama/model.py): its RMSNorm upcasts to fp32 (x.float()) and keeps that copy, the rsqrt and the
  normalised bf16 tensor, and the weighted output is the next GEMMs' input; rotary embedding works on fp32 complex
  copies it does not keep; scaled_dot_product_attention keeps q, k, v, its output (laid out [b, s, heads, d], so
  wo's input is a view of it) and the fp32 log-sum-exp, K and V widened to every query head by repeat_kv until
  ff0829c10 (2026-01-27) and at their own width since (enable_gqa; the `repeat_kv` input); the SwiGLU feed-forward
  keeps w1's output, silu's output, w3's output and their product. Measured on this machine with torch 2.13
  (saved_tensors_hooks, tests/engines): 24 s b h + 8 s b f + fp32 terms per layer at the query width h.
- selective recompute is per-op (parallelize_llama.py _save_list): the outputs of every other matmul (wq, wv, w1,
  w2 in a block) and of the attention kernel are saved, everything else is recomputed in the backward (the
  attention too where the list missed the kernel SDPA ran: the `sac_attention` input); full recompute keeps each
  block's input.
- loss (train.py loss_fn): cross_entropy(pred.flatten(0, 1).float(), labels): a full fp32 copy of the bf16 logits,
  log_softmax's fp32 output kept for the backward, whose nll and log_softmax gradients are fp32 too.
"""

from __future__ import annotations

from core.frameworks.capability import Exclusion, Framework
from core.frameworks.records import FULL_ONLY, NONE_ONLY, NOT_FULL, Accounting, Arch, Buffers, Kept, Loss, StateBytes

TORCHTITAN = "9dec370"
MIB = float(1 << 20)
SELECTIVE_ONLY = frozenset({"selective"})  # saved by torchtitan's per-op policy, not kept otherwise

STATES = StateBytes(
    param=4.0, grad=4.0, master=0.0, sharded_from=(("params", 2), ("grads", 2), ("optimizer", 1)),
    source="PyTorch FSDP2 MixedPrecisionPolicy docs ('The optimizer step uses the sharded parameter in the original "
           f"dtype'); torchtitan {TORCHTITAN} apply_fsdp (param_dtype bf16, reduce_dtype fp32)")

LOSS = Loss(held=4.0, peak=12.0, peak_parallel=16.0,
            source=f"torchtitan {TORCHTITAN} train.py loss_fn: cross_entropy(pred.flatten(0, 1).float(), labels); "
                   "log_softmax keeps its fp32 output, its backward adds the fp32 gradient and its input's; under "
                   "loss_parallel (t > 1) DTensor's vocabulary-parallel backward holds one fp32 logits-sized "
                   "temporary more (16 bytes per local logit, replayed on torchtitan's 70B TP 8 step, research note)")

BUFFERS = Buffers(
    workspace=2 * 32 * MIB,
    sources=("PyTorch aten/src/ATen/cuda/CublasHandlePool.cpp: 32 MiB per (handle, stream) on sm90, allocated by the "
             "caching allocator (the forward and the autograd thread each have one)",))


def eager_block(a: Arch) -> tuple[Kept, ...]:
    """What torchtitan's Llama block keeps, op by op, or compiled. Before ff0829c10 (2026-01-27, "GQA without kv
    repeats") its attention widened K and V to every query head (repeat_kv) before scaled_dot_product_attention, which
    then kept them at that width; since, SDPA's enable_gqa takes them at their own width (`a.repeat_kv`)."""
    return _compiled(a) if a.compiled and not (a.moe or a.mla) else _eager(a, repeat_kv=a.repeat_kv)


def _attention_saved(a: Arch) -> frozenset:
    """When the attention kernel's output and log-sum-exp are kept: without recompute, and under the per-op policy
    while its save list names the kernel SDPA dispatches to. torchtitan chose cuDNN's attention on Blackwell from
    3b85aa31f (2025-05-14) and listed it only from b39377f9f (2025-12-01): in between, on B200, the per-op policy
    recomputed the attention in the backward (`a.sac_attention` false)."""
    return NOT_FULL if a.sac_attention else NONE_ONLY


def _compiled(a: Arch) -> tuple[Kept, ...]:
    """What torch.compile's partitioner saves of torchtitan's block (measured on this machine with torch 2.13, the
    block compiled whole, tests/engines): the fused norms keep their rsqrt and their output, the residual stream is
    kept where a norm's backward needs it (the block input, the attention projection's output), the feed-forward
    keeps w1's and w3's outputs and their product; under the per-op policy w2's output is not saved (nothing in the
    block's backward reads it), the rest is as in the eager block."""
    kv = "q" if (a.gqa and a.repeat_kv) else "kv"
    kept = [Kept("layer input (checkpoint)", "h", 2.0, "rep", FULL_ONLY),
            Kept("block input", "h", 2.0, "rep", NOT_FULL), *_qk_norm(a),
            Kept("wq output (per-op policy)", "q", 2.0, "tp", SELECTIVE_ONLY),
            Kept("wv output (per-op policy)", "kv", 2.0, "tp", SELECTIVE_ONLY),
            Kept("attention output", "q", 2.0, "tp", _attention_saved(a)),
            Kept("log-sum-exp (fp32)", "heads", 4.0, "tp", _attention_saved(a)),
            Kept("norm rsqrt (fp32, two norms)", "token", 8.0, "rep", NONE_ONLY),
            Kept("norm outputs (GEMM inputs, two norms)", "h", 4.0, "rep", NONE_ONLY),
            Kept("q", "q", 2.0, "tp", NONE_ONLY), Kept("k", kv, 2.0, "tp", NONE_ONLY),
            Kept("v", kv, 2.0, "tp", NONE_ONLY),
            Kept("wo output (residual)", "h", 2.0, "rep", NONE_ONLY)]
    if a.moe:
        return tuple(kept + _moe(a))
    if a.mlp == "swiglu":
        kept += [Kept("w1 output", "f", 2.0, "tp", NOT_FULL), Kept("w3 output", "f", 2.0, "tp", NONE_ONLY),
                 Kept("w2 input (product)", "f", 2.0, "tp", NONE_ONLY)]
    else:
        kept += [Kept("fc1 output", "f", 2.0, "tp", NOT_FULL), Kept("fc2 input", "f", 2.0, "tp", NONE_ONLY)]
    return tuple(kept)


def hf_block(a: Arch) -> tuple[Kept, ...]:
    """What a Hugging Face Transformers decoder layer keeps (LlamaDecoderLayer, GPT2Block), op by op: its SDPA path
    passes K and V at their own width (enable_gqa), measured with transformers 5.25 (tests/engines)."""
    return _eager(a, repeat_kv=False)


def _eager(a: Arch, repeat_kv: bool) -> tuple[Kept, ...]:
    norm = _eager_norm(a)
    kept = [Kept("layer input (checkpoint)", "h", 2.0, "rep", FULL_ONLY),
            Kept("layer input (per-op policy)", "h", 2.0, "rep", SELECTIVE_ONLY),
            *norm("attention"),
            *(_mla(a) if a.mla else _attention(a, repeat_kv))]
    if a.flash:  # the kernel's output is laid out [b, s, heads, d]: the transpose for wo is a view
        kept.append(Kept("log-sum-exp (fp32)", "heads", 4.0, "tp", _attention_saved(a)))
    else:
        kept.append(Kept("softmax output", "scores", 2.0, "tp", NONE_ONLY))
        if a.dropout:
            kept += [Kept("attention dropout mask", "scores", 1.0, "tp", NONE_ONLY),
                     Kept("attention dropout output", "scores", 2.0, "tp", NONE_ONLY)]
    if not a.parallel:
        kept += norm("feed-forward")
    if a.moe:
        kept += _moe(a) + _moe_per_op(a)
    elif a.mlp == "swiglu":  # the per-op policy saves w1's and w2's outputs after four attention matmuls, w3's after
        odd = not a.q_lora  # MLA's five (query latent)
        kept += [Kept("w1 output (silu input)", "f", 2.0, "tp", NOT_FULL if odd else NONE_ONLY),
                 Kept("silu output", "f", 2.0, "tp", NONE_ONLY),
                 Kept("w3 output", "f", 2.0, "tp", NONE_ONLY if odd else NOT_FULL),
                 Kept("w2 input (product)", "f", 2.0, "tp", NONE_ONLY)]
    else:
        kept += [Kept("fc1 output (GeLU input)", "f", 2.0, "tp", NOT_FULL),
                 Kept("fc2 input", "f", 2.0, "tp", NONE_ONLY)]
    if not a.moe and not (a.q_lora and a.mlp == "swiglu"):
        kept.append(Kept("w2 output (per-op policy)", "h", 2.0, "rep", SELECTIVE_ONLY))
    if a.dropout:
        kept.append(Kept("residual dropout masks (two)", "h", 2.0, "rep", NONE_ONLY))
    return tuple(kept)


def _attention(a: Arch, repeat_kv: bool) -> list[Kept]:
    kv = "q" if (a.gqa and repeat_kv) else "kv"
    return [*_qk_norm(a), Kept("q (attention input)", "q", 2.0, "tp", NONE_ONLY),
            Kept("k (attention input)", kv, 2.0, "tp", NONE_ONLY),
            Kept("v (attention input)", kv, 2.0, "tp", NONE_ONLY),
            Kept("attention output (wo input)", "q", 2.0, "tp", _attention_saved(a)),
            Kept("wq output (per-op policy)", "q", 2.0, "tp", SELECTIVE_ONLY),
            Kept("wv output (per-op policy)", "kv", 2.0, "tp", SELECTIVE_ONLY)]


def _qk_norm(a: Arch) -> list[Kept]:
    """QK normalisation (Qwen3, OLMo 2: q_norm and k_norm, RMSNorms over the head size, before RoPE), as the block's
    eager norms keep theirs: the fp32 copy of the input, the rsqrt per head, the normalised bf16 tensor the weight
    multiplies; the output feeds RoPE, which keeps only its cos/sin. Measured with transformers 5.25's Qwen3 layer
    (tests/test_engine_saved_bytes.py): 6 bytes per q and k element and 4 per head over Llama's. Not measured under
    torch.compile; the compiled block counts it the same."""
    if not a.qk_norm:
        return []
    return [Kept("q norm input in fp32", "q", 4.0, "tp", NONE_ONLY),
            Kept("k norm input in fp32", "kv", 4.0, "tp", NONE_ONLY),
            Kept("q normalised (bf16)", "q", 2.0, "tp", NONE_ONLY),
            Kept("k normalised (bf16)", "kv", 2.0, "tp", NONE_ONLY),
            Kept("q norm rsqrt (fp32, per head)", "heads", 4.0, "tp", NONE_ONLY),
            Kept("k norm rsqrt (fp32, per key/value head)", "kvheads", 4.0, "tp", NONE_ONLY)]


def _mla(a: Arch) -> list[Kept]:
    """torchtitan's DeepSeek-V3 attention (models/deepseek_v3/model.py): wkv_a's latent passes an RMSNorm (kept as
    the block's norms are) into wkv_b, whose output the value is a view of, so the attention keeps all of it; RoPE
    and torch.cat build the query and key (heads x (qk + rope dims)). The per-op policy saves the odd matmuls'
    outputs: wq and wkv_b (with a query latent: wq_a, wkv_a and wo)."""
    lat = [k for k in _eager_norm(a)("kv latent") if k.width == "h"]
    kept = [Kept(k.name, "lat", k.nbytes, k.split, k.modes) for k in lat]
    kept.append(Kept("kv latent norm rsqrt (fp32)", "token", 4.0, "rep", NONE_ONLY))
    if a.q_lora:
        kept += [Kept(k.name.replace("kv", "q"), "qlat", k.nbytes, k.split, k.modes) for k in lat]
        kept += [Kept("q latent norm rsqrt (fp32)", "token", 4.0, "rep", NONE_ONLY),
                 Kept("wq_a output (per-op policy)", "qlat", 2.0, "rep", SELECTIVE_ONLY),
                 Kept("wkv_a output (per-op policy)", "lat", 2.0, "rep", SELECTIVE_ONLY),
                 Kept("wo output (per-op policy)", "h", 2.0, "rep", SELECTIVE_ONLY)]
    else:
        kept += [Kept("wq output (per-op policy)", "mqk", 2.0, "tp", SELECTIVE_ONLY),
                 Kept("wkv_b output (per-op policy)", "mkv", 2.0, "tp", SELECTIVE_ONLY)]
    return kept + [Kept("query (attention input)", "mqk", 2.0, "tp", NONE_ONLY),
                   Kept("key (attention input)", "mqk", 2.0, "tp", NONE_ONLY),
                   Kept("wkv_b output (the value is a view of it)", "mkv", 2.0, "tp", NONE_ONLY),
                   Kept("attention output (wo input)", "mv", 2.0, "tp", _attention_saved(a))]


def _moe_per_op(a: Arch) -> list[Kept]:
    """What the per-op policy saves of a MoE feed-forward: it counts on from the attention's matmuls (four; five with
    MLA's query latent), so the router gate's and the shared experts' w3 outputs are the odd ones, or w1's and
    w2's; the routed experts' grouped GEMMs are not on its list."""
    if a.q_lora:
        return [Kept("shared experts' w1 output (per-op policy)", "sf", 2.0, "tp", SELECTIVE_ONLY),
                Kept("shared experts' w2 output (per-op policy)", "h", 2.0, "rep", SELECTIVE_ONLY)]
    return [Kept("router gate output (per-op policy)", "experts", 2.0, "tp", SELECTIVE_ONLY),
            Kept("shared experts' w3 output (per-op policy)", "sf", 2.0, "tp", SELECTIVE_ONLY)]


def _moe(a: Arch) -> list[Kept]:
    """An eager MoE feed-forward (Hugging Face's grouped_mm experts, torchtitan's MoE), measured with transformers 5.25
    (Mixtral, Qwen3-MoE, DeepSeek-V3 layers, tests/engines): the router's fp32 scores, per routed copy the gathered
    input and the expert's output (4 h bytes), three int64 indices and the eager SwiGLU's four tensors, and the shared
    experts' SwiGLU. The per-op policy saves none of it (grouped GEMMs are not on its list): recomputed."""
    return [Kept("router scores (fp32)", "experts", 4.0, "tp", NONE_ONLY),
            Kept("routed inputs and expert outputs", "kh", 4.0, "tp", NONE_ONLY),
            Kept("routing indices (int64)", "k", 24.0, "tp", NONE_ONLY),
            Kept("routed experts' SwiGLU (gate, silu, up, product)", "kf", 8.0, "tp", NONE_ONLY),
            Kept("shared experts' SwiGLU", "sf", 8.0, "tp", NONE_ONLY)]


def _eager_norm(a: Arch):
    def norm(where: str) -> list[Kept]:
        if a.norm == "rmsnorm":
            return [Kept(f"{where} norm input in fp32", "h", 4.0, "rep", NONE_ONLY),
                    Kept(f"{where} norm rsqrt (fp32)", "token", 4.0, "rep", NONE_ONLY),
                    Kept(f"{where} normalised (bf16)", "h", 2.0, "rep", NONE_ONLY),
                    Kept(f"{where} norm output (GEMM input)", "h", 2.0, "rep", NONE_ONLY)]
        return [Kept(f"{where} norm input", "h", 2.0, "rep", NONE_ONLY),
                Kept(f"{where} norm statistics (fp32)", "token", 8.0, "rep", NONE_ONLY),
                Kept(f"{where} norm output (GEMM input)", "h", 2.0, "rep", NONE_ONLY)]
    return norm


def eager_head(a: Arch) -> tuple[Kept, ...]:
    """The final norm as eager code keeps it (its output is the output layer's input)."""
    return tuple(_eager_norm(a)("final"))


ACCOUNTING = Accounting(
    key="torch", label="PyTorch (FSDP2, torchtitan)", version=f"torchtitan {TORCHTITAN}", states=STATES,
    block=eager_block, head=eager_head, loss=LOSS, buffers=BUFFERS,
    selective="torchtitan's per-op policy: every other matmul's output and the attention kernel's are saved, the "
              "rest recomputed")


# What it runs (core.frameworks.capability), at the release the planner's export and engine tests run
TORCH_VERSION = "2.13.0"
_TORCH = f"PyTorch {TORCH_VERSION}"

CAPABILITY = Framework(
    "torch", "PyTorch (FSDP2, torch.distributed.pipelining)", TORCH_VERSION,
    home=__name__,
    partial_recompute=True,
    schedules=("gpipe", "1f1b", "interleaved", "looped-bfs", "zb-h1", "zb-h2", "zbv", "dualpipev"),
    zero=(0, 1, 2, 3), zero_with_pipeline=(0, 1, 2, 3), zero_with_tp=(2, 3),
    sequence_parallel=True, recompute=("none", "selective", "full"), offload=("none", "optimizer+params"),
    kv_replication=False,
    sources={
        "schedules": f"{_TORCH} torch/distributed/pipelining/schedules.py: ScheduleGPipe, Schedule1F1B, "
                     "ScheduleInterleaved1F1B, ScheduleLoopedBFS, ScheduleZBVZeroBubble, ScheduleDualPipeV; any "
                     "other order runs from its action CSV in _PipelineScheduleRuntime (tests/engines run every "
                     "one of ours there)",
        "zero": f"{_TORCH}: 0 = DistributedDataParallel, 1 = ZeroRedundancyOptimizer, 2/3 = fully_shard with "
                "reshard_after_forward False/True",
        "zero_with_pipeline": f"{_TORCH}: the data-parallel wrappers apply to each pipeline stage's module",
        "sequence_parallel": f"{_TORCH} torch/distributed/tensor/parallel: SequenceParallel style",
        "recompute": f"{_TORCH} torch.utils.checkpoint (whole block, or the attention core only)",
        "offload": f"{_TORCH} CPUOffloadPolicy offloads parameters, gradients and optimizer state together "
                   "(ZeRO-3); there is no optimizer-only offload",
        "zero_with_tp": f"{_TORCH}: DistributedDataParallel and ZeroRedundancyOptimizer take plain tensors, "
                        "not tensor-parallel DTensors (torchtitan: 'DDP has not supported > 1D parallelism'); "
                        "FSDP2 composes with tensor parallelism",
        "kv_replication": "the exported script shards the key/value projections column-wise over t, so t must "
                          "divide the key/value heads (replicating them is not generated)",
        "context_parallel": f"{_TORCH} torch.distributed.tensor.experimental.context_parallel: ring attention "
                            "for scaled_dot_product_attention over a 'cp' mesh dimension (experimental API)",
        "expert_parallel": "torchtitan (the PyTorch-native trainer on FSDP2) spreads routed experts over "
                           "parallelism.expert_parallel_degree ranks borrowed from the data-parallel x context-"
                           "parallel mesh, with expert_tensor_parallel_degree (torchtitan/distributed/"
                           "expert_parallel.py, parallel_dims.py); core PyTorch has no expert-parallel API",
        "fp8": f"{_TORCH} with torchao: float8 linears by torchao.float8.convert_to_float8_training, the output "
               "layer left in 16-bit (torchtitan's float8 converter, filter_fqns ['output']); the script converts "
               "the model when the row is FP8",
        "moe_blocks": "torchtitan's deepseek_v3 (latent attention, routed and shared experts on grouped GEMMs) "
                      "and qwen3 MoE models (torchtitan/models/moe)",
        "no_reshard": f"{_TORCH} fully_shard(reshard_after_forward=False): parameters stay gathered from "
                      "forward to backward (torchtitan's default with pipeline parallelism, "
                      "torchtitan/distributed/fsdp.py)",
        "partial": f"{_TORCH} torch.utils.checkpoint on the first N blocks of each stage (the exported script's "
                   "RECOMPUTE_LAYERS; torchtitan's selective_ac_option K checkpoints every K-th block)",
        "hybrid": f"{_TORCH} fully_shard(mesh=<2-D mesh (replicate, shard)>): HSDP, parameters sharded within "
                  "the shard dimension and gradients all-reduced across the replicate one (torchtitan's "
                  "parallelism.data_parallel_replicate_degree); ZeroRedundancyOptimizer and DDP do not",
    },
    context_parallel=True, expert_parallel=True, fp8=True, moe_blocks=True, switches=("no_reshard",),
    hybrid=(2, 3),
    export_lacks={
        "expert_parallel": "the planner's torch script builds no expert-parallel group (torchtitan runs FSDP2 "
                           "with expert parallelism: parallelism.expert_parallel_degree in its TOML)",
        "moe_blocks": "the planner's torch script builds a dense decoder (torchtitan's deepseek_v3 and qwen3 "
                      "MoE models have the routed experts and latent attention)"},
    exclusions=(Exclusion(
        (3,), ("zb-h1", "zb-h2", "zbv"),
        "PyTorch's pipelining runtime drops the deferred weight gradients of ZeRO-{zero} (FSDP2 "
        "reshard_after_forward=True) stages under {schedule}",
        f"measured with {_TORCH}: after one step of the exported script the stage whose W runs after a later "
        "micro-batch's work has no gradients (tests/engines/test_torch_script.py keeps checking it)"),))
