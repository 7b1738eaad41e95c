"""What a framework's own code adds to the bytes of a layout, read from its accounting (core.frameworks): its bytes per
parameter, the gradients that exist at the activation peak, the optimizer step's own moment, its buffers and ZeRO-3
gathers, and what the caching allocator and the process hold beyond the tensors.

Kept apart from core.memory.per_gpu, which composes these terms with the model states and activations: the textbook
accounting (the ZeRO paper) adds none of them, so its numbers stay the paper's to the byte.
"""

from __future__ import annotations

import numpy as np

from core.frameworks import accounting
from core.memory import fp8 as fp8_bytes
from core.memory.states import BytesPerParam
from core.params.memory import GRAD_BYTES

MASTER = 4.0  # bytes of the fp32 master copy the mixed-precision optimizer presets count in K (core.memory.states)




def state_kwargs(key: str, bpp: BytesPerParam, fp8: bool, gemm_share: float, grad_dtype: str = "auto",
                 optimizer_dtype: str = "fp32", fp16: bool = False) -> dict:
    """Bytes per parameter of the compute weights, the gradient buffer and the optimizer (model_states' keywords),
    and where the framework shards them. The textbook takes the optimizer/precision preset as it is; a framework
    stores its own weights and gradients (`grad_dtype` overrides the buffer's precision; under `fp16` the framework's
    own rule for it), and the preset's K less
    the master copy it does not keep. `optimizer_dtype` bf16 halves the moments and, in Megatron-LM's
    precision-aware optimizer, keeps the fp32 master as the 16-bit remainder beside the bf16 weight
    (optimizer_config.py store_param_remainders; Transformer Engine FusedAdam); pure-bf16 keeps no master at all:
    the sharded weights themselves are 16-bit (FSDP2's fp32 shards become bf16), and so are the gradients the
    framework holds unless `grad_dtype` says otherwise."""
    if key == "textbook":
        kw = bpp.kwargs()
        return {**kw, "param_bytes": fp8_bytes.share_bytes(gemm_share)} if fp8 else kw
    st = accounting(key).states
    param = st.param
    if fp8 and st.param == 2.0:  # FP8 primary weights (--fp8-param-gather): one byte per GEMM weight
        param = fp8_bytes.share_bytes(gemm_share)
    moments = max(bpp.k - MASTER, 0.0)
    master = st.master
    own = st.grad_fp16 if (fp16 and st.grad_fp16) else st.grad
    if optimizer_dtype == "bf16":
        moments /= 2.0
        master = min(master, 2.0)
    elif optimizer_dtype == "pure-bf16":  # the 16-bit weights are what the optimizer steps: no master anywhere
        moments, master, param, own = moments / 2.0, 0.0, min(param, 2.0), 2.0
    return {"param_bytes": param, "grad_bytes": GRAD_BYTES.get(grad_dtype, own), "k": moments + master,
            "sharded_from": st.sharded_from}


def gather_bytes(key: str, fp8: bool, shards=2) -> np.ndarray:
    """Bytes per parameter of a gathered (unsharded) copy of the weights: 16-bit, FP8 where the all-gather is FP8
    (Megatron-LM's --fp8-param-gather; torchtitan's float8 all-gather, which it turns on only where FSDP shards over
    more than one rank, `shards` = d: Float8Handler enable_fsdp_float8_all_gather and dp_shard_enabled)."""
    fp8_gather = fp8 and (key != "torch" or np.asarray(shards) > 1)
    return np.where(fp8_gather, 1.0, 2.0)


def grads_at_peak(key: str, grads, psi_rank, grad_bytes, p, m, tp_embedding=0.0) -> np.ndarray:
    """The gradient bytes that exist when activations peak. Megatron's and DeepSpeed's gradient buffers persist
    through the step; FSDP2's sharded gradients are created by the backward and freed by zero_grad(set_to_none) at the
    start of the next step, so a single micro-batch peaks without them; with several micro-batches the earlier ones'
    exist: reduce-scattered (sharded) when each backward syncs, unsharded in fp32 under pipelining, whose stages
    sync only in their last backward (torch.distributed.pipelining stage.backward_maybe_with_nosync). Under tensor
    parallelism the embedding's gradient is the whole vocabulary's on every rank (DTensor's embedding backward has no
    row-sharded output): `tp_embedding` more parameters' worth in fp32 on the first stage (replayed on torchtitan's
    405B steps, research note). Interleaved with m <= p micro-batches (one round) a device reduce-scatters and frees
    its later stage's gradients before its earlier stage's backward, so fewer are allocated at once; the caching
    allocator keeps their blocks and the embedding's gradient, which comes last, needs new ones, so what the device
    holds is counted as if all were kept (torchtitan's interleaved 405B row: 72.7 GiB reserved, -2 % so counted)."""
    if key != "torch":
        return np.asarray(grads, dtype=float)
    m, p = np.asarray(m), np.asarray(p)
    held = grad_bytes * np.asarray(psi_rank, dtype=float) + 4.0 * np.asarray(tp_embedding)
    return np.where(m > 1, np.where(p > 1, held, grads), 0.0)


def step_extra(key: str, shards, zero) -> np.ndarray:
    """Bytes DeepSpeed's optimizer step allocates beyond the model states: it casts every group's gradient partition
    to fp32 and keeps them all until the step ends (stage_1_and_2.py single_grad_partition), 4 bytes per parameter
    of `shards` together ((parameters, ZeRO group) of each of this rank's optimizers: dense, experts). Megatron's and
    torchtitan's fused Adam step in place (torchtitan's default since February 2025; its earlier foreach AdamW made
    one fp32 temporary per shard, below the activation peak of the runs measured); see also moment_copies."""
    zero = np.asarray(zero)
    local = [np.asarray(psi, dtype=float) / np.where(zero >= 1, np.asarray(group, dtype=float), 1.0)
             for psi, group in shards]
    if key == "deepspeed":
        return 4.0 * sum(local)
    return np.zeros(np.broadcast(*local).shape)


def moment_copies(key: str, optimizer_dtype: str, k: float, stored_k: float, optimizer_on_gpu) -> np.ndarray:
    """Bytes Megatron-LM's precision-aware optimizer with bf16 moments adds in its step: it steps through Transformer
    Engine's FusedAdam, which makes an fp32 copy of both moments of every parameter of a parameter group before its
    one fused kernel (fused_adam.py step: get_unscaled_state is `.float()` for bf16 states, gathered in
    unscaled_lists). Per parameter that is the moments' fp32 bytes (K less the master) against the `stored_k` bytes
    the optimizer keeps, applied to the larger of the dense and expert optimizers' bytes on the GPU
    (`optimizer_on_gpu`; they step one after the other; an optimizer offloaded to the CPU copies there)."""
    on_gpu = np.maximum.reduce(np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in optimizer_on_gpu)))
    if key != "megatron" or optimizer_dtype != "bf16" or stored_k <= 0:
        return np.zeros(on_gpu.shape)
    return max(float(k) - MASTER, 0.0) / float(stored_k) * on_gpu


def buffer_bytes(key: str, zero, tp_overlap=False, grouped_gemm=False) -> np.ndarray:
    """Workspaces inside the caching allocator (cuBLAS, Transformer Engine: more with TP communication overlap and
    with grouped-GEMM MoE layers) and DeepSpeed's reduce buckets (reduce_bucket_size 16-bit elements from stage 1, a
    second one with overlap_comm, its stage-3 default)."""
    b = accounting(key).buffers
    zero = np.asarray(zero)
    buckets = np.where(zero >= 1, 2.0 * b.bucket_elements * np.where(zero == 3, 2.0, 1.0), 0.0)
    extra = (np.asarray(tp_overlap, dtype=bool) * b.tp_overlap_workspace
             + np.asarray(grouped_gemm, dtype=bool) * b.grouped_workspace)
    return b.workspace + buckets + extra


def reserve_share(key: str) -> float:
    """The caching allocator's reserve over the peak allocated, as a share (core.frameworks, fitted)."""
    return accounting(key).reserve


def side_pools(key: str, grads_absent, gathered, logits) -> np.ndarray:
    """Bytes the caching allocator holds free at the activation peak in pools the peak's tensors cannot use, where a
    framework allocates on streams of its own. FSDP2 (torch) allocates the reduce-scatter output, which becomes the
    sharded gradients, on its reduce-scatter stream, and the all-gather outputs on its copy-in stream; a stream's
    freed blocks serve only that stream (c10 CUDACachingAllocator), so the gradients zero_grad freed (`grads_absent`)
    and the gathered weights' buffers (`gathered`) stay reserved through the peak; and torchtitan frees the bf16
    logits (`del pred`, 2 bytes per logit, `logits` values) before the loss backward, whose fp32 tensors are too
    large for that block. Replayed on the allocation trace of torchtitan's Llama 3.1 8B step (FSDP 8 and 128) these
    reproduce 82.07 and 67.07 GiB reserved against the published 82.4 and 67.0 (research note, tests/engines)."""
    if key != "torch":
        return np.zeros(np.broadcast(np.asarray(grads_absent), np.asarray(gathered), np.asarray(logits)).shape)
    return np.asarray(grads_absent, dtype=float) + np.asarray(gathered, dtype=float) + 2.0 * np.asarray(logits)


CONTEXT = 0.5 * (1 << 30)  # CUDA context with lazy module loading: ~300 MiB plus cuDNN/cuBLAS/NCCL module images
NCCL_PER_GROUP = 0.5 * (1 << 30)  # one communicator's FIFOs: ~9.2 MiB per peer connection and channel (Simple 4 MiB +
# LL 0.5 MiB + LL128 4.7 MiB, NCCL src/init.cc computeBuffSizes) x 2 ring peers x up to 32 channels on NVLink


def groups(t=1, p=1, d=1, cp=1, ep=1) -> np.ndarray:
    """How many process groups with more than one rank a layout opens (tensor, pipeline, data, context, expert
    parallel): each is an NCCL communicator with buffers of its own."""
    return sum((np.asarray(x) > 1).astype(float) for x in (t, p, d, cp, ep))


def outside_bytes(key: str, n_groups) -> np.ndarray:
    """What the process holds outside PyTorch's allocator, which torch's memory counters never see but the device
    does: the CUDA context and each NCCL communicator's buffers. An estimate from the sources named at CONTEXT and
    NCCL_PER_GROUP, not fitted: no measured run in the validation set reported the device's used memory. None in
    the textbook accounting."""
    n_groups = np.asarray(n_groups, dtype=float)
    if key == "textbook":
        return np.zeros(n_groups.shape)
    return CONTEXT + NCCL_PER_GROUP * n_groups
