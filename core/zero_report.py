"""Everything the ZeRO page and `python -m core zero` show for one parameter set, as plain data.

Both call `build(ZeroParams(...))`, so a number checked through the CLI is the number on the page. Bytes
throughout; GB/GiB only when formatted (core.units).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from core import comm, deepspeed_estimate, fit, memory
from core.errors import InputError
from core.offload import placement, supported
from core.params.memory import ZeroParams
from core.units import GB


@dataclass(frozen=True)
class ZeroReport:
    inputs: ZeroParams
    psi_rank: float  # parameters per GPU before ZeRO (after the t x p split, most loaded stage)
    bytes_per_param: memory.BytesPerParam
    usable: float  # bytes per GPU for model states (and activations, which this report leaves out)
    stages: dict[str, dict]  # STAGE_KEYS -> row

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


def build(q: ZeroParams) -> ZeroReport:
    """Per-stage breakdown: components, GPU/CPU placement with offload, communication, fit, smallest N_d."""
    fit.check_gpu_count(q.t, q.p, q.nd, q.gpus)
    if q.split == "embedding-on-ends" and not q.embedding:
        raise InputError("embedding: the embedding-on-ends split needs the embedding size (vocabulary x hidden)")
    bpp = memory.preset(q.optimizer, q.precision, q.k)
    kw = bpp.kwargs()
    psi = float(memory.params_per_rank(q.params, q.t, q.p, q.split, q.embedding))
    usable = float(fit.usable_bytes(q.gpu_mem, q.reserve, q.reserve_frac))
    dp_total = float(memory.model_states(psi, q.nd, 0, **kw).total)
    chosen = selected_stages(q.stage)
    if q.offload != "none" and len(chosen) == 1:
        placement(psi, q.nd, chosen[0], q.offload, **kw)  # raises the clear error for an unsupported pair
    stages = {}
    for s in chosen:
        states = memory.model_states(psi, q.nd, s, **kw)
        mode = supported(q.offload, s)
        placed = placement(psi, q.nd, s, mode, largest_layer=per_rank_layer(q), **kw)
        sent = float(comm.zero_comm_bytes(psi, q.nd, s, bpp.param_bytes))
        gpu = float(placed.gpu_total)
        need = float(fit.min_nd(psi, s, usable, **kw)) if mode == "none" else float("nan")
        row = {
            "params": float(states.params), "grads": float(states.grads), "optimizer": float(states.optimizer),
            "total": float(states.total), "offload": mode, "gpu": gpu,
            "cpu_per_node": float(placed.cpu_per_node(q.gpus_per_node)),
            "floor": float(memory.floor_bytes(psi, s, **kw)),
            "reduction_vs_dp": dp_total / float(states.total),
            "comm_psi": float(comm.zero_volume_multiple(s)), "comm_bytes": sent, "comm_seconds": sent / (q.bw * GB),
            "usable": usable, "fits": bool(gpu <= usable), "smallest_nd": need,
        }
        if q.deepspeed and s in (2, 3):
            row |= _deepspeed(q, s)
        stages[memory.STAGE_KEYS[s]] = row
    return ZeroReport(q, psi, bpp, usable, stages)


def per_rank_layer(q: ZeroParams) -> float:
    return q.largest_layer / q.t


def _deepspeed(q: ZeroParams, stage: int) -> dict:
    """DeepSpeed's estimate for the same N_d, split into nodes of gpus_per_node (it knows nothing of t, p)."""
    per_node = min(q.gpus_per_node, q.nd)
    if q.nd % per_node:
        raise InputError(f"deepspeed: N_d = {q.nd} is not a whole number of {per_node}-GPU nodes")
    nodes = q.nd // per_node
    offload = q.offload != "none"
    if stage == 2:
        est = deepspeed_estimate.zero2(q.params, per_node, nodes, offload)
    else:
        est = deepspeed_estimate.zero3(q.params, q.largest_layer, per_node, nodes, offload,
                                       q.offload == "optimizer+params", True)
    return {"deepspeed_gpu": float(est["gpu"]), "deepspeed_cpu_per_node": float(est["cpu"])}
