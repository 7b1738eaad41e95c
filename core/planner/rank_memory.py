"""Bytes on one GPU of every candidate: the planner's candidate arrays handed to the one memory function,
core.memory.per_gpu (the same function the ZeRO page and `python -m core zero` use), in one vectorised call.

A candidate's parameters sit on the most loaded stage (embedding on the first, output layer on the last, everything
over t), their model states under ZeRO over d x cp with offload and ZeRO-3's gathered working layers, the routed
experts over ep x etp, and the activations each end stage holds for the micro-batches the simulator says are in
flight. No formula here: this module only maps the candidate columns onto core.memory.per_gpu's records.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.frameworks import PREFERENCE
from core.memory import device_activations, per_gpu
from core.memory import framework_terms as terms
from core.model import presets
from core.params.memory import RECOMPUTE_MODULES_DEFAULT


def embedding_params(model: presets.ModelConfig) -> float:
    """Parameters of one V x h embedding matrix (the ZeRO page's `embedding` input for the same split)."""
    return float(model.vocab * model.hidden)


def params_per_rank(model: presets.ModelConfig, t, p, ends_in_split: bool = False
                    ) -> tuple[np.ndarray, np.ndarray, str]:
    """(parameters on one GPU of the most loaded stage, parameters of one transformer layer per TP rank, the
    assumption in words), as core.memory.per_gpu.dense_split places them."""
    mem = per_gpu.ModelMemory.of(model)
    rank, layer = per_gpu.dense_split(mem, t, p, 1, ends_in_split)
    emb = embedding_params(model)
    if emb * (1 if model.tied else 2) >= mem.dense_params:
        return rank, layer, "parameters split evenly over t x p (the given count is smaller than the embeddings)"
    output = f"the output layer ({'tied copy' if model.tied else 'untied matrix'})"
    if ends_in_split:
        words = ("whole layers per stage, the embedding and the loss taking a layer slot each on the first and the "
                 f"last stage (the {emb / 1e9:.3g}B-parameter embedding on the first, {output} on the last), every "
                 "matrix over t")
    else:
        words = ("layers split evenly over p stages and every matrix over t; the first stage also holds the "
                 f"{emb / 1e9:.3g}B-parameter embedding and the last stage {output}")
    return rank, layer, words


def accounting_keys(framework: str, c, counted: str = "auto") -> np.ndarray:
    """Whose bytes each candidate is counted in: `counted` where the question names one, else the question's
    framework, or under `any` the first of core.frameworks.PREFERENCE that runs the row (Megatron-LM's where no
    framework runs it)."""
    if counted != "auto":
        return np.full(c.t.size, counted, dtype=object)
    if framework != "any":
        return np.full(c.t.size, framework, dtype=object)
    first = {}
    for runs in set(c.frameworks.tolist()):
        first[runs] = next((k for k in PREFERENCE if k in runs), PREFERENCE[0])
    return np.array([first[r] for r in c.frameworks.tolist()], dtype=object)


def _groups(keys: np.ndarray, rows=None):
    """(key, boolean mask) per accounting among `rows` (all when None)."""
    keys = np.asarray(keys, dtype=object)
    rows = np.ones(keys.size, dtype=bool) if rows is None else rows
    for key in sorted(set(keys[rows].tolist())):
        yield key, rows & (keys == key)


@dataclass(frozen=True)
class Options:
    """The question-wide settings memory reads: FP8, the MoE capacity factor, the ends in the pipeline split, the
    context-parallel K/V exchange, torch.compile and the attention's K/V width and recompute (PyTorch rows), the
    gradient and optimizer-state precisions and the cross-entropy kernel."""

    fp8: bool = False
    capacity: float = 1.0
    ends_in_split: bool = False
    cp_comm: str = "p2p"
    compiled: bool = False
    grad_dtype: str = "auto"
    optimizer_dtype: str = "fp32"
    loss: str = "auto"
    fp16: bool = False  # fp16 rather than bf16 (a framework's gradient buffer may follow it)
    grouped_gemm: bool = True  # Megatron-LM MoE layers through Transformer Engine's grouped GEMM
    recompute_modules: tuple = RECOMPUTE_MODULES_DEFAULT  # what Megatron-LM's selective recompute re-runs
    repeat_kv: bool = False  # PyTorch rows' attention widens K and V to every query head
    sac_attention: bool = True  # PyTorch rows' per-op recompute saves the attention's output


def _config(model, c: dict, bpp, o: Options, rows=slice(None), inflight: per_gpu.InFlight | None = None,
            key: str = "textbook") -> per_gpu.MemoryConfig:
    """The candidates `rows` as core.memory.per_gpu's records, counted in accounting `key`."""
    layout = per_gpu.Layout(t=c["t"][rows], p=c["p"][rows], d=c["d"][rows], cp=c["cp"][rows], ep=c["ep"][rows],
                            etp=c["etp"][rows], chunks=c["chunks"][rows], zero=c["zero"][rows],
                            offload=c["offload_name"][rows].astype(object), reshard=c["reshard"][rows],
                            ends_in_split=o.ends_in_split, replicate=c["replicate"][rows])
    m = c.m[rows] if c.m is not None else 1
    training = per_gpu.Training(micro_batch_size=c["b"][rows], sequence_parallel=c["sp"][rows],
                                recompute=c["recompute_name"][rows], fp8=o.fp8, bytes_per_param=bpp,
                                moe_capacity=o.capacity, cp_comm=o.cp_comm, micro_batches=m, compiled=o.compiled,
                                repeat_kv=o.repeat_kv, sac_attention=o.sac_attention,
                                grad_dtype=o.grad_dtype, optimizer_dtype=o.optimizer_dtype, loss=o.loss,
                                fp16=o.fp16, recompute_layers=c["recompute_layers"][rows],
                                tp_overlap=c["tp_comm_overlap"][rows], grouped_gemm=o.grouped_gemm,
                                recompute_modules=o.recompute_modules)
    return per_gpu.MemoryConfig(per_gpu.ModelMemory.of(model), layout, training, inflight or per_gpu.InFlight(),
                                accounting=key)


STATE_KEYS = ("psi_rank", "model_state_bytes", "states_on_gpu_bytes", "zero3_working_bytes", "expert_state_bytes",
              "expert_rank", "expert_group", "buffer_bytes", "step_bytes", "pool_bytes", "comm_groups")


def states(model, bpp, c: dict, keys: np.ndarray, o: Options, last_on_first: np.ndarray | bool = False
           ) -> dict[str, np.ndarray]:
    """Per-GPU model-state bytes of every candidate in its accounting (`keys`, accounting_keys) (dense and routed
    experts): all of them, what stays on the GPU after offload (gradients as they exist at the activation peak),
    ZeRO-3's gathered layers, the framework's buffers and its optimizer step's moment; and the experts' share, rank
    and ZeRO group (for the step time)."""
    out = {k: np.zeros(c.t.size) for k in STATE_KEYS}
    v_shape = np.broadcast_to(np.asarray(last_on_first, dtype=bool), (c.t.size,))
    for key, rows in _groups(keys):
        inflight = per_gpu.InFlight(last_on_first=v_shape[rows])  # a V shape: both ends' matrices on the first device
        got = per_gpu.model_state_parts(_config(model, c, bpp, o, rows, inflight, key))
        part = {"psi_rank": got.psi_rank, "model_state_bytes": got.states, "states_on_gpu_bytes": got.states_on_gpu,
                "zero3_working_bytes": got.working + got.gathered, "expert_state_bytes": got.expert_states,
                "expert_rank": got.expert_rank, "expert_group": got.expert_group, "buffer_bytes": got.buffers,
                "step_bytes": got.step_moment, "pool_bytes": got.pools,
                "comm_groups": terms.groups(*(c[k][rows] for k in ("t", "p", "d", "cp", "ep")))}
        for k in STATE_KEYS:
            out[k][rows] = np.broadcast_to(part[k], (int(rows.sum()),))
    return out


def device(keys: np.ndarray, peak: np.ndarray, st: dict) -> dict[str, np.ndarray]:
    """From each candidate's activation-peak tensors and its states record (`st`, states: the optimizer step's
    moment, the side pools, the communicators): the step's excess, the allocator's reserve and what sits outside the
    allocator (core.memory.per_gpu.device_extras), in its accounting; NaN where the peak is."""
    out = {k: np.full(peak.size, np.nan) for k in ("step", "reserve", "outside")}
    known = np.isfinite(peak)
    for key, rows in _groups(keys, known):
        for k, x in per_gpu.device_extras(key, peak[rows], st["step_bytes"][rows], st["pool_bytes"][rows],
                                          st["comm_groups"][rows]).items():
            out[k][rows] = x
    return out


def activations(model, c: dict, order: dict, last_on_first: np.ndarray, rows: np.ndarray, keys: np.ndarray,
                o: Options) -> tuple[np.ndarray, np.ndarray]:
    """Peak activation bytes per GPU where `rows` (NaN elsewhere) and which device holds them ("first" / "last" /
    "middle"): core.memory.device_activations.activation_bytes with the simulator's micro-batches in flight (`order`:
    core.planner.simulation.ORDER_FIELDS), each candidate in its accounting (`keys`)."""
    out = np.full(c.t.size, np.nan)
    worst = np.full(c.t.size, None, dtype=object)
    for key, sel in _groups(keys, rows):
        inflight = per_gpu.InFlight(order["inflight"][sel], order["inflight_last"][sel], last_on_first[sel],
                                    order["inflight_middle"][sel], order["held_first_stage"][sel],
                                    order["held_last_stage"][sel])
        cfg = _config(model, c, per_gpu.ADAM_MIXED, o, sel, inflight, key)
        out[sel], worst[sel] = device_activations.activation_bytes(cfg)
    return out, worst
