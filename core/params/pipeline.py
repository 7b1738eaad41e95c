"""Inputs of the pipeline engine (Pipeline page, `python -m core simulate`).

Caps are chosen so that the largest allowed configuration simulates in well under 2 s on the
2-core development machine (see bench/ and the README): MAX_OPS bounds the work whatever the mix.
"""

from __future__ import annotations

from core.params import Spec, table

SCHEDULE_NAMES = ("gpipe", "1f1b", "interleaved", "looped-bfs", "zb-h1", "zb-h2", "zbv", "v-half", "v-min", "dualpipev",
                  "dualpipe", "pipedream")

MAX_OPS = 1 << 20  # operations in one simulated timeline (all devices, all iterations)

PIPELINE = table(
    Spec("schedule", "choice", "1f1b", choices=SCHEDULE_NAMES, label="Schedule",
         help="Order in which each device runs its forward/backward operations."),
    Spec("p", "int", 4, 1, 64, label="Pipeline devices p",
         help="Number of devices in the pipeline (stages for non-interleaved schedules)."),
    Spec("m", "int", 8, 1, 1024, label="Micro-batches m", help="Micro-batches per iteration (per flush)."),
    Spec("v", "int", 2, 1, 8, label="Chunks per device v",
         help="Virtual stages per device; used by interleaved and looped-bfs (V schedules always use 2)."),
    Spec("tf", "float", 1.0, 0.001, 1000.0, label="Forward time t_f", unit="time units",
         help="Forward of one micro-batch through one device's share of the model."),
    Spec("tb", "float", 2.0, 0.001, 1000.0, label="Backward time t_b", unit="time units",
         help="Input-gradient backward of one micro-batch (the whole backward when t_w = 0)."),
    Spec("tw", "float", 0.0, 0.0, 1000.0, label="Weight-gradient time t_w", unit="time units",
         help="Weight-gradient part of the backward; schedules that do not split it run B as t_b + t_w."),
    Spec("tcomm", "float", 0.0, 0.0, 1000.0, label="Point-to-point latency t_comm", unit="time units",
         help="Added when a dependency crosses devices (activation or gradient send)."),
    Spec("iterations", "int", 1, 1, 16, label="Iterations",
         help="Training iterations simulated back to back (pipedream shows its steady state with 2+)."),
    Spec("recompute", "bool", False, label="Full recompute",
         help="Re-run each forward right before its backward; activations kept are only the stage inputs."),
    Spec("first_stage", "float", 1.0, 0.1, 5.0, label="First-stage cost factor",
         help="Multiplies every op of the first stage (embedding)."),
    Spec("last_stage", "float", 1.0, 0.1, 5.0, label="Last-stage cost factor",
         help="Multiplies every op of the last stage (logits and loss)."),
    Spec("stage_costs", "floats", (), 0.1, 5.0, max_items=512, label="Per-stage cost factors",
         help="Optional factor per global stage (stage 0 first); missing stages use 1. Overrides the two above."),
)
