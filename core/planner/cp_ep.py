"""Context and expert parallelism in the planner: which cp and ep a search covers, and what they add to each
candidate's memory and step time.

core.planner.plan calls these for the degrees it enumerates, the bytes per parameter and the step time; the memory
of the experts and of ring attention is the one memory function's (core.memory.per_gpu, through
core.planner.rank_memory). The numbers come from core.memory (fp8) and core.cost (expert_comm, ring_attention,
precision_peak); the rules that exclude a candidate are core.planner.cp_ep_rules, each with its reason.

Placement (Megatron-LM's order, tensor innermost): a context-parallel group spans t x cp consecutive ranks, a data-
parallel group of the dense weights t x d x cp, the expert-parallel group etp x ep, its expert-data-parallel group
the rest of the stage's t x d x cp ranks.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from core.cost import collective, expert_comm, moe_overlap, precision_peak, ring_attention
from core.memory import fp8 as fp8_bytes
from core.params.planner import MAX_CP_SEARCH, MIN_CP_TOKENS, PlannerParams
from core.planner import frameworks
from core.planner.factors import divisors


def cp_values(q: PlannerParams, model) -> list[int]:
    """cp = 1 and the powers of two that leave every rank MIN_CP_TOKENS tokens and split the sequence into 2 cp
    chunks (Megatron's rule); a pinned cp is taken as it is (core.planner.cp_ep_rules judges it)."""
    if q.fix_cp:
        return [q.fix_cp]
    out, c = [1], 2
    while c <= MAX_CP_SEARCH and model.seq // c >= MIN_CP_TOKENS:
        if model.seq % (2 * c) == 0:
            out.append(c)
        c *= 2
    return out


def ep_values(q: PlannerParams, model) -> list[int]:
    """Every ep that divides the routed experts (1 for a dense model), or the pinned one."""
    if q.fix_ep:
        return [q.fix_ep]
    return divisors(model.moe.experts) if model.is_moe else [1]


def expand(rows: np.ndarray, q: PlannerParams, model) -> tuple[np.ndarray, list[str]]:
    """(t, p, t x p's share of G) rows -> (t, p, d, cp, ep) rows with d = G / (t p cp), the pinned d kept."""
    cps, eps = cp_values(q, model), ep_values(q, model)
    out = [(t, p, rest // cp, cp, ep) for t, p, rest in rows.tolist() for cp in cps if rest % cp == 0 for ep in eps
           if not q.fix_d or rest // cp == q.fix_d]
    notes = []
    if len(cps) > 1 or q.fix_cp:
        notes.append(f"Context parallelism: cp = {', '.join(map(str, cps))} searched (each rank keeps s / cp of every "
                     f"{model.seq:,}-token sequence; pin cp for other values).")
    if q.fix_cp and rows.size and not out:
        notes.append(f"The pinned cp = {q.fix_cp} divides no G / (t p) of the layouts searched.")
    if q.fix_d and not out:
        notes.append(f"No layout has d = {q.fix_d} with the other pins on G = {q.gpus}.")
    asked = tuple(k for k, on in (("deepep", q.moe_dispatcher == "deepep"),
                                  ("allgather", q.moe_dispatcher == "allgather"),
                                  ("moe_a2a_overlap", q.moe_a2a_overlap)) if on)
    if model.is_moe and frameworks.moe_note(asked):
        notes.append(frameworks.moe_note(asked))
    if model.is_moe and not q.fix_ep:
        notes.append(f"Expert parallelism: ep = {', '.join(map(str, eps))} searched ({model.moe.experts} experts); "
                     "each must divide t x d x cp / expert-tp (the reason names it where it does not).")
    return np.array(out, dtype=np.int64).reshape(-1, 5), notes


def etp_of(q: PlannerParams, t) -> np.ndarray:
    """Expert tensor parallelism per candidate: the pinned value, or t (Megatron-LM's default)."""
    t = np.asarray(t)
    return np.full(t.shape, q.fix_etp) if q.fix_etp else t


# --------------------------------------------------------------------------------------------------- memory

def dense_bytes_per_param(model, bpp, fp8: bool):
    """The dense part's bytes per parameter: FP8 GEMM weights take 1 byte of the 2 (core.memory.fp8)."""
    return replace(bpp, param_bytes=fp8_bytes.param_bytes(model, fp8)) if fp8 else bpp


def expert_param_bytes(model, fp8: bool) -> float:
    return fp8_bytes.param_bytes(model, fp8, experts=True)


# ----------------------------------------------------------------------------------------------------- time

def peak(model, gpu, fp8: bool) -> float:
    return precision_peak.effective_peak(model, gpu, fp8)


def communication(s, lay, costs) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(total, exposed) seconds per step of the MoE all-to-all and ring attention's K/V exchange for the layouts
    `lay` (core.cost.step_input.Layouts) of the setting `s` (core.cost.step_input.Setting); `costs` (the layouts'
    core.cost.step_time.StageCosts) is the compute Megatron-Core's EP overlap hides the all-to-all behind."""
    model, gpu, a = s.model, s.gpu, s.a
    fabric = collective.Fabric.of(gpu, a)
    layers_dev = lay.device_layers(model, a.ends_in_split)
    out = {}
    if model.is_moe:
        out["a2a"] = _all_to_all(s, lay, costs, layers_dev)
    if np.any(lay.cp > 1):
        r = a.rates(gpu)  # the attention core stays 16-bit, at its kernel's achievable fraction
        rate = r.peak * (r.flash_eff if model.flash_attention else r.gemm_eff)
        total, exposed = ring_attention.layer_time(model, lay, fabric, rate, a.cp_comm,
                                                   lay.recompute_share(model, a.ends_in_split))
        out["ring"] = (total * layers_dev * lay.m, exposed * layers_dev * lay.m)
    return out


def _all_to_all(s, lay, costs, layers_dev) -> tuple[np.ndarray, np.ndarray]:
    """The expert all-to-all of a step on the busiest device (core.cost.expert_comm) and what stays exposed
    after Megatron-Core's EP overlap (core.cost.moe_overlap, where moe_a2a_overlap is on) and ep_overlap."""
    model, a = s.model, s.a
    moe, deepep = model.moe, a.moe_dispatcher == "deepep"
    fp8_dispatch = s.fp8 and a.moe_fp8_dispatch
    again = lay.recompute_share(model, a.ends_in_split)  # full recompute on some layers only
    shape = (model.seq, lay.micro_batch_size, model.hidden, moe.top_k, lay.t, lay.cp, lay.ep, a.moe_capacity)
    per_layer = expert_comm.layer_bytes(*shape, lay.recompute, fp8_dispatch)
    if np.any(again < 1.0):  # the forward's exchanges again on `again` of the layers only
        plain = expert_comm.layer_bytes(*shape, "none", fp8_dispatch)
        per_layer = plain + again * (per_layer - plain)
    n_moe = np.minimum(layers_dev, model.moe_layers)
    messages = n_moe * lay.m * sum(expert_comm.passes(lay.recompute, again))  # one exchange per pass, layer, micro
    fabric = expert_comm.fabric(s.gpu, a)
    if a.moe_dispatcher == "allgather":  # its own collectives; Megatron-Core's EP overlap does not run with it
        tokens = expert_comm.tokens_per_gpu(model.seq, lay.micro_batch_size, lay.t, lay.cp)
        one = expert_comm.allgather_time(tokens, model.hidden, moe.experts, lay.t * lay.ep, fabric.gpus_per_node,
                                         fabric, lay.recompute, again)
        total = one * n_moe * lay.m
        return total, (1.0 - a.ep_overlap) * total
    reached = expert_comm.servers_reached(moe, lay.ep, lay.etp, fabric.gpus_per_node) if deepep else None
    total = expert_comm.layer_time(per_layer * n_moe * lay.m, lay.ep, lay.etp, fabric, messages, moe.top_k, reached)
    exposed = total
    if a.moe_a2a_overlap:
        paired = moe_overlap.paired_share(lay.p, lay.chunks, lay.m, lay.ep, lay.recompute, lay.split)
        one = total / np.maximum(n_moe * lay.m, 1.0)  # one MoE layer, one micro-batch
        share = expert_comm.forward_share(lay.recompute, fp8_dispatch, again)
        hid = moe_overlap.layer_hidden(one, share, costs.moe_parts)
        sms = expert_comm.DEEPEP_SMS / float(s.gpu.sms) if deepep and s.gpu.sms else 0.0
        exposed = moe_overlap.exposed(total, paired, hid, n_moe * lay.m, sms, a.moe_overlap_sync_us * 1e-6)
    return total, (1.0 - a.ep_overlap) * exposed
