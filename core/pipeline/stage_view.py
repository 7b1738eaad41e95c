"""Per-stage table for the Pipeline page and the CLI: where each stage lives, what it holds, what it costs.

One row per stage on a micro-batch's path: the device(s) that run it (two for DualPipe's two copies),
its layers, whether it holds the embedding or the output layer + loss, its time factor (x an equal
stage) and one micro-batch's activations (micro-batches of L/p layers, the unit of peak_activation).
Shown when stages differ; empty when they are all equal.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from core.pipeline.result import PipelineResult
from core.pipeline.stages import balanced_first_last, split_layers, time_factors


def stage_table(result: PipelineResult, always: bool = False) -> list[dict[str, Any]]:
    prm, s = result.params, result.schedule
    split = prm.layer_split()
    factors = prm.stage_factors()
    memory = result.timeline.stage_memory
    if not always and split is None and not prm.uneven:
        return []
    stage_of = s.stage_map
    rows = []
    for st in range(s.num_stages):
        devices = sorted({int(d) for d, _ in np.argwhere(stage_of == st)})
        ends = [w for w, on in (("embedding", st == 0), ("output layer + loss", st == s.num_stages - 1)) if on]
        rows.append({"stage": st, "devices": ", ".join(map(str, devices)),
                     "layers": None if split is None else split[st], "holds": " + ".join(ends) or "",
                     "time factor": factors[st], "activations per micro-batch": float(memory[st])})
    return rows


def balance_hint(result: PipelineResult) -> str:
    """A first/last-stage layer count that evens out the embedding and output layer, when it helps."""
    prm = result.params
    if not prm.layers or prm.layers_per_stage or prm.stage_costs or not (prm.embed_time or prm.head_time):
        return ""
    n = prm.num_stages
    first, last = balanced_first_last(prm.layers, n, prm.embed_time, prm.head_time)
    if not first:
        return ""
    now = max(time_factors(split_layers(prm.layers, n, prm.first_stage_layers, prm.last_stage_layers),
                           prm.embed_time, prm.head_time))
    best = max(time_factors(split_layers(prm.layers, n, first, last), prm.embed_time, prm.head_time))
    if best >= now - 1e-9:
        return ""
    return (f"first-stage layers {first} and last-stage layers {last} (--first-stage-layers {first} "
            f"--last-stage-layers {last}) bring the slowest stage from {now:.3g}x to {best:.3g}x an equal stage")
