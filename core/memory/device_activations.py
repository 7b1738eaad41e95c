"""Activations of the devices that can be the fullest: the first and the last stage's, and a middle one's where it
holds more micro-batches or more layers, for the micro-batches the schedule keeps in flight on each
(core.memory.per_gpu.InFlight, the pipeline simulator's counts).

Split from core.memory.per_gpu because the end stages carry their own terms that a transformer layer does not: the
embedding for the first stage's own micro-batches, the output layer, fp32 logits and prediction depths for the
last stage's, both on one device when p = 1 or a V-shaped schedule folds the last stage back onto the first; MoE
layers add their expert activations and context parallelism its K/V exchange buffers. Every `cfg` here is a
core.memory.per_gpu.MemoryConfig (named, not imported: per_gpu calls this module).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from core.memory import activations as act
from core.memory import experts as moe
from core.memory.context_parallel import ring_buffer_bytes
from core.model import stage_split


def activation_bytes(cfg) -> tuple[np.ndarray, np.ndarray]:
    """(peak activation bytes of the fullest device, which one: "first" / "last" / "middle"); see `end_stages`."""
    ends = end_stages(cfg)
    return ends.peak, ends.worst


@dataclass(frozen=True)
class EndStages:
    """Each end stage's activation bytes by term (core.memory.activations.stage_bytes) plus what the dense formula
    leaves out (MoE expert activations, ring attention's buffers), and the worse one."""

    layers_per_device: np.ndarray
    first: dict[str, np.ndarray]
    last: dict[str, np.ndarray]
    first_extra: np.ndarray
    last_extra: np.ndarray
    both_on_first: np.ndarray  # p = 1, or the last stage on the first device: the first device holds both ends
    middle: dict[str, np.ndarray] | None = None  # the fullest other device (0 where InFlight.middle is not given)
    middle_extra: object = 0.0

    @property
    def first_total(self) -> np.ndarray:
        return self.first["total"] + self.first_extra

    @property
    def last_total(self) -> np.ndarray:
        return np.where(self.both_on_first, 0.0, self.last["total"] + self.last_extra)

    @property
    def middle_total(self) -> np.ndarray:
        return 0.0 if self.middle is None else self.middle["total"] + self.middle_extra

    @property
    def peak(self) -> np.ndarray:
        return np.maximum.reduce(np.broadcast_arrays(self.first_total, self.last_total, self.middle_total))

    @property
    def worst(self) -> np.ndarray:
        """"first", "last" or "middle": the device whose activations are counted (ties go to the ends)."""
        first, last, mid = np.broadcast_arrays(self.first_total, self.last_total, self.middle_total)
        ends = np.where(first >= last, "first", "last")
        return np.where(mid > np.maximum(first, last), "middle", ends).astype(object)


def activation_shape(cfg) -> act.Shape:
    m, lay, tr = cfg.model, cfg.layout, cfg.training
    moe = {}
    if m.is_moe and m.moe is not None:
        width = float(m.moe.expert_ffn or m.ffn)
        moe = {"routed": m.moe.top_k * float(tr.moe_capacity), "expert_ffn": width, "shared_ffn": m.moe.shared * width,
               "experts": float(m.moe.experts)}
    return act.Shape(m.seq, tr.micro_batch_size, m.hidden, m.heads, lay.t, tr.sequence_parallel, tr.recompute,
                     m.vocab, lay.cp, tr.fp8, m.flash_attention, m.parallel_block, m.attn_width, m.kv_heads, m.ffn,
                     m.mlp, m.norm, m.dropout, m.rope, cfg.accounting, tr.compiled, repeat_kv=tr.repeat_kv,
                     sac_attention=tr.sac_attention, loss=tr.loss, mla=_mla(m),
                     qk_norm=m.qk_norm, recompute_modules=tr.recompute_modules, **moe)


def _mla(m) -> tuple:
    """A model's multi-head latent attention as the activation count takes it; () for plain attention."""
    a = m.mla
    return () if a is None else (a.kv_lora_rank, a.q_lora_rank, a.qk_head_dim, a.qk_rope_dim, a.v_head_dim)


def end_stages(cfg) -> EndStages:
    """The end stages' activations (and a middle device's, where it holds more). The first stage holds its
    micro-batches in flight plus the embedding's dropout mask, the last stage its (usually fewer) micro-batches
    plus the output layer's inputs and the fp32 logits, and each prediction depth one more layer with its
    embedding and logits; a single stage (p = 1), or a V-shaped schedule whose last stage sits on the first
    device, carries both ends. Each device holds its stages' layers (core.model.stage_split: ceil(L / (p v)) x v
    when split evenly; fewer on the end stages where the ends count in the split, so that a middle device may be
    the fullest); MoE layers add their expert activations, context parallelism ring attention's K/V buffers."""
    m, lay, inf = cfg.model, cfg.layout, cfg.inflight
    p, chunks = np.asarray(lay.p), np.asarray(lay.chunks)
    both = (p == 1) | np.asarray(inf.last_on_first, dtype=bool)
    first_dev, mid_dev, last_dev = stage_split.device_layers(m.layers, p, chunks, m.mtp_layers, lay.ends_in_split,
                                                             both)
    moe_first, moe_mid, moe_last = _moe_counts(cfg, both)
    shape = activation_shape(cfg)
    k = m.mtp_layers  # each prediction depth: one more layer, embedding and fp32 logits on the last stage
    first_held = inf.first if inf.first_stage is None else inf.first_stage
    last_held = inf.last if inf.last_stage is None else inf.last_stage
    ends = k * np.asarray(last_held) * _ends_bytes(cfg) if k else 0.0
    io = _stage_io(cfg)  # buffers per device position: (first, middle, last)
    rec_first, rec_last = recomputed(cfg, first_dev), recomputed(cfg, last_dev)
    last_extra = _extra(cfg, inf.last, moe_last, k, last_held, _share(rec_last, last_dev)) + ends + io[2]
    first_extra = (_extra(cfg, inf.first, moe_first, np.where(both, k, 0), last_held, _share(rec_first, first_dev))
                   + np.where(both, ends, 0.0) + io[0])
    has_middle = (p > 2) | (both & (p > 1))
    middle_inflight = np.where(has_middle, np.asarray(inf.middle, dtype=float), 0.0)
    held = {"first_held": first_held, "last_held": last_held,
            "layer_bytes": (shape.per_layer(), shape.per_layer("none")), "backward_extra": _cp_buffers(cfg)}
    rec = {"first": rec_first, "middle": recomputed(cfg, mid_dev), "last": rec_last}
    middle, middle_extra = None, 0.0
    # split evenly a middle device holds the first device's layers without its embedding: it can be fuller only
    # where it holds more micro-batches (or, with the ends in the split, more layers)
    if np.any(np.asarray(lay.ends_in_split, dtype=bool)) or np.any(middle_inflight > np.asarray(inf.first)):
        middle = {key: np.where(middle_inflight > 0, x, 0.0)
                  for key, x in act.stage_bytes(shape, mid_dev, middle_inflight, first=False, last=False,
                                                layer_bytes=(*held["layer_bytes"], rec["middle"]),
                                                backward_extra=held["backward_extra"]).items()}
        middle_extra = np.where(middle_inflight > 0, _extra(cfg, middle_inflight, moe_mid, share=_share(
            rec["middle"], mid_dev)) + io[1], 0.0)
    ends = {"first_held": first_held, "last_held": last_held, "backward_extra": held["backward_extra"]}
    return EndStages(mid_dev, act.stage_bytes(shape, first_dev, inf.first, first=True, last=both,
                                              tail_layers=np.where(both, k, 0),
                                              layer_bytes=(*held["layer_bytes"], rec["first"]), **ends),
                     act.stage_bytes(shape, last_dev, inf.last, first=False, last=True, tail_layers=k,
                                     layer_bytes=(*held["layer_bytes"], rec["last"]), **ends),
                     first_extra, last_extra, both, middle, middle_extra)


def recomputed(cfg, device_layers) -> np.ndarray:
    """Layers of a device that its recompute mode applies to: all of them, or under full recompute with
    `recompute_layers` N the first N of each of its chunks (Megatron-LM's --recompute-method block)."""
    return stage_split.recomputed(device_layers, cfg.layout.chunks, cfg.training.recompute_layers,
                                  cfg.training.recompute)


def _share(rec, n) -> np.ndarray:
    n = np.asarray(n, dtype=float)
    return np.divide(rec, n, out=np.ones(np.broadcast(rec, n).shape), where=n > 0)


def _stage_io(cfg) -> tuple:
    """The receive buffers a pipeline stage keeps for the whole step, on the first, a middle and the last device.
    torch.distributed.pipelining allocates, per stage and per micro-batch of the step, one buffer for the activation
    it receives (every stage but the first) and one for the gradient it receives (every stage but the last), at
    stage setup (stage.py _prepare_forward_infra / _prepare_backward_infra), and keeps them: m x (one stage's
    input) each. Megatron-LM and DeepSpeed receive into tensors made per message (none kept). 16-bit, the
    sequence split by cp and, under sequence parallelism, by t."""
    lay, tr, m = cfg.layout, cfg.training, cfg.model
    p = np.asarray(lay.p)
    if cfg.accounting != "torch" or not np.any(p > 1):
        return 0.0, 0.0, 0.0
    t, cp, v = (np.asarray(x, dtype=float) for x in (lay.t, lay.cp, lay.chunks))
    split = np.where(np.asarray(tr.sequence_parallel, dtype=bool), t, 1.0)
    one = 2.0 * m.seq * np.asarray(tr.micro_batch_size, dtype=float) * m.hidden / (cp * split)
    per = np.where(p > 1, one * np.asarray(tr.micro_batches, dtype=float), 0.0)
    both = np.asarray(cfg.inflight.last_on_first, dtype=bool)
    # a device of v stages receives both ways on each, less the pipeline's ends it holds
    first = per * (2 * v - np.where(both, 2, 1))
    return first, per * 2 * v, per * (2 * v - 1)


def _moe_counts(cfg, v_shape) -> tuple:
    """MoE layers on the first, a middle and the last stage's device (core.memory.experts.moe_layers_on_devices);
    zeros for a dense model."""
    m, lay = cfg.model, cfg.layout
    if not m.is_moe or m.moe is None:
        return 0.0, 0.0, 0.0
    return moe.moe_layers_on_devices(m, lay.p, lay.chunks, lay.ends_in_split, v_shape)


def _ends_bytes(cfg) -> np.ndarray:
    """One micro-batch's embedding and output-layer activations (what a prediction depth repeats)."""
    shape = activation_shape(cfg)
    return act.embedding_bytes(shape) + act.output_bytes(shape)


def _cp_buffers(cfg) -> np.ndarray:
    """Context parallelism's K/V exchange buffers, held while one layer's attention runs (core.memory.
    context_parallel): PyTorch's ring attention exchanges K and V after torchtitan's repeat_kv, at the query width."""
    m, lay, tr = cfg.model, cfg.layout, cfg.training
    kv_heads = m.heads if cfg.accounting == "torch" else m.kv_heads
    return ring_buffer_bytes(m.seq, tr.micro_batch_size, m.hidden, m.heads, kv_heads, lay.t, lay.cp,
                             head_dim=m.head_dim, cp_comm=tr.cp_comm)


def _extra(cfg, inflight, moe_layers, tail=0, tail_held=None, share=1.0) -> np.ndarray:
    """Beyond the dense layers' formula: the expert activations of a device's `moe_layers` MoE layers (of which
    `tail`, the prediction depths, for the last stage's own `tail_held` micro-batches, the rest for the device's
    `inflight`); `share` of the layers under the recompute mode, the rest keeping everything (`recomputed`)."""
    m, tr = cfg.model, cfg.training
    if not m.is_moe or m.moe is None:
        return np.zeros(np.shape(tr.micro_batch_size))
    shape = activation_shape(cfg)
    extra = replace(shape, moe_layer=True).per_layer() - shape.per_layer()  # the experts in place of the dense MLP
    plain = replace(shape, moe_layer=True, recompute="none").per_layer() - shape.per_layer("none")
    extra = share * extra + (1.0 - np.asarray(share)) * plain
    held = inflight if tail_held is None else tail_held
    return extra * ((moe_layers - tail) * np.asarray(inflight) + tail * np.asarray(held))
