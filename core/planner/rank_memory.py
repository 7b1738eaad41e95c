"""Bytes on one GPU of every candidate: the planner's candidate arrays handed to the one memory function,
core.memory.per_gpu (the same function the ZeRO page and `python -m core zero` use), in one vectorised call.

A candidate's parameters sit on the most loaded stage (embedding on the first, output layer on the last, everything
over t), their model states under ZeRO over d x cp with offload and ZeRO-3's gathered working layers, the routed
experts over ep x etp, and the activations each end stage holds for the micro-batches the simulator says are in
flight. No formula here: this module only maps the candidate columns onto core.memory.per_gpu's records.
"""

from __future__ import annotations

import numpy as np

from core.memory import device_activations, per_gpu
from core.model import presets


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


def _config(model, c: dict, bpp, fp8: bool, rows=slice(None), capacity: float = 1.0,
            inflight: per_gpu.InFlight | None = None, ends_in_split: bool = False,
            cp_comm: str = "p2p") -> per_gpu.MemoryConfig:
    """The candidates `rows` as core.memory.per_gpu's records."""
    layout = per_gpu.Layout(t=c["t"][rows], p=c["p"][rows], d=c["d"][rows], cp=c["cp"][rows], ep=c["ep"][rows],
                            etp=c["etp"][rows], chunks=c["chunks"][rows], zero=c["zero"][rows],
                            offload=c["offload_name"][rows].astype(object), reshard=c["reshard"][rows],
                            ends_in_split=ends_in_split)
    training = per_gpu.Training(micro_batch_size=c["b"][rows], sequence_parallel=c["sp"][rows],
                                recompute=c["recompute_name"][rows], fp8=fp8, bytes_per_param=bpp,
                                moe_capacity=capacity, cp_comm=cp_comm)
    return per_gpu.MemoryConfig(per_gpu.ModelMemory.of(model), layout, training, inflight or per_gpu.InFlight())


def states(model, bpp, c: dict, fp8: bool = False, ends_in_split: bool = False,
           last_on_first: np.ndarray | bool = False) -> dict[str, np.ndarray]:
    """Per-GPU model-state bytes of every candidate (dense and routed experts): all of them, what stays on the GPU
    after offload, ZeRO-3's gathered layers; and the experts' share, rank and ZeRO group (for the step time)."""
    inflight = per_gpu.InFlight(last_on_first=last_on_first)  # a V shape: both ends' matrices on the first device
    got = per_gpu.model_state_parts(_config(model, c, bpp, fp8, inflight=inflight, ends_in_split=ends_in_split))
    return {"psi_rank": got.psi_rank, "model_state_bytes": got.states, "states_on_gpu_bytes": got.states_on_gpu,
            "zero3_working_bytes": got.working + got.gathered, "expert_state_bytes": np.broadcast_to(got.expert_states,
                                                                                      got.psi_rank.shape),
            "expert_rank": got.expert_rank, "expert_group": got.expert_group}


def activations(model, c: dict, order: dict, last_on_first: np.ndarray, rows: np.ndarray, fp8: bool = False,
                capacity: float = 1.0, ends_in_split: bool = False, cp_comm: str = "p2p"
                ) -> tuple[np.ndarray, np.ndarray]:
    """Peak activation bytes per GPU where `rows` (NaN elsewhere) and which device holds them ("first" / "last" /
    "middle"): core.memory.device_activations.activation_bytes with the simulator's micro-batches in flight (`order`:
    core.planner.simulation.ORDER_FIELDS)."""
    out = np.full(c["t"].size, np.nan)
    worst = np.full(c["t"].size, None, dtype=object)
    if rows.any():
        inflight = per_gpu.InFlight(order["inflight"][rows], order["inflight_last"][rows], last_on_first[rows],
                                    order["inflight_middle"][rows], order["held_first_stage"][rows],
                                    order["held_last_stage"][rows])
        cfg = _config(model, c, per_gpu.ADAM_MIXED, fp8, rows, capacity, inflight, ends_in_split, cp_comm)
        out[rows], worst[rows] = device_activations.activation_bytes(cfg)
    return out, worst
