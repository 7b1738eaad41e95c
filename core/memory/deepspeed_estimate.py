"""DeepSpeed's own memory estimate, reproduced to the byte, to set beside the paper's 16-bytes accounting.

Source (read, not copied): microsoft/DeepSpeed, deepspeed/runtime/zero/stage_1_and_2.py,
`estimate_zero2_model_states_mem_needs` (commit 022f223697296f182f1b677d83d41a4abb062b0b), and
deepspeed/runtime/zero/stage3.py, `estimate_zero3_model_states_mem_needs` (identical arithmetic at commits
70adb32aebc0e38fbeab7c4cadd9b7225d6bbaa4 and 0003660dc804f11976ecbc725585d43774952fab). Their `_all_live`
and `_all_cold` wrappers only loop over the option combinations and print bytes / 2^30 labelled "GB".

How it differs from the paper: gradients are counted in 32 bits next to the 16-bit ones (18 bytes per
parameter, not 16), stage 3 adds 4 bytes per parameter of the largest layer (its gathered 16-bit weights
and gradients), CPU memory is per node with a 1.5 safety factor, and without `zero.Init` every process
first builds the whole model on the CPU in 32 bits (4 bytes x GPUs per node). Stage 2 before the file was
renamed (deepspeed/runtime/zero/stage2.py, e.g. commit 5336cd0f7f3f4e593775ea5d3922fa9190020a33) used
4 Psi + 16 Psi / GPUs without offload; the documentation's printed example (docs/code-docs/source/
memory.rst, 15.93 "GB" for t5-3b on 8 GPUs) comes from that revision: `revision="legacy"`.

The arithmetic mirrors theirs operation by operation (same order, float64, truncation by int()), so the
results are equal to the byte for parameter counts below 2^53 / 18.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from core import validate
from core.errors import InputError
from core.memory.offload import placement
from core.memory.states import check_psi
from core.params.memory import MAX_PSI
from core.units import GIB

REVISIONS = ("current", "legacy")
FORMULA_REVISION = {"code": "current", "docs": "legacy"}  # core.params.memory.DS_ZERO2_FORMULAS -> revision
ZERO2_FORMULA = {  # the GPU term without offload, and where it is written
    "code": "2 Psi + 18 Psi / GPUs, DeepSpeed's code (stage_1_and_2.py)",
    "docs": "4 Psi + 16 Psi / GPUs, DeepSpeed's documentation (memory.rst, from the older stage2.py)",
}


def _ints(**arrays) -> dict:
    """Python ints for scalar results (as DeepSpeed returns), float64 arrays of whole numbers otherwise."""
    return {k: (int(v) if np.ndim(v) == 0 else v) for k, v in arrays.items()}


def _hardware(gpus_per_node, nodes) -> tuple[np.ndarray, np.ndarray]:
    g = validate.number("gpus_per_node", gpus_per_node, 1, 1024, integer=True)
    n = validate.number("nodes", nodes, 1, 1 << 20, integer=True)
    return g, n


def _factor(buffer_factor) -> np.ndarray:
    return validate.number("additional_buffer_factor", buffer_factor, 1.0, 10.0)


def zero2(total_params, gpus_per_node=1, nodes=1, cpu_offload=True, additional_buffer_factor=1.5,
          revision: str = "current") -> dict:
    """{'cpu': bytes per node, 'gpu': bytes per GPU} as estimate_zero2_model_states_mem_needs computes them."""
    P = check_psi(total_params, "total_params")
    g, n = _hardware(gpus_per_node, nodes)
    abf = _factor(additional_buffer_factor)
    revision = validate.choice("revision", revision, REVISIONS)
    offload = np.asarray(cpu_offload, dtype=bool)
    total_gpus = n * g
    if revision == "current":
        gpu_plain = 2 * P + np.floor(18 * P / total_gpus)
    else:
        gpu_plain = 4 * P + np.floor(16 * P / total_gpus)
    gpu = np.where(offload, 2 * P, gpu_plain)
    cpu = np.where(offload, P * np.maximum(4 * total_gpus, 16) * abf, P * 4 * g * abf)
    return _ints(cpu=np.floor(cpu), gpu=np.floor(gpu))


def zero3(total_params, largest_layer_params, gpus_per_node=1, nodes=1, cpu_offload=True,
          cpu_offload_params=True, zero_init=True, additional_buffer_factor=1.5) -> dict:
    """{'cpu', 'gpu', 'largest_layer_memory'} as estimate_zero3_model_states_mem_needs computes them."""
    P = check_psi(total_params, "total_params")
    L = validate.number("largest_layer_params", largest_layer_params, 0, MAX_PSI)
    if (L > P).any():
        raise InputError("largest_layer_params: cannot exceed total_params")
    g, n = _hardware(gpus_per_node, nodes)
    abf = _factor(additional_buffer_factor)
    opt = np.asarray(cpu_offload, dtype=bool)
    par = np.asarray(cpu_offload_params, dtype=bool)
    init = np.asarray(zero_init, dtype=bool)
    if (par & ~opt).any():
        raise InputError("cpu_offload_params: DeepSpeed offloads parameters only together with the optimizer")
    total_gpus = n * g
    gpus_factor = 1 / n
    layer_mem = 4 * L
    gpu = np.where(opt, np.where(par, layer_mem, layer_mem + np.floor(2 * P / total_gpus)),
                   layer_mem + np.floor(18 * P / total_gpus))
    cpu_both = np.where(init, P * 18 * gpus_factor * abf, P * np.maximum(4 * g, 18 * gpus_factor) * abf)
    cpu_opt = np.where(init, P * 16 * gpus_factor * abf, P * np.maximum(4 * g, 16 * gpus_factor) * abf)
    cpu_none = np.where(init, L * 4 * g * abf, P * 4 * g * abf)
    cpu = np.where(opt, np.where(par, cpu_both, cpu_opt), cpu_none)
    out = _ints(cpu=np.floor(cpu), gpu=np.floor(gpu))
    out["largest_layer_memory"] = float(layer_mem) if np.ndim(layer_mem) == 0 else layer_mem
    return out


def printed_zero2(total_params, gpus_per_node=1, nodes=1, additional_buffer_factor=1.5,
                  revision: str = "current") -> pd.DataFrame:
    """The rows estimate_zero2_model_states_mem_needs_all_cold prints, with bytes and the printed text."""
    rows = []
    for offload in (True, False):
        est = zero2(total_params, gpus_per_node, nodes, offload, additional_buffer_factor, revision)
        rows.append(_printed_row(est, f"offload_optimizer={'cpu' if offload else 'none'}"))
    return pd.DataFrame(rows)


def printed_zero3(total_params, largest_layer_params, gpus_per_node=1, nodes=1,
                  additional_buffer_factor=1.5) -> pd.DataFrame:
    """The six rows estimate_zero3_model_states_mem_needs_all_cold prints, in its order."""
    rows = []
    for opt, par in ((True, True), (True, False), (False, False)):
        for init in (True, False):
            est = zero3(total_params, largest_layer_params, gpus_per_node, nodes, opt, par, init,
                        additional_buffer_factor)
            options = (f"offload_param={'cpu' if par else 'none'}, offload_optimizer={'cpu' if opt else 'none'}, "
                       f"zero_init={int(init)}")
            rows.append(_printed_row(est, options))
    return pd.DataFrame(rows)


def _printed_row(est: dict, options: str) -> dict:
    return {
        "options": options,
        "per CPU [bytes]": est["cpu"],
        "per GPU [bytes]": est["gpu"],
        "per CPU [GiB]": est["cpu"] / GIB,
        "per GPU [GiB]": est["gpu"] / GIB,
        "printed (GiB labelled GB)": f" {est['cpu'] / GIB:7.2f}GB | {est['gpu'] / GIB:6.2f}GB | {options}",
    }


def compare_with_paper(psi, largest_layer_params, gpus_per_node=8, nodes=1, zero_init=True) -> pd.DataFrame:
    """Paper accounting (mixed-precision Adam, bytes moved as they are) beside DeepSpeed's estimate."""
    g, n = _hardware(gpus_per_node, nodes)
    nd = float(g * n)
    cases = (
        (2, "none", False, False), (2, "optimizer", True, False),
        (3, "none", False, False), (3, "optimizer", True, False), (3, "optimizer+params", True, True),
    )
    rows = []
    for stage, offload, opt, par in cases:
        paper = placement(psi, nd, stage, offload, largest_layer=largest_layer_params)
        if stage == 2:
            ds = zero2(psi, g, n, opt)
        else:
            ds = zero3(psi, largest_layer_params, g, n, opt, par, zero_init)
        rows.append({
            "stage": stage,
            "offload": offload,
            "paper GPU [bytes]": float(paper.gpu_total),
            "paper CPU per node [bytes]": float(paper.cpu_per_node(g)),
            "DeepSpeed GPU [bytes]": float(ds["gpu"]),
            "DeepSpeed CPU per node [bytes]": float(ds["cpu"]),
        })
    return pd.DataFrame(rows)
