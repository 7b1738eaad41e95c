"""Communication volume and time of the collectives used by data, ZeRO, tensor and pipeline parallelism.

Ring algorithms on n ranks: an all-reduce sends 2(n-1)/n of the buffer per rank (a reduce-scatter then an
all-gather, each (n-1)/n). `RING_COEFFICIENT` x (n-1)/n is the one place that factor lives; the ZeRO
volumes in multiples of Psi (2, 2, 2, 3) are those coefficients summed over each stage's collectives.
What a collective costs in seconds is core.cost.collective's alone (zero_comm_seconds asks it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from core import validate
from core.cost import collective
from core.memory.states import PAPER_NAMES, STAGE_KEYS, STAGE_LABELS, check_nd, check_psi, check_stage
from core.params.memory import MAX_BANDWIDTH_GBS, MAX_GPUS, MAX_TP
from core.units import GB

COLLECTIVES = ("all-reduce", "reduce-scatter", "all-gather")
RING_COEFFICIENT = collective.RING_COEFFICIENT  # buffers sent per rank as n -> inf

# What each ZeRO stage communicates per step, as (collective, what) over Psi elements (ZeRO paper, sec. 7).
ZERO_COLLECTIVES = {
    0: (("all-reduce", "gradients"),),
    1: (("reduce-scatter", "gradients"), ("all-gather", "updated parameters")),
    2: (("reduce-scatter", "gradients"), ("all-gather", "updated parameters")),
    3: (("all-gather", "parameters, forward"), ("all-gather", "parameters, backward"),
        ("reduce-scatter", "gradients")),
}


def ring_factor(collective: str, n) -> np.ndarray:
    """Buffers sent per rank by a ring collective on n ranks: 2(n-1)/n or (n-1)/n; exactly 0 for n = 1."""
    collective = validate.choice("collective", collective, COLLECTIVES)
    n = validate.number("n", n, 1, MAX_GPUS, integer=True)
    return RING_COEFFICIENT[collective] * (n - 1) / n


def collective_bytes(collective: str, nbytes, n) -> np.ndarray:
    """Bytes each rank sends in a ring collective over a buffer of `nbytes` on n ranks."""
    nbytes = validate.number("nbytes", nbytes, 0, 1e18)
    return ring_factor(collective, n) * nbytes


def zero_volume_multiple(stage) -> np.ndarray:
    """Communication per step in multiples of Psi elements as N_d grows: 2, 2, 2, 3 for stages 0-3."""
    stage = check_stage(stage).astype(np.int64)
    table = np.array([sum(RING_COEFFICIENT[c] for c, _ in ZERO_COLLECTIVES[s]) for s in range(4)], dtype=float)
    return table[stage]


def volume_units_note(bytes_per_value: float = 2.0) -> str:
    """Where the course's wording differs: the chapter (seed 002) writes DDP's all-reduce as "2 Psi bytes";
    the ZeRO paper and this tool count Psi values, so the bytes are the volume times the bytes per value."""
    b = float(validate.number("bytes_per_value", bytes_per_value, 0.5, 8))
    return (f"Psi counts values, not bytes. With {b:g}-byte values, 2 Psi is {2 * b:g} Psi bytes and 3 Psi is "
            f"{3 * b:g} Psi bytes. The chapter writes \"about 2 Psi bytes\" for DDP's all-reduce: read it as 2 Psi "
            "values.")


def zero_comm_bytes(psi, nd, stage, bytes_per_value=2.0) -> np.ndarray:
    """Bytes each rank sends per step for a stage's collectives on N_d ranks (16-bit values by default)."""
    psi, nd = check_psi(psi), check_nd(nd)
    bytes_per_value = validate.number("bytes_per_value", bytes_per_value, 0.5, 8)
    return zero_volume_multiple(stage) * (nd - 1) / nd * psi * bytes_per_value


def zero_comm_seconds(psi, nd, stage: int, bandwidth_gbs=100.0, bytes_per_value=2.0, per_node: int = 1) -> float:
    """Seconds per step of a stage's collectives over the whole shard, each costed as NCCL runs it
    (core.cost.collective: its algorithm's latency, then the bytes at `bandwidth_gbs` per rank), with `per_node`
    of the N_d ranks in each server and the same bandwidth on every link."""
    psi, nd = float(check_psi(psi)), int(check_nd(nd))
    bandwidth = float(validate.number("bandwidth", bandwidth_gbs, 0.001, MAX_BANDWIDTH_GBS)) * GB
    bytes_per_value = float(validate.number("bytes_per_value", bytes_per_value, 0.5, 8))
    per_node = int(validate.number("per_node", per_node, 1, MAX_GPUS, integer=True))
    fabric = collective.Fabric(bandwidth, bandwidth, max(per_node, 1))
    stage = int(check_stage(stage))
    return float(sum(collective.seconds(c, psi * bytes_per_value, nd, min(per_node, nd), fabric)
                     for c, _ in ZERO_COLLECTIVES[stage]))


def zero_comm_table(psi, nd, bandwidth_gbs=100.0, bytes_per_value=2.0, per_node: int = 1) -> pd.DataFrame:
    """One row per stage: collectives, volume in Psi, bytes per rank and time at the given bandwidth (each
    collective's NCCL latency included: zero_comm_seconds)."""
    rows = []
    for s in range(4):
        sent = float(zero_comm_bytes(psi, nd, s, bytes_per_value))
        rows.append({
            "stage": s,
            "stage_label": STAGE_LABELS[s],
            "ZeRO paper": PAPER_NAMES[s],
            "key": STAGE_KEYS[s],
            "collectives": " + ".join(f"{c} ({what})" for c, what in ZERO_COLLECTIVES[s]),
            "volume [x Psi]": float(zero_volume_multiple(s)),
            "sent per rank [bytes]": sent,
            "time [s]": zero_comm_seconds(psi, nd, s, bandwidth_gbs, bytes_per_value, per_node),
        })
    return pd.DataFrame(rows)


def tp_layer_bytes(seq, micro_batch_size, hidden, t, recompute: str = "none", bytes_per_value=2.0) -> np.ndarray:
    """Bytes a tensor-parallel rank sends per transformer layer per micro-batch (forward + backward).

    Megatron-LM: two all-reduces of the s x b x h activations in the forward pass and two in the
    backward; sequence parallelism swaps each for a reduce-scatter + all-gather pair of the same volume;
    full recomputation repeats the forward's two. Zero when t = 1.
    """
    t = validate.number("t", t, 1, MAX_TP, integer=True)
    count = 4 + 2 * (validate.choice("recompute", recompute, ("none", "selective", "full")) == "full")
    return count * ring_factor("all-reduce", t) * _activation_bytes(seq, micro_batch_size, hidden, bytes_per_value)


def p2p_bytes(seq, micro_batch_size, hidden, t=1, sequence_parallel=False, bytes_per_value=2.0) -> np.ndarray:
    """Bytes of one micro-batch's activation (or its gradient) crossing a pipeline-stage boundary.

    With sequence parallelism each tensor-parallel rank sends only its 1/t slice of the sequence.
    """
    t = validate.number("t", t, 1, MAX_TP, integer=True)
    sent = _activation_bytes(seq, micro_batch_size, hidden, bytes_per_value)
    return sent / np.where(np.asarray(sequence_parallel), t, 1)


def p2p_bytes_per_step(seq, micro_batch_size, hidden, m, v=1, t=1, sequence_parallel=False,
                       bytes_per_value=2.0) -> np.ndarray:
    """Bytes an inner pipeline stage sends per step: m micro-batches forward, m gradients back, x v chunks."""
    m = validate.number("m", m, 1, 1 << 20, integer=True)
    v = validate.number("v", v, 1, 64, integer=True)
    return 2 * m * v * p2p_bytes(seq, micro_batch_size, hidden, t, sequence_parallel, bytes_per_value)


def _activation_bytes(seq, micro_batch_size, hidden, bytes_per_value) -> np.ndarray:
    s = validate.number("seq", seq, 1, 1 << 24, integer=True)
    b = validate.number("mb", micro_batch_size, 1, 1 << 20, integer=True)
    h = validate.number("hidden", hidden, 1, 1 << 20, integer=True)
    return s * b * h * validate.number("bytes_per_value", bytes_per_value, 0.5, 8)
