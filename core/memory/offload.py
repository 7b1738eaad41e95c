"""ZeRO-Offload / ZeRO-Infinity in the paper's accounting: which model-state components leave the GPU.

ZeRO-Offload (Ren et al. 2021) runs Adam on the CPU: the optimizer state moves to host memory, and from
stage 2 on the gradient shard follows it (the CPU optimizer consumes it). ZeRO-Infinity (Rajbhandari et
al. 2021) at stage 3 also keeps the parameter shards in host memory and streams each layer in when it
runs. Its third tier, `nvme`, puts the parameter shards and the optimizer state on the node's NVMe drives
(DeepSpeed offload_param / offload_optimizer device "nvme"); the gradient shards stay in CPU memory, where
the CPU optimizer reads them. Bytes are moved as they are, so GPU + CPU + NVMe equals the no-offload total;
DeepSpeed's own estimator counts differently (32-bit gradients on the CPU, a 1.5 buffer factor, no NVMe):
see core.memory.deepspeed_estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core import validate
from core.errors import InputError
from core.memory.states import COMPONENTS, check_stage, model_states
from core.params.memory import MAX_PSI, OFFLOADS

PARAM_OFFLOADS = ("optimizer+params", "nvme")  # the ZeRO-Infinity modes: parameters leave the GPU (stage 3)
NVME_COMPONENTS = ("params", "optimizer")  # what the nvme mode puts on the drives; gradients stay in CPU memory


@dataclass(frozen=True)
class Placement:
    """Bytes per GPU rank that stay on the GPU and that move to the CPU, by component."""

    gpu: dict[str, np.ndarray]
    cpu: dict[str, np.ndarray]
    working: np.ndarray  # gathered layer (params + grads) streamed through the GPU, ZeRO-Infinity only
    nvme: dict[str, np.ndarray] | None = None  # what sits on NVMe (the nvme mode), per GPU rank

    @property
    def gpu_total(self) -> np.ndarray:
        return sum(self.gpu.values()) + self.working

    @property
    def cpu_total(self) -> np.ndarray:
        return sum(self.cpu.values())

    def cpu_per_node(self, gpus_per_node) -> np.ndarray:
        return self.cpu_total * validate.number("gpus_per_node", gpus_per_node, 1, 1024, integer=True)

    @property
    def nvme_total(self) -> np.ndarray:
        return sum(self.nvme.values()) if self.nvme else np.zeros_like(self.working)

    def nvme_per_node(self, gpus_per_node) -> np.ndarray:
        return self.nvme_total * validate.number("gpus_per_node", gpus_per_node, 1, 1024, integer=True)


def supported(offload: str, stage: int) -> str:
    """The offload a stage can use when a table shows all stages: none for DP, optimizer-only below 3."""
    offload = validate.choice("offload", offload, OFFLOADS)
    if stage == 0:
        return "none"
    if offload in PARAM_OFFLOADS and stage < 3:
        return "optimizer"
    return offload


def moved_components(offload: str, stage) -> dict[str, np.ndarray]:
    """Boolean per component: True where it lives on the CPU for this offload mode and ZeRO stage."""
    offload = validate.choice("offload", offload, OFFLOADS)
    stage = check_stage(stage)
    if offload != "none" and (stage < 1).any():
        raise InputError("offload: needs ZeRO stage 1 or higher (DeepSpeed offloads the partitioned state)")
    if offload in PARAM_OFFLOADS and (stage < 3).any():
        raise InputError(f"offload: {offload} (ZeRO-Infinity) needs ZeRO stage 3")
    on = offload != "none"
    return {
        "params": np.broadcast_to(offload in PARAM_OFFLOADS, stage.shape),
        "grads": on & (stage >= 2),
        "optimizer": np.broadcast_to(on, stage.shape),
    }


def placement(psi, nd, stage, offload: str = "none", k=12.0, param_bytes=2.0, grad_bytes=2.0,
              largest_layer=0.0, sharded_from=()) -> Placement:
    """Split a rank's model states between GPU and CPU. `largest_layer` (parameters) adds, when the
    parameters are offloaded, the full 16-bit parameters and gradients of the layer being computed."""
    states = model_states(psi, nd, stage, k, param_bytes, grad_bytes, sharded_from)
    moved = moved_components(offload, stage)
    layer = validate.number("largest_layer", largest_layer, 0, MAX_PSI)
    gpu = {c: np.where(moved[c], 0.0, getattr(states, c)) for c in COMPONENTS}
    cpu = {c: np.where(moved[c], getattr(states, c), 0.0) for c in COMPONENTS}
    working = np.where(moved["params"], (np.asarray(param_bytes) + np.asarray(grad_bytes)) * layer, 0.0)
    nvme = None
    if offload == "nvme":
        nvme = {c: cpu[c] if c in NVME_COMPONENTS else np.zeros_like(cpu[c]) for c in COMPONENTS}
        cpu = {c: np.zeros_like(cpu[c]) if c in NVME_COMPONENTS else cpu[c] for c in COMPONENTS}
    return Placement(gpu, cpu, working, nvme)


def nvme_traffic(psi, nd, k=12.0, param_bytes=2.0, micro_batches=1) -> np.ndarray:
    """Bytes one rank reads and writes on NVMe per optimizer step in the nvme mode (stage 3): its parameter
    shard read for every forward and every backward, the optimizer state read and written once, the updated
    parameter shard written once."""
    states = model_states(psi, nd, 3, k, param_bytes, 0.0)
    m = validate.number("micro_batches", micro_batches, 1, 1 << 20, integer=True)
    return (2.0 * m + 1.0) * states.params + 2.0 * states.optimizer
