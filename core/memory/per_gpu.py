"""The one memory function: a configuration's bytes on one GPU, with its parts.

    per_gpu(MemoryConfig(model=ModelMemory.of(model), layout=Layout(t=8, p=4, d=2, zero=1), ...))

Every page and command that shows memory for a configuration asks this function (the planner, vectorised over its
candidates, through core.planner.rank_memory; the ZeRO page and `python -m core zero` through core.views.zero;
`python -m core activations` for its activation part), so the planner's row and the ZeRO page it links to show
one number made of the same parts:

- parameters, gradients, optimizer state on the GPU of the most loaded pipeline stage: the dense weights split
  over t x p (the embedding on the first stage, the output layer on the last, an untied one as its own matrix),
  their states under ZeRO over the d x cp ranks (Megatron's dp-cp group), with offload (core.memory.offload);
  FP8 GEMM weights take one byte (core.memory.fp8);
- the routed experts of a mixture-of-experts model over ep x etp, their states sharded over expert-dp
  (core.memory.experts);
- the working set: ZeRO-3's gathered layers (one transformer block, the next prefetched, as FSDP's per-block
  wrap: core.memory.fsdp; the whole stage when it is not resharded after the forward; with parameters offloaded
  ZeRO-Infinity streams the largest module instead) and ZeRO-3's gathered experts (one MoE layer's local experts,
  the next prefetched);
- activations of each end stage's device for the micro-batches it holds (the pipeline simulator's counts, taken as
  inputs; the embedding and the output layer for their own stage's micro-batches; a middle device too where the
  ends count in the split and the end stages hold fewer layers), with flash attention, sequence parallelism,
  recomputation, context parallelism, FP8, the micro-batch size, the MoE layers' expert activations and ring
  attention's buffers (core.memory.device_activations, on core.memory.activations, core.memory.experts and
  core.memory.context_parallel); the fullest device is the one reported.

Every field of the layout, the training settings and the in-flight counts may be an array (they broadcast), so the
planner asks once for 100,000 candidates; the ZeRO page asks with the four ZeRO stages as one array.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from core import validate
from core.frameworks import accounting
from core.frameworks import loss as loss_of
from core.memory import device_activations
from core.memory import experts as moe
from core.memory import fp8 as fp8_bytes
from core.memory import framework_terms as terms
from core.memory.fsdp import unsharded
from core.memory.offload import PARAM_OFFLOADS, placement
from core.memory.states import ADAM_MIXED, COMPONENTS, BytesPerParam, model_states, shard_group
from core.memory.states import params_per_rank as split_params
from core.model import counts, stage_split
from core.model.blocks import MlaConfig, MoeConfig
from core.params.memory import MAX_PSI, RECOMPUTE_MODULES_DEFAULT


@dataclass(frozen=True)
class ModelMemory:
    """What memory needs of a model: its parameters by kind and the shape its activations follow.

    `ModelMemory.of(config)` reads a core.model ModelConfig (a preset, or the planner's custom model); the ZeRO
    page's own custom model (Psi and a shape) is built field by field. expert_params > 0 over moe_layers makes a
    mixture-of-experts model (its other parameters are dense_params); `moe`, the router's shape, adds the experts'
    activations.
    """

    dense_params: float  # everything that is not a routed expert: attention, dense and shared MLPs, embeddings
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int = 0  # 0: no output layer in the activations
    kv_heads: int = 0  # 0: as many as heads
    ffn: int = 0  # 0: 4 h
    embedding: float = 0.0  # parameters of one V x h matrix, placed on the end stages; 0: split evenly
    tied: bool = True  # the output layer is a copy of the embedding (else a matrix of its own)
    layer_params: float = 0.0  # ZeRO-3's gathered unit: one transformer block's dense parameters (all t ranks)
    largest_module: float = 0.0  # ZeRO-Infinity's streamed unit: the largest module's parameters (0: nothing)
    flash_attention: bool = False
    parallel_block: bool = False  # parallel attention + MLP blocks (GPT-J, GPT-NeoX, PaLM): fewer kept inputs
    gemm_share: float = 1.0  # share of the dense parameters that are GEMM weights (one byte under FP8)
    expert_params: float = 0.0  # routed-expert parameters of the whole model
    moe: MoeConfig | None = None
    moe_layers: int = 0
    head_dim: int = 0  # channels per attention head; 0: hidden / heads
    mtp_layers: int = 0  # multi-token prediction depths on the last stage (core.model.counts.mtp_params)
    mtp_dense: float = 0.0  # their parameters outside the routed experts (whose experts are MoE layers' own size)
    mlp: str = "gelu"  # the block's architecture, as the activations' accountings read it (core.frameworks)
    norm: str = "layernorm"
    dropout: bool = True
    rope: bool = False
    mla: MlaConfig | None = None  # multi-head latent attention (its latents and head dims set what a layer keeps)
    qk_norm: bool = False  # q and k normalised per head: their norms' inputs and statistics kept

    def __post_init__(self) -> None:
        for name in ("dense_params", "embedding", "layer_params", "largest_module", "expert_params", "mtp_dense"):
            validate.number(name, getattr(self, name), 0, MAX_PSI)
        if not self.kv_heads:
            object.__setattr__(self, "kv_heads", self.heads)
        if not self.ffn:
            object.__setattr__(self, "ffn", 4 * self.hidden)
        if not self.layer_params:
            object.__setattr__(self, "layer_params", block_params(self.dense_params, self.embedding, self.tied,
                                                                  self.layers))

    @property
    def attn_width(self) -> int:
        """heads x head size, or 0 where the head size is hidden / heads (core.memory.activations.Shape)."""
        return self.heads * self.head_dim if self.head_dim else 0

    @property
    def is_moe(self) -> bool:
        """Routed experts to place (their activations need `moe`, the router's shape, too)."""
        return self.expert_params > 0 and self.moe_layers > 0

    @classmethod
    def of(cls, model, embedding: float | None = None) -> ModelMemory:
        """A core.model ModelConfig's memory shape; embedding = 0 splits it evenly over t x p (the ZeRO page's
        'even' split), None places its V x h embedding on the end stages (the planner's placement)."""
        vh = float(model.vocab * model.hidden)
        dense = float(model.dense_params)
        return cls(dense_params=dense, layers=model.layers, hidden=model.hidden, heads=model.heads, seq=model.seq,
                   vocab=model.vocab, kv_heads=model.kv_heads, ffn=model.ffn,
                   embedding=vh if embedding is None else float(embedding), tied=model.tied,
                   layer_params=block_params(dense, vh, model.tied, model.layers),
                   largest_module=float(counts.largest_module_params(model)),
                   flash_attention=model.flash_attention, parallel_block=model.parallel_block,
                   gemm_share=fp8_bytes.gemm_share(model),
                   expert_params=float(model.expert_params), moe=model.moe, moe_layers=model.moe_layers,
                   head_dim=model.head_dim if model.decoupled_heads else 0, mtp_layers=model.mtp_layers,
                   mtp_dense=counts.mtp_params(model)["dense"], mlp=model.mlp, norm=model.norm,
                   dropout=model.dropout, rope=model.position == "rope", mla=model.mla, qk_norm=model.qk_norm)


def block_params(dense, embedding, tied: bool, layers: int) -> float:
    """One transformer block's dense parameters: what is not embedding or output layer, over the layers (all of
    it when the embeddings would take more than the count)."""
    body = float(dense) - float(embedding) * (1 if tied else 2)
    return (body if body > 0 else float(dense)) / layers


@dataclass(frozen=True)
class Layout:
    """How the ranks are split (scalars or arrays): G = t x p x d x cp; ep x etp regroup the t x d x cp ranks of a
    stage for the MoE layers (etp 0: = t, Megatron's default); chunks per device (interleaved v, V shapes 2)."""

    t: object = 1
    p: object = 1
    d: object = 1
    cp: object = 1
    ep: object = 1
    etp: object = 0
    chunks: object = 1
    zero: object = 0  # ZeRO stage 0-3
    offload: object = "none"  # core.params.memory.OFFLOADS, one name or an array of names
    reshard: object = True  # ZeRO-3 frees the gathered parameters after the forward (FSDP reshard_after_forward)
    ends_in_split: object = False  # the embedding, loss and each MTP depth take a layer slot (core.model.stage_split)
    replicate: object = 1  # hybrid sharding (HSDP): ZeRO shards within d x cp / replicate ranks, copies across the rest

    def shard_group(self) -> np.ndarray:
        """The ranks ZeRO shards the dense weights' states over: d x cp, or its share under hybrid sharding."""
        return shard_group(self.d, self.cp, self.replicate)


@dataclass(frozen=True)
class Training:
    micro_batch_size: object = 1
    sequence_parallel: object = False
    recompute: object = "none"
    fp8: bool = False  # FP8 GEMMs: one-byte GEMM weights and linear-layer inputs
    bytes_per_param: BytesPerParam = ADAM_MIXED  # optimizer and precision (FP8 changes the weights' bytes)
    moe_capacity: float = 1.0
    cp_comm: str = "p2p"  # context parallelism's K/V exchange: the ring's buffers or the whole gathered sequence
    micro_batches: object = 1  # m per step: whether earlier micro-batches' gradients exist at the peak (FSDP2)
    compiled: bool = False  # torch.compile on the blocks (PyTorch's accounting keeps what the compiled block keeps)
    repeat_kv: bool = False  # PyTorch's attention widens K and V to every query head (torchtitan before 2026)
    sac_attention: bool = True  # PyTorch's per-op selective recompute saves the attention's output
    grad_dtype: str = "auto"  # the gradient buffer: the framework's own, or fp32 / bf16 / fp16
    fp16: bool = False  # fp16 weights rather than bf16 (Megatron-LM then keeps 16-bit gradients by default)
    optimizer_dtype: str = "fp32"  # Adam's moments (and Megatron's master remainders) in fp32 or bf16
    loss: str = "auto"  # the cross-entropy kernel (core.frameworks: upcast, compiled, fused)
    recompute_layers: object = 0  # full recompute on the first N layers of each stage (chunk) only; 0 = every layer
    tp_overlap: object = False  # TP communication overlap (Megatron-LM --tp-comm-overlap): its GEMMs' workspaces
    grouped_gemm: bool = True  # MoE layers run Transformer Engine's grouped GEMM (Megatron-LM --moe-grouped-gemm)
    recompute_modules: tuple = RECOMPUTE_MODULES_DEFAULT  # what Megatron-LM's selective recompute re-runs


@dataclass(frozen=True)
class InFlight:
    """Micro-batches each end stage's device holds at its peak (the pipeline simulator's counts, in units of a
    device's share of layers), and whether the last stage sits on the first device (V-shaped schedules), which
    then holds both ends; `middle`, the most any other device holds (0: not counted), matters where the end stages
    are lighter (Layout.ends_in_split). The end stages' own counts size the embedding and the output layer: a
    device running several chunks holds its last stage's logits only for that stage's micro-batches."""

    first: object = 1.0
    last: object = 1.0
    last_on_first: object = False
    middle: object = 0.0
    first_stage: object = None  # micro-batches the first stage itself holds (None: `first`, one stage per device)
    last_stage: object = None  # ... the last stage itself (None: `last`): its output layer's and loss's share


@dataclass(frozen=True)
class MemoryConfig:
    model: ModelMemory
    layout: Layout = field(default_factory=Layout)
    training: Training = field(default_factory=Training)
    inflight: InFlight = field(default_factory=InFlight)
    accounting: str = "textbook"  # whose bytes: the ZeRO paper and Korthikanti's, or a framework's (core.frameworks)


@dataclass(frozen=True)
class GpuMemory:
    """Bytes on one GPU by part (arrays shaped like the layout's broadcast)."""

    params: np.ndarray  # dense parameters, gradients and optimizer state left on the GPU
    grads: np.ndarray
    optimizer: np.ndarray
    expert_params: np.ndarray  # the routed experts' share, on the GPU
    expert_grads: np.ndarray
    expert_optimizer: np.ndarray
    working: np.ndarray  # ZeRO-Infinity's streamed module, when the parameters are offloaded
    gathered: np.ndarray  # ZeRO-3's gathered blocks (one, the next prefetched) and one MoE layer's local experts
    activations: np.ndarray
    worst_stage: np.ndarray  # "first" or "last": the end stage whose activations are counted
    states: np.ndarray  # every model-state byte of this GPU's share, wherever it lives (GPU, CPU, NVMe)
    expert_states: np.ndarray
    cpu: np.ndarray  # model-state bytes offloaded to CPU memory, per GPU
    nvme: np.ndarray  # ... and to NVMe, per GPU
    psi_rank: np.ndarray  # dense parameters on this GPU, before ZeRO
    expert_rank: np.ndarray  # routed-expert parameters on this GPU, before ZeRO
    expert_group: np.ndarray  # the ranks ZeRO shards the experts' states over
    buffers: np.ndarray = 0.0  # the framework's workspaces and reduce buckets (core.memory.framework_terms)
    step: np.ndarray = 0.0  # what the optimizer step's moment holds beyond the activation peak's (0 when less)
    step_moment: np.ndarray = 0.0  # every byte the optimizer step holds (model states, temporaries, buffers)
    pools: np.ndarray = 0.0  # free bytes the allocator holds in pools the peak cannot use (framework_terms.side_pools)
    reserve: np.ndarray = 0.0  # the caching allocator's reserve over the peak allocated
    outside: np.ndarray = 0.0  # CUDA context and NCCL buffers, outside PyTorch's allocator

    @property
    def states_on_gpu(self) -> np.ndarray:
        return sum(getattr(self, c) + getattr(self, f"expert_{c}") for c in COMPONENTS)

    @property
    def allocated(self) -> np.ndarray:
        """Peak bytes of tensors (torch.cuda.max_memory_allocated)."""
        return self.states_on_gpu + self.working + self.gathered + self.activations + self.buffers + self.step

    @property
    def reserved(self) -> np.ndarray:
        """Peak bytes the caching allocator holds (torch.cuda.max_memory_reserved)."""
        return self.allocated + self.reserve

    @property
    def total(self) -> np.ndarray:
        """The device's bytes in use (nvidia-smi): what is compared with the GPU's memory."""
        return self.reserved + self.outside


def per_gpu(cfg: MemoryConfig) -> GpuMemory:
    """A configuration's bytes on one GPU: model states (dense and experts, after offload), the working set, the
    fullest device's activations, and the framework's buffers, allocator reserve and process overhead."""
    s = model_state_parts(cfg)
    acts, worst = device_activations.activation_bytes(cfg)
    shape = np.broadcast(s.psi_rank, acts).shape
    parts = {f.name: np.broadcast_to(getattr(s, f.name), shape) for f in fields(GpuMemory)}
    peak = s.states_on_gpu + s.working + s.gathered + s.buffers + acts
    lay = cfg.layout
    groups = terms.groups(lay.t, lay.p, lay.d, lay.cp, lay.ep)
    extra = device_extras(cfg.accounting, peak, s.step_moment, s.pools, groups)
    return GpuMemory(**parts | {"activations": np.broadcast_to(acts, shape),
                                "worst_stage": np.broadcast_to(worst, shape)} | extra)


def device_extras(key: str, peak, step_moment, pools=0.0, n_groups=0) -> dict[str, np.ndarray]:
    """From the activation peak's tensors, the optimizer step's moment and the allocator's side pools (bytes): the
    step's excess over the activation peak, the allocator's reserve (segments are never given back, so the reserved
    peak is the larger of the two moments' own: the activation peak with the side pools the framework's streams
    hold, or the step; each with the framework's fitted share of what is allocated), and what the process holds
    outside the allocator with `n_groups` NCCL communicators (core.memory.framework_terms; all zero in the textbook
    accounting)."""
    peak, step_moment, pools = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (peak, step_moment, pools)))
    allocated = np.maximum(peak, step_moment)
    share = 1.0 + terms.reserve_share(key)
    reserved = np.maximum(peak * share + pools, step_moment * share)
    return {"step": allocated - peak, "reserve": reserved - allocated,
            "outside": np.broadcast_to(terms.outside_bytes(key, n_groups), allocated.shape)}


# --------------------------------------------------------------------------------------------- model states

def dense_split(m: ModelMemory, t, p, chunks=1, ends_in_split=False, v_shape=False) -> tuple[np.ndarray, np.ndarray]:
    """(dense parameters on one GPU of the most loaded stage, one gathered block per TP rank). The V x h embedding
    sits on the first stage, the output layer on the last (a tied copy, or its own matrix, which leaves the
    body); a count smaller than the embeddings is split evenly. Where the ends count in the split
    (`ends_in_split`, p > 1) the stages hold whole layers (core.model.stage_split) and the fullest of the first
    device (embedding), a middle one and the last stage's (output layer, prediction depths) is taken. A V-shaped
    schedule (`v_shape`, p > 1) runs the last stage on the first device, which then holds the output layer beside
    the embedding."""
    t, p = np.asarray(t), np.asarray(p)
    matrices = 1 if m.tied else 2
    layer = np.asarray(m.layer_params / t, dtype=float)
    if m.embedding == 0 or m.embedding * matrices >= m.dense_params:
        return np.asarray(m.dense_params / (t * p), dtype=float), layer
    body = np.where((p > 1) & (not m.tied), m.dense_params - m.embedding, m.dense_params)
    rank = np.asarray(split_params(body, t, p, "embedding-on-ends", m.embedding), dtype=float)
    both = np.asarray(v_shape, dtype=bool) & (p > 1)
    rank = rank + (_mtp_dense(m, p) + np.where(both, m.embedding, 0.0)) / t
    ends = np.asarray(ends_in_split, dtype=bool) & (p > 1)
    if not ends.any():
        return rank, layer
    first, mid, last = stage_split.device_layers(m.layers, p, chunks, m.mtp_layers, True, both)
    block = m.layer_params
    output = m.embedding + _mtp_dense(m, p)  # the output layer (tied copy or own matrix) and prediction depths
    fullest = np.maximum.reduce([m.embedding + first * block + np.where(both, output, 0.0), mid * block,
                                 last * block + output])
    return np.where(ends, fullest / t, rank), layer


def _mtp_dense(m: ModelMemory, p) -> np.ndarray:
    """What multi-token prediction adds to the last stage's dense parameters: its layers and projections, and
    under pipelining with an untied output layer the last stage's own copy of the embedding, which Megatron-Core
    builds wherever the MTP block runs (GPTModel: embedding if pre_process or mtp_process)."""
    if not m.mtp_layers:
        return np.zeros(np.shape(p))
    copy = m.embedding if (m.embedding and not m.tied) else 0.0
    return m.mtp_dense + np.where(np.asarray(p) > 1, copy, 0.0)


def dense_bytes(cfg: MemoryConfig) -> dict:
    """Bytes per parameter of the dense part as the accounting stores it (FP8 GEMM weights take one byte)."""
    tr = cfg.training
    return terms.state_kwargs(cfg.accounting, tr.bytes_per_param, tr.fp8, cfg.model.gemm_share, tr.grad_dtype,
                              tr.optimizer_dtype, tr.fp16)


def expert_bytes(cfg: MemoryConfig) -> dict:
    """Bytes per parameter of the routed experts (all GEMM weights)."""
    tr = cfg.training
    return terms.state_kwargs(cfg.accounting, tr.bytes_per_param, tr.fp8, 1.0, tr.grad_dtype, tr.optimizer_dtype,
                              tr.fp16)


def _placed(psi, group, zero, offload, kw: dict, streamed=0.0) -> dict[str, np.ndarray]:
    """Offload per mode (a few modes over many candidates): GPU components, streamed working, CPU, NVMe."""
    psi, group, zero, offload = np.broadcast_arrays(psi, group, zero, np.asarray(offload, dtype=object))
    streamed = np.broadcast_to(streamed, psi.shape)
    out = {c: np.zeros(psi.shape) for c in (*COMPONENTS, "working", "cpu", "nvme")}
    for mode in set(offload.ravel().tolist()):
        sel = offload == mode
        pl = placement(psi[sel], group[sel], zero[sel], mode, largest_layer=streamed[sel], **kw)
        for c in COMPONENTS:
            out[c][sel] = pl.gpu[c]
        out["working"][sel], out["cpu"][sel], out["nvme"][sel] = pl.working, pl.cpu_total, pl.nvme_total
    return out


def model_state_parts(cfg: MemoryConfig) -> GpuMemory:
    """Dense and expert model states of one GPU after offload (the gradients as they exist at the activation peak),
    the working set, the framework's buffers and its optimizer step's moment (activations left at 0)."""
    m, lay, key = cfg.model, cfg.layout, cfg.accounting
    dense_kw, expert_kw = dense_bytes(cfg), expert_bytes(cfg)
    t, p, zero = np.asarray(lay.t), np.asarray(lay.p), np.asarray(lay.zero)
    group = lay.shard_group()  # the dense weights' ZeRO group: d x cp (its share under hybrid sharding)
    psi_rank, layer = dense_split(m, t, p, lay.chunks, lay.ends_in_split, cfg.inflight.last_on_first)
    shape = np.broadcast(psi_rank, group, zero, np.asarray(lay.offload, dtype=object)).shape
    psi_rank = np.broadcast_to(psi_rank, shape)
    states = model_states(psi_rank, group, zero, **dense_kw).total
    streamed = np.asarray(m.largest_module) / t
    dense = _placed(psi_rank, group, zero, lay.offload, dense_kw, streamed)
    gathered = _zero3_gathers(cfg, psi_rank, layer, dense_kw)
    ex = {k: np.broadcast_to(x, shape) for k, x in _expert_states(cfg, expert_kw).items()}
    m_step = cfg.training.micro_batches
    tp_embedding = float(m.vocab * m.hidden) * (1.0 - 1.0 / t)  # the embedding gradient beyond a rank's share
    grads = terms.grads_at_peak(key, dense["grads"], psi_rank, dense_kw["grad_bytes"], p, m_step, tp_embedding)
    expert_grads = terms.grads_at_peak(key, ex["grads"], ex["rank"], expert_kw["grad_bytes"], p, m_step)
    on_gpu = sum(dense[c] + ex[c] for c in COMPONENTS)  # every state the optimizer step holds, gradients included
    step = (on_gpu + terms.step_extra(key, ((psi_rank, group), (ex["rank"], ex["group"])), zero)
            + terms.moment_copies(key, cfg.training.optimizer_dtype, cfg.training.bytes_per_param.k, dense_kw["k"],
                                  (dense["optimizer"], ex["optimizer"])))
    tr = cfg.training
    grouped = bool(tr.grouped_gemm) and cfg.model.is_moe  # MoE layers through Transformer Engine's grouped GEMM
    buffers = np.broadcast_to(terms.buffer_bytes(key, zero, tr.tp_overlap, grouped), shape)
    upcast = key == "textbook" or loss_of(key, tr.loss, tr.compiled) is accounting(key).loss
    logits = (m.seq * np.asarray(tr.micro_batch_size, dtype=float) * m.vocab / t / np.asarray(lay.cp)
              * ((p == 1) & upcast))  # the bf16 logits an upcast loss frees before its backward (no schedule holds)
    pools = terms.side_pools(key, np.maximum(dense["grads"] + ex["grads"] - grads - expert_grads, 0.0),
                             _zero3_gathers(cfg, psi_rank, layer, dense_kw, resharded=True) + ex["gathered"], logits)
    return GpuMemory(
        params=dense["params"], grads=grads, optimizer=dense["optimizer"],
        expert_params=ex["params"], expert_grads=expert_grads, expert_optimizer=ex["optimizer"],
        working=dense["working"] + ex["working"], gathered=gathered + ex["gathered"], activations=np.zeros(shape),
        worst_stage=np.full(shape, "first", dtype=object), states=states + ex["states"], expert_states=ex["states"],
        cpu=dense["cpu"] + ex["cpu"], nvme=dense["nvme"] + ex["nvme"], psi_rank=psi_rank, expert_rank=ex["rank"],
        expert_group=ex["group"], buffers=buffers, step_moment=step + buffers, pools=np.broadcast_to(pools, shape))


def _zero3_gathers(cfg: MemoryConfig, psi_rank, layer, kw: dict, resharded: bool = False) -> np.ndarray:
    """ZeRO-3's unsharded weights at the activation peak (0 below stage 3, and for a framework's stage 2 that keeps
    the parameters sharded). The ZeRO paper's per-block units (core.memory.fsdp.unsharded); resharding off keeps the
    stage gathered from the forward to the backward. FSDP2 (torch) gathers 16-bit copies of its fp32 shards: its
    stage 2 and resharding off hold the stage's copy, resharding on the root group (embeddings, final norm, output
    layer) and the last block, which torchtitan leaves unresharded (apply_fsdp: reshard_after_forward only for
    layer_id < n_layers - 1; the root is not resharded after the forward)."""
    m, lay = cfg.model, cfg.layout
    zero, p = np.asarray(lay.zero), np.asarray(lay.p)
    keep = ~np.asarray(lay.reshard, dtype=bool) & (not resharded)
    params_off = np.isin(np.asarray(lay.offload, dtype=object), PARAM_OFFLOADS)  # streamed instead of gathered
    if cfg.accounting == "torch":
        gather = terms.gather_bytes(cfg.accounting, cfg.training.fp8, shard_group(lay.d, 1, lay.replicate))  # no cp
        layer = np.broadcast_to(layer, psi_rank.shape)
        blocks = np.minimum(np.ceil(m.layers / p), np.maximum(np.floor(psi_rank / np.maximum(layer, 1.0)), 1.0))
        root = np.maximum(psi_rank - blocks * layer, 0.0)
        whole = ((zero == 2) & (not resharded)) | ((zero == 3) & keep)
        stage = 2.0 * root + gather * (psi_rank - root)  # embeddings and the output layer stay 16-bit under FP8
        return np.where(params_off | (zero < 2), 0.0, np.where(whole, stage, 2.0 * root + gather * layer))
    gathered = np.where((zero == 3) & ~params_off, _gathered_blocks(m, psi_rank, layer, p, kw), 0.0)
    # FSDP2's reshard_after_forward=False: the stage's parameters stay gathered from the forward to the backward
    kept = psi_rank * kw["param_bytes"] * (1 - 1 / lay.shard_group()) + layer * kw["grad_bytes"]
    return np.where((zero == 3) & keep, kept, gathered)


def _gathered_blocks(m: ModelMemory, psi_rank, layer, p, kw: dict) -> np.ndarray:
    """ZeRO-3's unsharded bytes beyond the shards: each block of the stage a unit, the next one prefetched, the
    rest of the stage's parameters (embedding, norms) the root (core.memory.fsdp.unsharded: FSDP's per-block wrap)."""
    layer = np.broadcast_to(layer, psi_rank.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        fit = np.where(layer > 0, np.floor(psi_rank / np.where(layer > 0, layer, 1.0)), 1.0)
    blocks = np.maximum(1.0, np.minimum(np.ceil(m.layers / np.asarray(p)), fit))
    root = np.maximum(psi_rank - blocks * layer, 0.0)
    parts = unsharded(root, layer, blocks, kw["param_bytes"], kw["grad_bytes"], prefetch=True)
    return parts[0] + parts[1] + parts[2]


def _expert_states(cfg: MemoryConfig, kw: dict) -> dict[str, np.ndarray]:
    """The routed experts on one GPU of the fullest stage: parameters / (ep x etp), states sharded over expert-dp,
    offloaded as the dense ones are, and ZeRO-3's gather of one MoE layer's local experts (prefetched)."""
    m, lay = cfg.model, cfg.layout
    zeros = {k: 0.0 for k in (*COMPONENTS, "states", "working", "gathered", "cpu", "nvme", "rank")} | {"group": 1.0}
    if not m.is_moe:
        return zeros
    t, ep = np.asarray(lay.t), np.asarray(lay.ep)
    etp = np.where(np.asarray(lay.etp) > 0, lay.etp, t)
    per_layer = moe.expert_params_per_layer(m)
    rank = _moe_layers_fullest(cfg) * per_layer / (ep * etp)
    group = np.maximum(t * lay.shard_group() // np.maximum(ep * etp, 1), 1)  # within one replica under HSDP
    zero = np.asarray(lay.zero)
    states = moe.sharded_states(rank, group, zero, **kw).total
    placed = _placed(rank, group, zero, lay.offload, kw)
    layer = per_layer / (ep * etp)
    gathered = np.where(zero == 3, 2.0 * layer * (kw["param_bytes"] + kw["grad_bytes"]), 0.0)  # with prefetch
    return {**{c: placed[c] for c in COMPONENTS}, "states": states, "working": placed["working"],
            "gathered": gathered, "cpu": placed["cpu"], "nvme": placed["nvme"], "rank": rank, "group": group}


def _moe_layers_fullest(cfg: MemoryConfig) -> np.ndarray:
    """MoE layers whose routed experts the most loaded device holds: evenly split, core.memory.experts.
    moe_layers_on_fullest; where the ends count in the split, the fullest of the first, a middle and the last
    stage's device."""
    m, lay = cfg.model, cfg.layout
    even = moe.moe_layers_on_fullest(m, lay.p, m.mtp_layers)
    ends = np.asarray(lay.ends_in_split, dtype=bool) & (np.asarray(lay.p) > 1)
    if not ends.any():
        return even
    counts = np.broadcast_arrays(*moe.moe_layers_on_devices(m, lay.p, lay.chunks, True))
    return np.where(ends, np.maximum.reduce(counts), even)
