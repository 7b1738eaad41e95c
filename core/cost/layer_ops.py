"""Per-operation time of one transformer layer, of the embedding and of the output layer, on one GPU.

Vectorised over candidates (micro-batch b, tensor-parallel degree t, sequence parallelism, recompute, the TP
link). Every time is split by phase and by component:

    phases      F forward, B input-gradient backward, W weight-gradient backward, R what the backward re-runs first
                (full recompute: the whole forward; selective: the recompute modules' forward, _selective: the
                attention core and an MLA model's up-projections by default; none: nothing)
    components  gemm       the linear layers (QKV with grouped-query heads, output projection, MLP with SwiGLU's
                           three matrices, logits), core.cost.gemm.gemm_time from (m, n, k)
                attention  the attention core: per-head Q K^T and scores x V (batched GEMMs), softmax and dropout on
                           the s x s scores, or one fused flash-attention kernel (no s x s traffic)
                memory     the memory-bound rest: norms, activation functions, dropout, residual adds, rotary
                           embedding, embedding lookup, cross-entropy, at HBM bandwidth from their bytes
                tp         tensor-parallel collectives as Megatron-LM issues them (all-reduce, or reduce-scatter +
                           all-gather with sequence parallelism, whose backward re-gathers the sharded input)

Byte counts per element (16-bit activations; 1-byte dropout masks), per layer and TP rank, E_h = b s h elements
(/ t with sequence parallelism), E_f = b s ffn / t, E_s = b (a / t) s^2 attention scores:
    forward   norms 2 x 4 E_h; residual (+ dropout) 2 x (6 + 1) E_h; GeLU 4 E_f or SwiGLU 6 E_f; softmax 4 E_s and
              its dropout 5 E_s (eager attention)
    backward  norms 2 x 6 E_h; residual gradient sums 2 x 6 E_h (+ dropout 2 x 5 E_h); GeLU 6 E_f or SwiGLU
              10 E_f; softmax 6 E_s and dropout 5 E_s
The weight gradients accumulate into an fp32 main-grad buffer inside the GEMM (Megatron's gradient-accumulation
fusion), so W reads and writes 4-byte outputs; without the fusion a separate pass adds them (weight_gradient).
"""

from __future__ import annotations

import numpy as np

from core.cost import collective
from core.cost.gemm import flash_time, gemm_time, stream_time
from core.cost.rates import Rates
from core.cost.step_input import Layouts
from core.model.config import ModelConfig
from core.model.counts import attention_params, window_ratio
from core.params.memory import RECOMPUTE_MODULES_DEFAULT

PHASES = ("F", "B", "W", "R")  # a layer's times also carry "hidden" and "overlap" (what GEMMs can hide of TP comm),
# "mlp" / "moe_mlp" (the average layer's and one MoE layer's MLP compute, F / B / W)
COMPONENTS = ("gemm", "attention", "memory", "tp")
PER_OP = "per_op"  # in `modules`: torchtitan's per-op selective recompute instead of Megatron-LM's modules (_per_op)
CROSS_ENTROPY_BYTES = (32.0, 8.0)  # per logit, forward (fp32 softmax passes) and backward (gradient to 16-bit)
ACT = 2.0  # bytes per 16-bit value


def _zeros(shape) -> dict[str, dict[str, np.ndarray]]:
    return {ph: {c: np.zeros(shape) for c in COMPONENTS} for ph in PHASES}


def tp_collective(kind: str, nbytes, t, fabric: collective.Fabric) -> np.ndarray:
    """Seconds of one tensor-parallel collective over the t ranks of a TP group (consecutive ranks: a whole server
    holds min(t, GPUs per server) of them), as core.cost.collective costs every collective."""
    t = np.asarray(t, dtype=float)
    return collective.seconds(kind, nbytes, t, np.minimum(t, fabric.gpus_per_node), fabric)


def _attention_shape(model: ModelConfig) -> tuple[float, float, float, float]:
    """(query-key head size, value head size, input-projection width, output-projection input width), whole layer:
    Q, K, V with grouped-query heads, or multi-head latent attention's projections (core.model.counts)."""
    h, a = float(model.hidden), float(model.heads)
    if model.mla is None:
        hd, width = float(model.head_dim), float(model.attention_width)  # width = h unless the head size is decoupled
        return hd, hd, width + 2.0 * model.kv_heads * hd, width
    mla = model.mla
    out = a * mla.v_head_dim
    return (float(mla.qk_head_dim + mla.qk_rope_dim), float(mla.v_head_dim),
            (attention_params(model, with_bias=False) - out * h) / h, out)


def _attention_linears(model: ModelConfig, t) -> list[tuple[np.ndarray, np.ndarray]]:
    """(n, k) of the attention's input and output projections on one TP rank (key/value heads fewer than t are
    replicated, not split)."""
    h = float(model.hidden)
    _, _, width, out = _attention_shape(model)
    if model.mla is None:
        kv = 2.0 * model.kv_heads * model.head_dim
        n_in = (width - kv) / t + np.maximum(kv / t, 2.0 * model.head_dim)
    else:
        n_in = width / t
    return [(n_in, np.full_like(n_in, h)), (np.full_like(n_in, h), out / t)]


def _mlp_linears(model: ModelConfig, ffn, t) -> list[tuple[np.ndarray, np.ndarray]]:
    """(n, k) of an MLP of inner width `ffn` on one TP rank: in (gate and up for SwiGLU), out."""
    h = float(model.hidden)
    f = np.asarray(ffn, dtype=float) / t
    return [(f * (2.0 if model.swiglu else 1.0), np.full_like(f, h)), (np.full_like(f, h), f)]


def weight_gradient(r: Rates, k, n, tokens, fused: bool) -> tuple[np.ndarray, np.ndarray]:
    """(GEMM, memory-bound) seconds of one linear layer's weight gradient for a micro-batch. Fused (Megatron-LM's
    gradient-accumulation fusion): the GEMM adds into the fp32 main-grad buffer itself. Not fused: it writes a
    16-bit gradient that a separate pass adds into the fp32 buffer (read 2 + 4, write 4 bytes per weight)."""
    if fused:
        return gemm_time(r, k, n, tokens, c_bytes=4.0, accumulate=True), np.zeros(np.broadcast(k, n).shape)
    return gemm_time(r, k, n, tokens), stream_time(r, 10.0 * np.asarray(k) * np.asarray(n))


def _linear_phases(out: dict, r: Rates, tokens, linears, fused: bool, batch=1.0) -> list[tuple]:
    """Add forward, input-gradient and weight-gradient GEMMs of `linears` (each (n, k)) to `out`; return each
    layer's (input-gradient, weight-gradient, forward) seconds for the TP overlap."""
    done = []
    for n, k in linears:
        fwd = gemm_time(r, tokens, n, k, batch, linear=True)
        out["F"]["gemm"] += fwd
        dgrad = gemm_time(r, tokens, k, n, batch, linear=True)
        if fused:
            wgrad = gemm_time(r, k, n, tokens, batch, c_bytes=4.0, accumulate=True, linear=True)
            add = 0.0
        else:
            wgrad = gemm_time(r, k, n, tokens, batch, linear=True)
            add = stream_time(r, 10.0 * np.asarray(k) * np.asarray(n) * batch)
        out["B"]["gemm"] += dgrad
        out["W"]["gemm"] += wgrad
        out["W"]["memory"] += add
        done.append((dgrad, wgrad, fwd))
    return done


def _mlp(model: ModelConfig, r: Rates, shape, tokens, t, fused: bool, moe: bool, ep, etp, capacity) -> dict:
    """One layer's MLP on one TP rank: the dense MLP, or a MoE layer's routed experts (grouped GEMMs over the
    E / ep local experts, each fed tokens x top_k x ep / E of this rank's tokens), shared experts and router.
    Returns its phase times and the MLP-in and MLP-out GEMMs' (input-gradient, weight-gradient, forward) seconds."""
    out = _zeros(shape)
    if not moe:
        grads = _linear_phases(out, r, tokens, _mlp_linears(model, model.ffn, t), fused)
        width = np.full(shape, model.ffn / t)
    else:
        cfg = model.moe
        f_e = float(cfg.expert_ffn or model.ffn)
        pairs = tokens * cfg.top_k * capacity  # (token, expert) pairs of this TP group's tokens
        local = cfg.experts / np.asarray(ep, dtype=float)
        per_expert = pairs * np.asarray(ep, dtype=float) / cfg.experts * np.asarray(etp, dtype=float) / t
        grads = _linear_phases(out, r, per_expert, _mlp_linears(model, f_e, etp), fused, batch=local)
        if cfg.shared:
            _linear_phases(out, r, tokens, _mlp_linears(model, cfg.shared * f_e, t), fused)
        router = gemm_time(r, tokens / t, cfg.experts, model.hidden)
        out["F"]["gemm"] += router
        out["B"]["gemm"] += router
        out["W"]["gemm"] += router
        permute = 8.0 * pairs / t * model.hidden  # copy tokens to their experts and back, read + write
        out["F"]["memory"] += stream_time(r, permute)
        out["B"]["memory"] += stream_time(r, permute)
        width = pairs / t * f_e / np.maximum(tokens, 1.0) + cfg.shared * f_e / t
    e_f = tokens * width
    out["F"]["memory"] += stream_time(r, (6.0 if model.swiglu else 4.0) * e_f)
    out["B"]["memory"] += stream_time(r, (10.0 if model.swiglu else 6.0) * e_f)
    return {"times": out, "grads": grads[0], "out_grads": grads[1]}


def _attention_kinds(model: ModelConfig, keys) -> list[tuple[float, float, np.ndarray]]:
    """(share of the layers, score work over a full causal layer's, keys a query tile sweeps) of the full-attention
    layers and, with a sliding window, the windowed ones (counts.window_ratio; a tile sweeps at most the window)."""
    if not model.window:
        return [(1.0, 1.0, keys)]
    windowed = float(model.window_share)
    return [(1.0 - windowed, 1.0, keys),
            (windowed, window_ratio(model.seq, model.window), np.minimum(keys, float(model.window)))]


def _residual_bytes(model: ModelConfig, drop: float, forward: bool) -> float:
    """Bytes per s x b x h element of a layer's norms, residual adds and their dropouts (forward or backward).

    Sequential block (attention, then MLP): two norms (forward read + write 4, backward 6), two residual adds of two
    tensors (6; their gradient sums 6) with dropout (mask 1 forward, 5 backward). Parallel block: one norm and one
    residual add of three tensors (8: x + attention + MLP; the gradient sum also 8) with one dropout."""
    if model.parallel_block:
        return 4.0 + 8.0 + drop if forward else 6.0 + 8.0 + 5.0 * drop
    return 8.0 + 2.0 * (6.0 + drop) if forward else 24.0 + 10.0 * drop


def layer_times(model: ModelConfig, r: Rates, lay: Layouts, fabric: collective.Fabric, fused: bool = True,
                capacity: float = 1.0, modules: tuple = RECOMPUTE_MODULES_DEFAULT) -> dict:
    """{phase: {component: seconds}} of an average transformer layer for one micro-batch of b sequences on one
    TP rank (a mixture-of-experts model averages its dense and MoE layers by their counts).

    From `lay` (core.cost.step_input.Layouts): b, t, sp, recompute, cp (each rank holds s / cp of every sequence,
    its queries attend to all s keys), ep / etp (expert parallelism and expert TP). fabric: the links the TP
    collectives cross (core.cost.collective); fused: gradient-accumulation fusion (see weight_gradient); capacity:
    MoE capacity factor; modules: what selective recompute re-runs (_selective). Besides the phases, "hidden" holds
    the backward TP time Megatron-LM's default overlap hides behind the layer's GEMMs and "overlap" what TP
    communication overlap (--tp-comm-overlap) can hide, per phase.
    """
    b, t = np.asarray(lay.micro_batch_size, dtype=float), np.asarray(lay.t, dtype=float)
    sp, recompute = np.asarray(lay.sp, dtype=bool), np.asarray(lay.recompute)
    cp, ep = np.asarray(lay.cp, dtype=float), np.asarray(lay.ep, dtype=float)
    etp = np.asarray(lay.etp, dtype=float)
    shape = np.broadcast(b, t, sp, cp).shape
    out = _zeros(shape)
    s, h = model.seq, model.hidden
    q = s / cp  # this rank's queries per sequence
    T = b * q  # tokens per micro-batch on this rank
    attn = _linear_phases(out, r, T, _attention_linears(model, t), fused)

    qk, v, _, _ = _attention_shape(model)
    heads = b * model.heads / t  # (sequence, head) pairs on this rank
    drop = 1.0 if model.dropout else 0.0
    if model.flash_attention:
        work = 2.0 * b * q * s * model.heads * (qk + v) / t * r.flash_causal_share  # causal blocks only
        keys = s / cp  # each kernel call sweeps this rank's share of the keys (a ring step's chunk under CP)
        for share, span, swept in _attention_kinds(model, keys):  # full layers; windowed ones, fewer keys a tile
            out["F"]["attention"] += share * flash_time(r, span * work, swept)
            out["B"]["attention"] += share * flash_time(r, 2.5 * span * work, swept)  # the backward recomputes scores
    else:
        scores = heads * q * s
        out["F"]["attention"] += (gemm_time(r, q, s, qk, heads) + gemm_time(r, q, v, s, heads)
                                  + stream_time(r, (4.0 + 5.0 * drop) * scores))
        out["B"]["attention"] += (gemm_time(r, q, s, v, heads) + gemm_time(r, s, v, q, heads)
                                  + gemm_time(r, q, qk, s, heads) + gemm_time(r, s, qk, q, heads)
                                  + stream_time(r, (6.0 + 5.0 * drop) * scores))

    dense, moe_layers = model.moe.layer_counts(model.layers) if model.moe else (model.layers, 0)
    mlps = [(dense / model.layers, _mlp(model, r, shape, T, t, fused, False, ep, etp, capacity))]
    if moe_layers:
        mlps.append((moe_layers / model.layers, _mlp(model, r, shape, T, t, fused, True, ep, etp, capacity)))
    for share, mlp in mlps:
        for ph in PHASES:
            for c in COMPONENTS:
                out[ph][c] = out[ph][c] + share * mlp["times"][ph][c]
    # The MLP's compute by phase, averaged over the layers and of one MoE layer (core.cost.moe_overlap pairs it)
    out["mlp"] = {ph: sum(share * sum(mlp["times"][ph].values()) for share, mlp in mlps) for ph in ("F", "B", "W")}
    out["moe_mlp"] = {ph: sum(mlps[-1][1]["times"][ph].values()) * (1.0 if moe_layers else 0.0)
                      for ph in ("F", "B", "W")}

    e_h = T * h / np.where(sp, t, 1.0)
    kv_width = np.maximum(model.kv_heads / t, 1.0) * qk
    rope = 4.0 * T * (model.heads / t * qk + kv_width) if model.position == "rope" else 0.0
    out["F"]["memory"] += stream_time(r, _residual_bytes(model, drop, forward=True) * e_h + rope)
    out["B"]["memory"] += stream_time(r, _residual_bytes(model, drop, forward=False) * e_h + rope)

    column_parallel = [(1.0, attn[0])] + [(share, mlp["grads"]) for share, mlp in mlps]
    row_parallel = [(1.0, attn[1])] + [(share, mlp["out_grads"]) for share, mlp in mlps]
    if model.parallel_block:  # attention and MLP share one exchange per direction, hidden behind both's GEMMs
        column_parallel = [(share, tuple(a + g for a, g in zip(attn[0], mlp["grads"], strict=True)))
                           for share, mlp in mlps]
        row_parallel = [(share, tuple(a + g for a, g in zip(attn[1], mlp["out_grads"], strict=True)))
                        for share, mlp in mlps]
    _tensor_parallel(out, ACT * T * h, t, sp, fabric, column_parallel, row_parallel,
                     1.0 if model.parallel_block else 2.0)

    full, selective = recompute == "full", recompute == "selective"
    again = _per_op(model, mlps, attn, out["F"]["memory"]) if PER_OP in modules else \
        _selective(model, r, set(modules), mlps, attn, T, t, sp, capacity)
    for c in COMPONENTS:
        out["R"][c] = np.where(full, out["F"][c], np.where(selective, again.get(c, 0.0), 0.0))
    if "core_attn" in modules:
        out["R"]["attention"] = np.where(full | selective, out["F"]["attention"], 0.0)
    return out


def _selective(model: ModelConfig, r: Rates, modules: set, mlps: list, attn: list, tokens, t, sp, capacity) -> dict:
    """{component: seconds} a selective recompute of `modules` (Megatron-LM's recompute_modules, what
    core.frameworks.megatron drops) runs again in the backward, beside the attention core: MLA's up-projections
    (mla_up_proj), a separate norm's forward (layernorm: a MoE layer's pre-MLP norm, MLA's input norm; read and
    write), the experts' activation (moe_act), a dense layer's MLP or a MoE layer's whole forward (mlp, moe: its
    dispatcher's all-to-all is not counted again) or the shared experts' (their share of its GEMMs). `mlps`: (share
    of the layers, _mlp) of the dense and then the MoE layers; `attn`: the attention linears' (dgrad, wgrad, fwd)."""
    out: dict = {"gemm": 0.0, "memory": 0.0}
    dense, moe = mlps[0], (mlps[1] if len(mlps) > 1 else (0.0, None))
    if model.mla is not None and "mla_up_proj" in modules:
        out["gemm"] = out["gemm"] + _up_projection_share(model) * attn[0][2]
    if "layernorm" in modules:
        norms = (1.0 if model.mla is not None else 0.0) + moe[0]
        out["memory"] = out["memory"] + norms * stream_time(r, 4.0 * tokens * model.hidden / np.where(sp, t, 1.0))
    for (share, mlp), module in ((dense, "mlp"), (moe, "moe")):
        if module in modules and mlp is not None:
            for c, v in mlp["times"]["F"].items():
                out[c] = out.get(c, 0.0) + share * v
    if moe[1] is not None and "moe" not in modules:
        cfg = model.moe
        routed = tokens * cfg.top_k * capacity * float(cfg.expert_ffn or model.ffn) / t  # this rank's elements
        if "moe_act" in modules:
            out["memory"] = out["memory"] + moe[0] * stream_time(r, (6.0 if model.swiglu else 4.0) * routed)
        if "shared_experts" in modules and cfg.shared:
            share = cfg.shared / (cfg.shared + cfg.top_k * capacity)  # of the MLP GEMMs' forward
            out["gemm"] = out["gemm"] + moe[0] * share * moe[1]["times"]["F"]["gemm"]
    return out


def _per_op(model: ModelConfig, mlps: list, attn: list, forward_memory) -> dict:
    """{component: seconds} torchtitan's per-op selective recompute runs again (torchtitan/distributed/
    activation_checkpoint.py SelectiveAC: the attention kernel and every other matmul saved, counting in forward
    order, the rest recomputed): the attention output projection and the MLP's second matmul (SwiGLU's w3, half of
    the gate-and-up GEMM here; a GELU MLP's fc2), every MoE layer's grouped expert GEMMs (not on its save list), and
    every memory-bound op of the forward (norms, rotary, activation). Not the attention core; a separate wk
    (before fused QKV) and the TP all-gathers the recomputed ops repeat are left out."""
    gemm = attn[1][2]  # the output projection's forward
    for i, (share, mlp) in enumerate(mlps):
        if i == 1:  # MoE layers: the routed (and shared) experts' forward GEMMs again
            gemm = gemm + share * mlp["times"]["F"]["gemm"]
        else:
            gemm = gemm + share * (0.5 * mlp["grads"][2] if model.swiglu else mlp["out_grads"][2])
    return {"gemm": gemm, "memory": forward_memory}


def _up_projection_share(model: ModelConfig) -> float:
    """Share of an MLA layer's input-projection FLOPs in the up-projections recompute_modules mla_up_proj re-runs:
    the query's (linear_q_up_proj, or linear_q_proj without a query latent) and the key/value one."""
    mla, h = model.mla, float(model.hidden)
    q_in = float(mla.q_lora_rank or model.hidden)
    up = model.heads * (q_in * (mla.qk_head_dim + mla.qk_rope_dim) + mla.kv_lora_rank * (mla.qk_head_dim +
                                                                                         mla.v_head_dim))
    return up / (_attention_shape(model)[2] * h)


def _tensor_parallel(out: dict, act, t, sp, fabric: collective.Fabric, column_parallel: list,
                     row_parallel: list, branches: float = 2.0) -> None:
    """Add one layer's TP collectives to `out` (act: bytes of one s x b x h activation, the unit of every TP
    collective), and what GEMMs can hide of them: "hidden" (Megatron-LM's default backward overlap) and "overlap"
    (TP communication overlap). column_parallel / row_parallel: (share of layers, (input-gradient, weight-gradient,
    forward) GEMM seconds) of the QKV and MLP-in, and of the attention output and MLP-out linears (for a parallel
    block, each pair summed: one exchange serves both). branches: TP exchanges per direction, one per residual
    branch: two in a sequential block (attention, then MLP), one in a parallel block (GPT-J, GPT-NeoX, PaLM), whose
    attention and MLP share the normed input (one gather, one sum of their input gradients) and add their partial
    outputs before one all-reduce / reduce-scatter."""
    ar = tp_collective("all-reduce", act, t, fabric)
    half = tp_collective("all-gather", act, t, fabric)  # a reduce-scatter moves the same
    out["F"]["tp"] += np.where(sp, 2.0 * branches * half, branches * ar)
    # Backward: the column-parallel layers (QKV, MLP in) all-reduce their input gradient (SP: re-gather the sharded
    # input, then reduce-scatter the gradient); the row-parallel ones (SP only) all-gather their output gradient.
    # Megatron-LM runs the all-reduce / reduce-scatter behind the layer's own weight-gradient GEMM and the re-gather
    # behind its input-gradient GEMM; only the excess is exposed. A split backward (zero-bubble schedules) runs the
    # weight gradient later, so nothing hides there.
    out["B"]["tp"] += np.where(sp, 3.0 * branches * half, branches * ar)
    exposed = np.where(sp, branches * half, 0.0)
    for share, (dgrad, wgrad, _) in column_parallel:
        exposed = exposed + share * np.where(sp, np.maximum(half - dgrad, 0.0) + np.maximum(half - wgrad, 0.0),
                                             np.maximum(ar - wgrad, 0.0))
    out["hidden"] = {"tp": out["B"]["tp"] - exposed}  # what overlap hides when the backward is not split
    # TP communication overlap (Megatron-LM --tp-comm-overlap, Transformer Engine userbuffers; sequence parallel
    # only): each all-gather / reduce-scatter is split into chunks that run inside its neighbouring GEMM, forward and
    # backward; what a collective takes beyond its GEMM stays exposed. "B_split": without the weight-gradient GEMMs.
    pairs = list(zip(column_parallel, row_parallel, strict=True))
    fwd = sum(share * (np.minimum(half, g[2]) + np.minimum(half, o[2])) for (share, g), (_, o) in pairs)
    bwd_d = sum(share * (np.minimum(half, g[0]) + np.minimum(half, o[0])) for (share, g), (_, o) in pairs)
    bwd_w = sum(share * np.minimum(half, g[1]) for share, g in column_parallel)
    out["overlap"] = {"F": np.where(sp, fwd, 0.0), "B": np.where(sp, bwd_d + bwd_w, 0.0),
                      "B_split": np.where(sp, bwd_d, 0.0)}


def embedding_times(model: ModelConfig, r: Rates, micro_batch_size, t, sp, fabric: collective.Fabric) -> dict:
    """First stage: the vocabulary-parallel embedding lookup (+ learned positions, dropout) and its gradient."""
    b, t, sp = np.asarray(micro_batch_size, dtype=float), np.asarray(t, dtype=float), np.asarray(sp, dtype=bool)
    out = _zeros(np.broadcast(b, t, sp).shape)
    T, h = b * model.seq, model.hidden
    e_h = T * h / np.where(sp, t, 1.0)
    extra = (6.0 if model.position == "learned" else 0.0) + (3.0 if model.dropout else 0.0)
    out["F"]["memory"] += stream_time(r, 4.0 * T * h + extra * e_h)
    out["B"]["memory"] += stream_time(r, 10.0 * T * h + extra * e_h)  # scatter-add into the fp32 table gradient
    act = ACT * T * h
    out["F"]["tp"] += np.where(sp, tp_collective("reduce-scatter", act, t, fabric),
                               tp_collective("all-reduce", act, t, fabric))
    out["B"]["tp"] += np.where(sp, tp_collective("all-gather", act, t, fabric), 0.0)
    return out


def output_times(model: ModelConfig, r: Rates, micro_batch_size, t, sp, fabric: collective.Fabric,
                 fused: bool = True) -> dict:
    """Last stage: final norm, the logits GEMM (vocabulary-parallel) and the fp32 cross-entropy, with gradients."""
    b, t, sp = np.asarray(micro_batch_size, dtype=float), np.asarray(t, dtype=float), np.asarray(sp, dtype=bool)
    out = _zeros(np.broadcast(b, t, sp).shape)
    T, h, vocab = b * model.seq, model.hidden, model.vocab / t
    e_h = T * h / np.where(sp, t, 1.0)
    out["F"]["gemm"] += gemm_time(r, T, vocab, h)
    out["B"]["gemm"] += gemm_time(r, T, h, vocab)
    w_gemm, w_add = weight_gradient(r, h, vocab, T, fused)
    out["W"]["gemm"] += w_gemm
    out["W"]["memory"] += w_add
    fwd_ce, bwd_ce = CROSS_ENTROPY_BYTES
    out["F"]["memory"] += stream_time(r, 4.0 * e_h + fwd_ce * T * vocab)
    out["B"]["memory"] += stream_time(r, 6.0 * e_h + bwd_ce * T * vocab)
    act = ACT * T * h
    out["F"]["tp"] += np.where(sp, tp_collective("all-gather", act, t, fabric), 0.0)
    out["B"]["tp"] += np.where(sp, tp_collective("reduce-scatter", act, t, fabric),
                               tp_collective("all-reduce", act, t, fabric))
    return out


def mtp_times(model: ModelConfig, r: Rates, micro_batch_size, t, sp, fabric: collective.Fabric,
              fused: bool = True) -> dict:
    """What one multi-token prediction depth adds on the last stage besides its transformer layer: the shared
    embedding of the shifted tokens, the two input norms and the column-parallel 2h x h projection (Megatron-Core
    MultiTokenPredictionLayer eh_proj), and one more output layer with its loss (the shared output head)."""
    b, t = np.asarray(micro_batch_size, dtype=float), np.asarray(t, dtype=float)
    out = output_times(model, r, b, t, sp, fabric, fused)
    emb = embedding_times(model, r, b, t, sp, fabric)
    T, h = b * model.seq, model.hidden
    for ph in ("F", "B"):
        for c in COMPONENTS:
            out[ph][c] = out[ph][c] + emb[ph][c]
    e_h = T * h / np.where(np.asarray(sp, dtype=bool), t, 1.0)
    out["F"]["gemm"] += gemm_time(r, T, h / t, 2.0 * h)
    out["B"]["gemm"] += gemm_time(r, T, 2.0 * h, h / t)
    w_gemm, w_add = weight_gradient(r, 2.0 * h, h / t, T, fused)
    out["W"]["gemm"] += w_gemm
    out["W"]["memory"] += w_add
    out["F"]["memory"] += stream_time(r, 2 * 4.0 * e_h)  # enorm, hnorm (read and write 16-bit)
    out["B"]["memory"] += stream_time(r, 2 * 6.0 * e_h)
    return out


def total(times: dict, phases=PHASES) -> np.ndarray:
    """Sum over components of the given phases."""
    return sum(times[ph][c] for ph in phases for c in COMPONENTS)
