"""Inputs of the pipeline engine (Pipeline page, `python -m core simulate`).

Caps are chosen so that the largest allowed configuration simulates in well under 2 s on the
2-core development machine (see bench/ and docs/engine.md): MAX_OPS bounds the work whatever the mix.
"""

from __future__ import annotations

from core.params import Spec, table
from core.params.registered import Registered

# Schedule names are the registry's (core.pipeline.schedules fills these when imported): every schedule, in the
# pages' order; those the planner searches, in its order; those it searches when the schedule is left at "all".
_OWNER = "core.pipeline.schedules"
SCHEDULE_NAMES = Registered("schedules", _OWNER)
SEARCH_SCHEDULES = Registered("planner schedules", _OWNER)
DEFAULT_SCHEDULES = Registered("default planner schedules", _OWNER)

MAX_OPS = 1 << 20  # operations in one simulated timeline (all devices, all iterations)

PIPELINE = table(
    Spec("schedule", "choice", "1f1b", choices=SCHEDULE_NAMES, label="Schedule",
         help="Order in which each device runs its forward/backward operations."),
    Spec("p", "int", 4, 1, 64, label="Pipeline devices p",
         help="Number of devices in the pipeline (stages for non-interleaved schedules)."),
    Spec("m", "int", 8, 1, 1024, label="Micro-batches m", help="Micro-batches per iteration (per flush)."),
    Spec("v", "int", 2, 1, 64, label="Chunks per device v",
         help="Virtual stages per device; used by interleaved and looped-bfs (V schedules always use 2). Up to 64: "
              "Megatron-LM's limit is one layer per virtual stage (v <= L / p; NVIDIA's GPT-3 175B and Nemotron-4 "
              "340B recipes run v = 12, 96 layers on p = 8)."),
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
         help="Optional factor per global stage (stage 0 first); missing stages use 1. Overrides the two above "
              "and the layer split's time (not its memory)."),
    Spec("layers", "int", 0, 0, 1024, label="Decoder layers L",
         help="Transformer layers split over the stages (0: stages are equal, no layer split). Needed for the "
              "first/last-stage layers and the embedding and output-layer costs."),
    Spec("first_stage_layers", "int", 0, 0, 1024, label="First-stage layers",
         help="Layers on the first stage, as Megatron-LM's --decoder-first-pipeline-num-layers (0: even split)."),
    Spec("last_stage_layers", "int", 0, 0, 1024, label="Last-stage layers",
         help="Layers on the last stage, as Megatron-LM's --decoder-last-pipeline-num-layers (0: even split)."),
    Spec("layers_per_stage", "floats", (), 0, 1024, max_items=512, label="Layers per stage",
         help="Whole layers of every stage on a micro-batch's path, e.g. 7,8,8,7 (p x chunks entries; DualPipe: p). "
              "Overrides the three above."),
    Spec("embed_time", "float", 0.0, 0.0, 100.0, label="Embedding time", unit="layers",
         help="Time of the embedding on the first stage, in layers' worth (about 0: a table lookup)."),
    Spec("head_time", "float", 0.0, 0.0, 100.0, label="Output layer + loss time", unit="layers",
         help="Time of the output layer and loss on the last stage, in layers' worth (about V/(12h) for "
              "vocabulary V and hidden size h)."),
    Spec("embed_memory", "float", 0.0, 0.0, 100.0, label="Embedding activations", unit="layers",
         help="Activations the embedding keeps per micro-batch, in layers' worth (small: its output is the "
              "first layer's input)."),
    Spec("head_memory", "float", 0.0, 0.0, 100.0, label="Output layer + loss activations", unit="layers",
         help="Activations the output layer and loss keep per micro-batch (fp32 logits), in layers' worth."),
)
