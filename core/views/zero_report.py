"""The ZeRO page's inputs as the one memory function's records, and the per-stage report `python -m core zero` and
the page both print.

A ZeRO-page parameter set (core.params.memory.ZeroParams) plus the model's shape (`Shape`: a named model, or the
custom one typed on the page) and the activation inputs (`ActInputs`) become a core.memory.per_gpu.MemoryConfig
(`memory_config`): the same records the planner fills for each candidate, so a planner row and the ZeRO page it
links to count the same parts with the same function. `build` is the per-stage breakdown of the model states
(the ZeRO paper's accounting, with offload and communication); core.views.zero adds what the page draws around it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np
import pandas as pd

from core.cost import comm
from core.errors import InputError
from core.memory import deepspeed_estimate, experts, fit, per_gpu
from core.memory import states as memory
from core.memory.offload import PARAM_OFFLOADS, nvme_traffic, supported
from core.model import counts, presets
from core.model.blocks import MlaConfig, MoeConfig
from core.params import zero_page
from core.params.memory import RECOMPUTE_MODULES_DEFAULT, ZeroParams
from core.pipeline.schedules import chunks_per_device
from core.units import GB, TB


@dataclass(frozen=True)
class Shape:
    """What the memory function needs of the model beyond Psi: a named model (`model`, its own architecture) or the
    custom one typed on the page (the ZeRO paper's 7.5B shape to start with)."""

    hidden: int = zero_page.CUSTOM["hidden"].default
    heads: int = zero_page.CUSTOM["heads"].default
    layers: int = zero_page.CUSTOM["layers"].default
    seq: int = zero_page.CUSTOM_SEQ
    vocab: int = zero_page.CUSTOM["vocab"].default
    block_params: float = zero_page.CUSTOM["block_params"].default
    kv_heads: int = zero_page.CUSTOM["kv_heads"].default
    head_dim: int = zero_page.CUSTOM["head_dim"].default  # 0 = hidden / heads
    ffn: int = zero_page.CUSTOM["ffn"].default
    mlp: str = zero_page.CUSTOM["mlp"].default
    tied: bool = zero_page.CUSTOM["tied"].default
    flash: bool = zero_page.CUSTOM["flash"].default
    parallel: bool = False  # parallel attention + MLP blocks
    qk_norm: bool = False  # q and k normalised per head
    experts: int = 0  # the custom model's MoE shape (zero_page.MOE), used when expert_params > 0
    top_k: int = zero_page.MOE["top_k"].default
    shared_experts: int = 0
    expert_ffn: int = 0
    dense_layers: int = 0
    mtp_layers: int = 0  # multi-token prediction depths on the last stage
    mtp_params: float = 0.0  # their parameters outside routed experts
    kv_lora_rank: int = 0  # multi-head latent attention (zero_page.MLA), on when > 0
    q_lora_rank: int = 0
    qk_head_dim: int = zero_page.MLA["qk_head_dim"].default
    qk_rope_dim: int = zero_page.MLA["qk_rope_dim"].default
    v_head_dim: int = zero_page.MLA["v_head_dim"].default
    model: str = "custom"  # a preset key: its own architecture (seq may differ: trained at another length)


def preset_shape(key: str, seq: int = 0) -> Shape:
    """A named model's shape (at its own sequence length, or `seq`)."""
    m = presets.model(key)
    return Shape(hidden=m.hidden, heads=m.heads, layers=m.layers, seq=seq or m.seq, vocab=m.vocab,
                 block_params=counts.largest_layer_params(m), kv_heads=m.kv_heads, ffn=m.ffn, tied=m.tied,
                 flash=m.flash_attention, model=key, head_dim=m.head_dim if m.decoupled_heads else 0, mlp=m.mlp,
                 parallel=m.parallel_block, qk_norm=m.qk_norm)


def custom_shape(values) -> Shape:
    """The custom model's shape from the page's inputs (by URL key); seq 0 is the paper model's 2,048."""
    names = {f.name for f in fields(Shape)} - {"model"}
    shape = Shape(**{k: values[k] for k in names if k in values})
    return replace(shape, seq=values.get("seq") or zero_page.CUSTOM_SEQ)


@dataclass(frozen=True)
class ActInputs:
    micro_batch_size: int
    sequence_parallel: bool
    recompute: str
    schedule: str
    m: int
    v: int
    cp: int = 1  # context parallelism: every activation term / cp
    seq: int = 0  # 0: the model's own (the shape's)
    moe_capacity: float = 1.0
    cp_comm: str = "p2p"  # the K/V exchange of context parallelism (its transient buffers)
    compile: bool = False  # torch.compile on the blocks (the PyTorch accounting)
    repeat_kv: bool = False  # the PyTorch accounting's attention widens K and V to every query head
    sac_attention: bool = True  # the PyTorch accounting's per-op recompute saves the attention's output
    loss: str = "auto"  # the cross-entropy kernel (core.frameworks.loss)
    recompute_layers: int = 0  # full recompute on the first N layers of each stage only (0: every layer)
    grouped_gemm: bool = True  # Megatron-LM MoE layers through Transformer Engine's grouped GEMM
    tp_comm_overlap: bool = False  # Megatron-LM's TP communication overlap (its GEMMs' workspaces)
    recompute_modules: tuple = RECOMPUTE_MODULES_DEFAULT  # what Megatron-LM's selective recompute re-runs


def model_memory(q: ZeroParams, shape: Shape) -> per_gpu.ModelMemory:
    """The model's memory record: a named model's architecture (its split as chosen: even, or the embedding on the
    end stages), or the custom Psi with its shape."""
    ends = q.split == "embedding-on-ends"
    embedding = float(q.embedding) if ends else 0.0
    if shape.model != "custom":
        model = presets.model(shape.model).with_seq(shape.seq)
        mem = per_gpu.ModelMemory.of(model, embedding=(embedding or float(model.vocab * model.hidden)) if ends else 0.0)
        # the counts the parameter set states (a preset's own, unless a caller asks about another Psi on its shape)
        mem = replace(mem, dense_params=float(q.params - q.expert_params), expert_params=float(q.expert_params))
        return replace(mem, largest_module=float(q.largest_layer)) if q.largest_layer else mem
    moe = None
    if q.expert_params and shape.experts:
        moe = MoeConfig(experts=shape.experts, top_k=min(shape.top_k, shape.experts), shared=shape.shared_experts,
                        expert_ffn=shape.expert_ffn, first_dense=min(shape.dense_layers, shape.layers - 1))
    dense = float(q.params - q.expert_params)
    matrices = 1 if shape.tied else 2
    share = (dense - embedding * matrices) / dense if dense > embedding * matrices else 1.0
    return per_gpu.ModelMemory(
        dense_params=dense, layers=shape.layers, hidden=shape.hidden, heads=shape.heads, seq=shape.seq,
        vocab=shape.vocab, kv_heads=shape.kv_heads, ffn=shape.ffn, embedding=float(embedding), tied=shape.tied,
        layer_params=float(shape.block_params), largest_module=float(q.largest_layer),
        flash_attention=shape.flash, gemm_share=share, expert_params=float(q.expert_params), moe=moe,
        moe_layers=max(shape.layers - shape.dense_layers, 1) if q.expert_params else 0, head_dim=shape.head_dim,
        mtp_layers=shape.mtp_layers, mtp_dense=float(shape.mtp_params) if shape.mtp_layers else 0.0,
        mlp=shape.mlp, mla=_mla(shape), parallel_block=shape.parallel, qk_norm=shape.qk_norm,
        **_block_style(shape.mlp))


def _mla(shape: Shape) -> MlaConfig | None:
    """The custom model's latent attention, as the planner's custom model has it (None: plain attention)."""
    if not shape.kv_lora_rank:
        return None
    return MlaConfig(kv_lora_rank=shape.kv_lora_rank, qk_head_dim=shape.qk_head_dim, qk_rope_dim=shape.qk_rope_dim,
                     v_head_dim=shape.v_head_dim, q_lora_rank=shape.q_lora_rank)


def _block_style(mlp: str) -> dict:
    """The custom model's norm, dropout and positions as the planner's custom model has them (core.model.presets)."""
    f = presets.custom_family(mlp)
    return {"norm": f["norm"], "dropout": f["dropout"], "rope": f["position"] == "rope"}


def bytes_per_param(q: ZeroParams) -> memory.BytesPerParam:
    """The optimizer / precision preset; FP8 trains in mixed precision (its one-byte weights: core.memory.fp8)."""
    return memory.preset(q.optimizer, "mixed" if q.precision == "fp8" else q.precision, q.k)


def stage_modes(q: ZeroParams) -> tuple[str, ...]:
    """The offload each ZeRO stage can use (core.memory.offload.supported), DP to ZeRO-3."""
    return tuple(supported(q.offload, s) for s in range(4))


def memory_config(q: ZeroParams, shape: Shape, act: ActInputs | None = None,
                  inflight: per_gpu.InFlight | None = None) -> per_gpu.MemoryConfig:
    """The four ZeRO stages of this parameter set as one MemoryConfig (the layout's zero is 0, 1, 2, 3)."""
    a = act or ActInputs(1, False, "none", "1f1b", 1, 1)
    if q.nd % a.cp:
        raise InputError(f"cp = {a.cp} must divide N_d = {q.nd}: the dense weights' ZeRO group is d x cp ranks")
    mem = model_memory(q, replace(shape, seq=a.seq or shape.seq))
    layout = per_gpu.Layout(t=q.t, p=q.p, d=q.nd // a.cp, cp=a.cp, ep=q.ep, etp=q.etp,
                            chunks=chunks_per_device(a.schedule, a.v), zero=np.arange(4),
                            offload=np.array(stage_modes(q), dtype=object), reshard=q.reshard,
                            ends_in_split=q.ends_in_split and q.split == "embedding-on-ends")
    training = per_gpu.Training(micro_batch_size=a.micro_batch_size, sequence_parallel=a.sequence_parallel,
                                recompute=a.recompute, fp8=q.precision == "fp8", bytes_per_param=bytes_per_param(q),
                                moe_capacity=a.moe_capacity, cp_comm=a.cp_comm, micro_batches=a.m,
                                compiled=a.compile, repeat_kv=a.repeat_kv, sac_attention=a.sac_attention,
                                grad_dtype=q.grad_dtype, optimizer_dtype=q.optimizer_dtype,
                                loss=a.loss, recompute_layers=a.recompute_layers, tp_overlap=a.tp_comm_overlap,
                                grouped_gemm=a.grouped_gemm, recompute_modules=a.recompute_modules)
    return per_gpu.MemoryConfig(mem, layout, training, inflight or per_gpu.InFlight(), accounting=q.accounting)


@dataclass(frozen=True)
class ZeroReport:
    inputs: ZeroParams
    psi_rank: float  # parameters per GPU before ZeRO (after the t x p split, most loaded stage; dense part)
    bytes_per_param: memory.BytesPerParam
    usable: float  # bytes per GPU for model states (and activations, which this report leaves out)
    stages: dict[str, dict]  # STAGE_KEYS -> row
    expert_rank: float = 0.0  # routed-expert parameters per GPU (/ ep etp); their ZeRO group is expert_group
    expert_group: float = 1.0
    states: per_gpu.GpuMemory | None = None  # the memory function's answer, the four stages as one array
    dense_kw: dict | None = None  # bytes per dense parameter as the memory function counted them (FP8 weights)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"key": k} | row for k, row in self.stages.items()])

    def as_json(self) -> dict:
        return {k: {f: _plain(v) for f, v in row.items()} for k, row in self.stages.items()}


def _plain(value):
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def selected_stages(stage: str) -> tuple[int, ...]:
    return tuple(range(4)) if stage == "all" else (int(stage),)


def check(q: ZeroParams) -> None:
    """What ZeroParams cannot check field by field: the split, the experts' group, the GPU count."""
    fit.check_gpu_count(q.t, q.p, q.nd, q.gpus)
    if q.split == "embedding-on-ends" and not q.embedding:
        raise InputError("embedding: the embedding-on-ends split needs the embedding size (vocabulary x hidden)")
    if q.expert_params >= q.params:
        raise InputError(f"expert_params: {q.expert_params:,} must be less than Psi = {q.params:,} (attention, "
                         "embeddings and norms are not experts)")
    if q.ep > 1 and not q.expert_params:
        raise InputError(f"ep = {q.ep}: expert parallelism needs routed-expert parameters (expert_params > 0)")
    etp = q.etp or q.t
    if (q.t * q.nd) % (q.ep * etp):
        raise InputError(f"ep x etp = {q.ep} x {etp} must divide t x N_d = {q.t} x {q.nd} (with etp = t: ep must "
                         "divide N_d; Megatron folds expert parallelism into the tensor- and data-parallel ranks)")
    if q.split == "embedding-on-ends" and q.embedding > q.params - q.expert_params:
        raise InputError("embedding: cannot exceed the dense parameters Psi - expert_params")


def build(q: ZeroParams, shape: Shape | None = None) -> ZeroReport:
    """Per-stage breakdown of the model states: components, GPU/CPU/NVMe placement with offload, communication,
    fit, smallest N_d (core.memory.per_gpu, the four stages at once). With routed experts (expert_params > 0) the
    dense part is split and sharded as before and the experts over ep x etp, sharded over expert-dp; `expert_*`
    columns hold their bytes."""
    check(q)
    shape = shape or Shape()
    cfg = memory_config(q, shape)
    if cfg.model.dense_params / (q.t * q.p) < 1:  # say it in the inputs the user typed, not in a derived count
        raise InputError(f"t x p = {q.t:,} x {q.p:,} = {q.t * q.p:,} ranks split Psi = {cfg.model.dense_params:,.0f} "
                         f"dense parameters into less than one per rank; lower t or p, or raise params")
    chosen = selected_stages(q.stage)
    if q.offload != "none" and len(chosen) == 1:
        per_gpu.model_state_parts(replace(cfg, layout=replace(cfg.layout, zero=chosen[0], offload=q.offload)))
    got = per_gpu.model_state_parts(cfg)
    bpp = cfg.training.bytes_per_param
    usable = float(fit.usable_bytes(q.compared_gb, q.reserve, q.reserve_frac))
    psi, expert_rank, group = float(got.psi_rank[0]), float(got.expert_rank[0]), float(got.expert_group[0])
    parts = memory.model_states(psi, q.nd, np.arange(4), **per_gpu.dense_bytes(cfg))
    stages = {memory.STAGE_KEYS[s]: _row(q, cfg, got, parts, s, usable) for s in chosen}
    return ZeroReport(q, psi, bpp, usable, stages, expert_rank, group, got, per_gpu.dense_bytes(cfg))


def _row(q: ZeroParams, cfg, got: per_gpu.GpuMemory, parts, s: int, usable: float) -> dict:
    """One ZeRO stage of the report."""
    mode = stage_modes(q)[s]
    dense_kw = per_gpu.dense_bytes(cfg)
    psi, expert_rank, group = float(got.psi_rank[s]), float(got.expert_rank[s]), float(got.expert_group[s])
    gpu = float(got.states_on_gpu[s] + got.working[s])
    sent = float(comm.zero_comm_bytes(psi, q.nd, s, dense_kw["param_bytes"]))
    if expert_rank:
        sent += float(comm.zero_comm_bytes(expert_rank, group, s, dense_kw["param_bytes"]))
    nvme = float(got.nvme[s]) * q.gpus_per_node
    total = float(got.states[s])
    dp_total = float(got.states[0])
    row = {
        "params": float(parts.params[s]), "grads": float(parts.grads[s]), "optimizer": float(parts.optimizer[s]),
        "expert_params": float(got.expert_params[s]), "expert_grads": float(got.expert_grads[s]),
        "expert_optimizer": float(got.expert_optimizer[s]), "expert_total": float(got.expert_states[s]),
        "total": total, "offload": mode, "gpu": gpu, "cpu_per_node": float(got.cpu[s]) * q.gpus_per_node,
        "nvme_per_node": nvme, "nvme_fits": bool(nvme <= q.nvme_tb * TB),
        "nvme_seconds": _nvme_seconds(q, psi, mode, dense_kw),
        "floor": float(memory.floor_bytes(psi, s, **dense_kw))
        + float(memory.split_coefficients(s, **per_gpu.expert_bytes(cfg))[0]) * expert_rank,
        "reduction_vs_dp": dp_total / total,
        "comm_psi": float(comm.zero_volume_multiple(s)), "comm_bytes": sent,
        "comm_seconds": _comm_seconds(q, psi, expert_rank, group, s, dense_kw["param_bytes"]),
        "usable": usable, "headroom": usable - gpu, "fits": bool(gpu <= usable),
        "smallest_nd": smallest_nd(q, psi, expert_rank, s, usable, dense_kw) if mode == "none" else float("nan"),
    }
    if q.deepspeed and s in (2, 3):
        row |= _deepspeed(q, s)
    return row


def smallest_nd(q: ZeroParams, psi: float, expert_rank: float, stage: int, usable: float, kw: dict,
                other: float = 0.0) -> float:
    """Smallest N_d at which this stage's states (and `other` bytes) fit; inf when none does."""
    if expert_rank:
        ep_share = q.ep * (q.etp or q.t) / q.t  # the experts' ZeRO group is N_d / ep_share
        return float(experts.min_nd(psi, expert_rank, q.ep, stage, usable, other_bytes=other, ep_share=ep_share,
                                    **kw))
    return float(fit.min_nd(psi, stage, usable, other_bytes=other, **kw))


def _comm_seconds(q: ZeroParams, psi: float, expert_rank: float, group: float, stage: int,
                  bytes_per_value: float) -> float:
    """The stage's collectives per step as NCCL runs them (core.cost.comm.zero_comm_seconds, the communication
    table's own numbers), the routed experts' over their ZeRO group beside the dense weights'."""
    out = comm.zero_comm_seconds(psi, q.nd, stage, q.bw, bytes_per_value)
    if expert_rank:
        out += comm.zero_comm_seconds(expert_rank, int(group), stage, q.bw, bytes_per_value)
    return out


def _nvme_seconds(q: ZeroParams, psi: float, mode: str, kw: dict) -> float:
    """Time per step (one micro-batch) to move every rank's NVMe traffic through the node's drives."""
    if mode != "nvme":
        return 0.0
    traffic = nvme_traffic(psi, q.nd, kw["k"], kw["param_bytes"]) * min(q.gpus_per_node, q.nd)
    return float(traffic / (q.nvme_bw * GB))


def _deepspeed(q: ZeroParams, stage: int) -> dict:
    """DeepSpeed's estimate for the same N_d, split into nodes of gpus_per_node (it knows nothing of t, p)."""
    per_node = min(q.gpus_per_node, q.nd)
    if q.nd % per_node:
        raise InputError(f"deepspeed: N_d = {q.nd} is not a whole number of {per_node}-GPU nodes")
    nodes = q.nd // per_node
    offload = q.offload != "none"
    formula = "4 x largest layer + 18 Psi / GPUs, DeepSpeed's code (stage3.py)"
    if stage == 2:
        est = deepspeed_estimate.zero2(q.params, per_node, nodes, offload,
                                       revision=deepspeed_estimate.FORMULA_REVISION[q.deepspeed_zero2])
        formula = deepspeed_estimate.ZERO2_FORMULA[q.deepspeed_zero2]
    else:
        est = deepspeed_estimate.zero3(q.params, q.largest_layer, per_node, nodes, offload,
                                       q.offload in PARAM_OFFLOADS, True)
    return {"deepspeed_gpu": float(est["gpu"]), "deepspeed_cpu_per_node": float(est["cpu"]),
            "deepspeed_formula": formula}
