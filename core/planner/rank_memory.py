"""Bytes on one GPU of a candidate: the parameters on the most loaded stage (embedding on the first, output layer
on the last, everything over t), their model states under ZeRO over d x cp with offload and ZeRO-3's gathered
working layers, and the activations each end stage holds for the micro-batches the simulator says are in flight.
The formulas are core.memory's; this module only applies them to the planner's candidate arrays.
"""

from __future__ import annotations

import math

import numpy as np

from core.memory import activations as act_memory
from core.memory import states as memory
from core.memory.fsdp import fsdp_peak
from core.memory.offload import placement
from core.model import presets
from core.planner import cp_ep
from core.planner.candidates import OFFLOAD_MODES
from core.planner.groups import distinct


def embedding_params(model: presets.ModelConfig) -> float:
    """Parameters of one V x h embedding matrix (the ZeRO page's `embedding` input for the same split)."""
    return float(model.vocab * model.hidden)


def params_per_rank(model: presets.ModelConfig, t, p) -> tuple[np.ndarray, np.ndarray, str]:
    """(parameters on one GPU of the most loaded stage, parameters of one transformer layer per TP rank, the
    assumption in words). core.memory.params_per_rank's embedding-on-ends split: the V x h embedding sits on the
    first stage; the output layer (its tied copy, or an untied second matrix) on the last; tensor parallelism
    divides everything by t."""
    psi = model.dense_params  # the routed experts are placed by core.planner.cp_ep (model.params if dense)
    emb = embedding_params(model)
    matrices = 1 if model.tied else 2
    t, p = np.asarray(t), np.asarray(p)
    if emb * matrices >= psi:  # a given count smaller than the embeddings: nothing to place on the ends
        return psi / (t * p), psi / model.layers / t, "parameters split evenly over t x p (the given count " \
            "is smaller than the embeddings)"
    body = np.where((p > 1) & (not model.tied), psi - emb, psi)  # untied: the output matrix is placed, not shared
    rank = memory.params_per_rank(body, t, p, "embedding-on-ends", emb)
    layer = (psi - emb * matrices) / model.layers / t
    words = ("layers split evenly over p stages and every matrix over t; the first stage also holds the "
             f"{emb / 1e9:.3g}B-parameter embedding and the last stage the output layer "
             f"({'tied copy' if model.tied else 'untied matrix'})")
    return rank, layer, words


def states(model, bpp, c: dict) -> dict[str, np.ndarray]:
    """Per-GPU model-state bytes (paper accounting), what stays on the GPU after offload, ZeRO-3 gathered layers."""
    kw = bpp.kwargs()
    t, p, d, zero = c["t"], c["p"], c["d"] * c["cp"], c["zero"]  # dense ZeRO group: d x cp (Megatron's dp-cp)
    psi_rank, layer, _ = params_per_rank(model, t, p)
    layer = np.broadcast_to(layer, psi_rank.shape)
    states = memory.model_states(psi_rank, d, zero, **kw).total
    on_gpu = np.array(states, dtype=float)
    for code, mode in enumerate(OFFLOAD_MODES[1:], start=1):
        sel = c["offload"] == code
        if sel.any():
            placed = placement(psi_rank[sel], d[sel], zero[sel], mode, largest_layer=layer[sel], **kw)
            on_gpu[sel] = placed.gpu_total
    working = np.zeros(t.size)
    gathered = np.flatnonzero((zero == 3) & (c["offload"] != 2))  # ZeRO-Infinity's streamed layer is in placement()
    if gathered.size:  # once per distinct (t, p, d), broadcast back (not one pass over every candidate per setting)
        rows, first, inverse = distinct([t[gathered], p[gathered], d[gathered]])
        peaks = np.empty(len(rows))
        for j, ((_, pp, dd), i) in enumerate(zip(rows.tolist(), gathered[first].tolist(), strict=True)):
            psi1, layer1 = float(psi_rank[i]), float(layer[i])
            blocks = max(1, min(math.ceil(model.layers / pp), int(psi1 // layer1)))
            peak = fsdp_peak(psi1, dd, blocks, layer1, "block", prefetch=True, **kw)
            peaks[j] = peak.peak - peak.sharded
        working[gathered] = peaks[inverse]
    kept = np.flatnonzero((zero == 3) & ~np.asarray(c["reshard"], dtype=bool))
    if kept.size:  # FSDP reshard_after_forward=False: the stage's parameters stay gathered from forward to backward
        dd = d[kept]
        working[kept] = psi_rank[kept] * kw["param_bytes"] * (1 - 1 / dd) + layer[kept] * kw["grad_bytes"]
    return {"psi_rank": psi_rank, "model_state_bytes": states, "states_on_gpu_bytes": on_gpu,
            "zero3_working_bytes": working}


def activations(model, c: dict, first_inflight: np.ndarray, last_inflight: np.ndarray, last_on_first: np.ndarray,
                 rows: np.ndarray, fp8: bool = False, capacity: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Peak activation bytes per GPU where `rows` (NaN elsewhere) and which stage holds them ("first" / "last").

    Each end stage is charged what it holds (core.memory.activations, plus core.planner.cp_ep's MoE and ring
    attention terms): the first stage its own micro-batches in flight plus the embedding's dropout mask, the last
    stage its (usually fewer) micro-batches in flight plus the output layer's inputs and the fp32 logits. A single
    stage (p = 1), or a V-shaped schedule whose last stage sits on the first device, carries both ends. Flash
    attention keeps no s x s scores: its layers are counted like selective recompute (which drops exactly that
    term), without the scores' recompute buffer.
    """
    out = np.full(c["t"].size, np.nan)
    worst = np.full(c["t"].size, None, dtype=object)
    if rows.any():
        p = c["p"][rows]
        chunks = c["chunks"][rows]
        layers_dev = np.ceil(model.layers / (p * chunks)) * chunks
        mode = c["recompute_name"][rows]
        if model.flash_attention:
            mode = np.where(mode == "none", "selective", mode)
        cp = c["cp"][rows]
        common = (model.seq, c["b"][rows], model.hidden, model.heads, layers_dev)
        tail = (c["t"][rows], c["sp"][rows], mode, model.vocab)
        both = (p == 1) | last_on_first[rows]
        block = {"cp": cp, "fp8": fp8, "parallel": model.parallel_block}
        first = act_memory.stage_bytes(*common, first_inflight[rows], *tail, first=True, last=both, **block)
        last = act_memory.stage_bytes(*common, last_inflight[rows], *tail, first=False, last=True, **block)
        first_total = first["total"] + cp_ep.extra_activations(model, c, first_inflight, rows, capacity, fp8)[rows]
        last_total = last["total"] + cp_ep.extra_activations(model, c, last_inflight, rows, capacity, fp8)[rows]
        if model.flash_attention:  # the one layer that recompute rebuilds has no scores either
            shape = (model.seq, c["b"][rows], model.hidden, model.heads, c["t"][rows], c["sp"][rows])
            scores = (act_memory.per_layer_bytes(*shape, "none", **block)
                      - act_memory.per_layer_bytes(*shape, "selective", **block))
            first_total, last_total = first_total - scores, last_total - scores
        last_total = np.where(both, 0.0, last_total)
        out[rows] = np.maximum(first_total, last_total)
        worst[rows] = np.where(first_total >= last_total, "first", "last")
    return out, worst

