"""Mixture-of-experts memory: routed experts sharded over the expert-parallel group, everything else as before.

Megatron-LM's layout ("MoE parallel folding", Liu et al. 2025): the t x cp x d ranks of one pipeline stage are
regrouped for the MoE layers as etp x ep x expert-dp. So on one GPU
    dense parameters  = dense weights of the stage / t            ZeRO shards their states over d x cp ranks
    expert parameters = routed experts of the stage / (ep x etp)  ZeRO shards their states over
                                                                  expert-dp = t x d x cp / (ep x etp) ranks.
etp = t is Megatron's default (then ep must divide d x cp); etp = 1 keeps every expert whole on one GPU.
Shared experts and the router are replicated like dense weights. The ZeRO stages shard both parts as in the
ZeRO paper (core.memory.states), each over its own group.

Activations: a MoE layer keeps, per token, the k x capacity-factor dispatched copies of the token (2 h bytes
each, the experts' first GEMM input) and each routed or shared expert's intermediates, counted as for the dense
MLP (4 f bytes per token for an expert of width f: Korthikanti's 16 s b h for f = 4h). In s b h units, sharded
over t (etp = t splits the experts, etp = 1 splits the tokens):
    routed k c (2 + 4 f/h) + shared 4 S f/h   instead of the dense MLP's 16,
and with FP8 activations the GEMM inputs (the dispatched copy and the second GEMM's input) take one byte:
    k c (1 + 3 f/h) + 3 S f/h                   instead of 12.
"""

from __future__ import annotations

import math

import numpy as np

from core import validate
from core.memory.states import COMPONENTS, SHARDED_FROM, States, check_stage
from core.model import stage_split
from core.params.memory import MAX_BYTES_PER_PARAM, MAX_ND, MAX_PSI

DENSE_MLP_SBH = (16.0, 12.0)  # Korthikanti's dense MLP internals (GeLU input + second-GEMM input), BF16 / FP8


def sharded_states(psi, group, stage, k=12.0, param_bytes=2.0, grad_bytes=2.0, sharded_from=()) -> States:
    """Model-state bytes of `psi` parameters (0 allowed: a dense model has no experts) whose ZeRO group is `group`
    (`sharded_from`: a framework's own first sharded stage per component, core.memory.states.model_states)."""
    psi = validate.number("params", psi, 0, MAX_PSI)
    group = validate.number("group", group, 1, MAX_ND)
    stage = check_stage(stage)
    per_param = {"params": validate.number("param_bytes", param_bytes, 0, MAX_BYTES_PER_PARAM),
                 "grads": validate.number("grad_bytes", grad_bytes, 0, MAX_BYTES_PER_PARAM),
                 "optimizer": validate.number("k", k, 0, MAX_BYTES_PER_PARAM)}
    first = SHARDED_FROM | dict(sharded_from)
    return States(**{c: per_param[c] * psi / np.where(stage >= first[c], group, 1.0) for c in COMPONENTS})


def expert_data_parallel(t, d, cp, ep, etp) -> np.ndarray:
    """Ranks holding the same experts: t x d x cp / (ep x etp) (Megatron's expert data-parallel size)."""
    t, d, cp, ep, etp = (validate.number(n, x, 1, MAX_ND, integer=True)
                         for n, x in (("t", t), ("d", d), ("cp", cp), ("ep", ep), ("etp", etp)))
    return t * d * cp / (ep * etp)


def moe_layers_on_stage(model, p) -> np.ndarray:
    """MoE layers on the fullest pipeline stage: ceil(L / p) layers, at most the model's MoE layers (DeepSeek-V3's
    3 dense layers share the first stage with MoE ones, so a later stage is the fullest)."""
    p = validate.number("p", p, 1, model.layers, integer=True)
    return np.minimum(np.ceil(model.layers / p), model.moe_layers)


def moe_layers_on_fullest(model, p, mtp: int = 0) -> np.ndarray:
    """MoE layers of the stage holding the most, with `mtp` multi-token prediction depths (MoE layers) on the last
    stage: ceil(L / p) on the fullest, and on the last what the others leave, L - (p - 1) ceil(L / p), plus them."""
    fullest = moe_layers_on_stage(model, p)
    if not mtp:
        return fullest
    p = np.asarray(p, dtype=float)
    left = np.clip(model.layers - (p - 1) * np.ceil(model.layers / p), 0, model.moe_layers)
    return np.maximum(fullest, left + mtp)


def moe_layers_on_devices(model, p, chunks, ends_in_split=False, v_shape=False
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MoE layers (prediction depths included) on the first device, a middle one and the last stage's device,
    as the activations count them. Evenly split: ceil(L / p) on each, plus the depths on the last stage's device.
    Where the ends count in the split the devices hold core.model.stage_split's whole
    layers, the leading dense layers on the first stage (a middle device is counted as all MoE: an upper bound)."""
    mtp = int(getattr(model, "mtp_layers", 0))
    p = np.asarray(p)
    both = np.asarray(v_shape, dtype=bool) & (p > 1)
    even = moe_layers_on_stage(model, p)
    even_ends = (even + np.where(both, mtp, 0), even, even + mtp)
    ends = np.asarray(ends_in_split, dtype=bool) & (p > 1)
    if not ends.any():
        return even_ends
    first_dev, mid_dev, last_dev = stage_split.device_layers(model.layers, p, chunks, mtp, True, v_shape)
    first_stage = stage_split.stage_layers(model.layers, p, chunks, mtp, True)[1]
    dense = model.layers - model.moe_layers
    first = np.clip(first_dev - np.minimum(dense, first_stage), 0, model.moe_layers)
    last = np.where(both, first, np.minimum(last_dev, model.moe_layers)) + mtp
    first = np.where(both, last, first)
    mid = np.minimum(mid_dev, model.moe_layers)
    return tuple(np.where(ends, x, e) for x, e in zip((first, mid, last), even_ends, strict=True))


def expert_params_per_layer(model) -> float:
    """Routed-expert parameters of one MoE layer (the count in use, scaled like model.expert_params)."""
    return model.expert_params / model.moe_layers if model.moe_layers else 0.0


def moe_mlp_sbh(top_k, shared, expert_ffn, hidden, capacity=1.0, fp8=False) -> np.ndarray:
    """A MoE layer's expert activations per token in s b h units (module docstring), before dividing by t."""
    f = np.asarray(expert_ffn, dtype=float) / np.asarray(hidden, dtype=float)
    routed = np.asarray(top_k, dtype=float) * validate.number("capacity", capacity, 1.0, 64.0)
    fp8 = np.asarray(fp8, dtype=bool)
    return np.where(fp8, routed * (1 + 3 * f) + 3 * shared * f, routed * (2 + 4 * f) + 4 * shared * f)


def moe_extra_bytes(model, micro_batch_size, t=1, cp=1, capacity=1.0, fp8=False, recompute="none") -> np.ndarray:
    """Activation bytes one MoE layer keeps beyond the dense layer's formula, one micro-batch, one GPU (0 for a
    dense model, and with full recompute, which keeps only the layer input)."""
    if not model.is_moe:
        return np.zeros(np.broadcast(np.asarray(micro_batch_size), np.asarray(t), np.asarray(cp)).shape)
    moe = model.moe
    fp8 = np.asarray(fp8, dtype=bool)
    delta = moe_mlp_sbh(moe.top_k, moe.shared, moe.expert_ffn or model.ffn, model.hidden, capacity, fp8) \
        - np.where(fp8, DENSE_MLP_SBH[1], DENSE_MLP_SBH[0])
    sbh = model.seq * np.asarray(micro_batch_size, dtype=float) * model.hidden
    extra = sbh * delta / (np.asarray(t, dtype=float) * np.asarray(cp, dtype=float))
    return np.where(np.asarray(recompute) == "full", 0.0, extra)


def experts_per_gpu(model, ep) -> int:
    """Routed experts of each MoE layer one GPU holds (E / ep)."""
    return math.ceil(model.moe.experts / ep) if model.is_moe else 0


def min_nd(dense_rank, expert_rank, ep, stage, usable, other_bytes=0.0, ep_share=None, **state_bytes) -> float:
    """Smallest N_d (a multiple of ep) at which dense states sharded over N_d plus expert states sharded over
    N_d / ep_share fit in `usable`; inf when the replicated parts alone do not fit. expert_rank: experts on one GPU;
    ep_share = ep x etp / t (ep with Megatron's default etp = t); `state_bytes`: model_states' keywords (k,
    param_bytes, grad_bytes, sharded_from).
    From  R (D + E) + S (D + E ep_share) / N_d + other <= usable, R and S the stage's replicated and sharded bytes."""
    from core.memory.states import split_coefficients

    replicated, sharded = (float(x) for x in split_coefficients(stage, **state_bytes))
    ep = int(validate.number("ep", ep, 1, MAX_ND, integer=True))
    share = float(ep if ep_share is None else ep_share)
    room = float(usable) - float(other_bytes) - replicated * (dense_rank + expert_rank)
    need = sharded * (dense_rank + expert_rank * share)
    if need <= 0:
        return float(ep) if room >= 0 else math.inf
    if room <= 0:
        return math.inf
    nd = max(ep, math.ceil(need / room / ep - 1e-12) * ep)
    return float(nd) if nd <= MAX_ND else math.inf
