"""The planner frame's columns and the CLI's JSON keys, in one place so the frame, its CSV, the excluded rows and
`--json` name the same things in the same order.
"""

from __future__ import annotations

import pandas as pd

from core.cost import step_time

# Step-time components (core.cost.step_time.BREAKDOWN) as frame columns; in JSON they are one `breakdown` object.
BREAKDOWN_COLUMNS = step_time.COLUMN
JSON_KEYS = ("rank", "t", "p", "d", "cp", "ep", "etp", "zero_stage", "reshard", "schedule", "v", "tp_comm_overlap",
             "micro_batch_size", "m",
             "recompute", "sequence_parallel", "offload", "memory_bytes", "model_state_bytes", "states_on_gpu_bytes",
             "zero3_working_bytes", "activation_bytes", "worst_stage", "inflight", "inflight_last", "usable_bytes",
             "headroom_bytes", "fits", "bubble_fraction", "bubble_vs_ideal", "tf", "tb", "tw", "first_stage_factor",
             "last_stage_factor", "tp_ratio", "tp_crosses_node", "compute_s", "tp_exposed_s", "pp_exposed_s",
             "bubble_s", "dp_comm_s", "dp_exposed_s", "dp_latency_s", "dp_bandwidth_s", "optimizer_s", "offload_s",
             "step_time_s", "tokens_per_s",
             "mfu", "hfu", "tflops_per_gpu", "feasible", "reasons", "warnings", "frameworks", "expert_state_bytes",
             "a2a_s", "a2a_exposed_s", "ring_s", "ring_exposed_s")

COLUMNS = ("rank", "t", "p", "d", "cp", "ep", "etp", "micro_batch_size", "m", "schedule", "v", "zero_stage",
           "reshard", "tp_comm_overlap", "recompute",
           "sequence_parallel", "offload", "memory_bytes", "model_state_bytes", "states_on_gpu_bytes",
           "zero3_working_bytes", "activation_bytes", "worst_stage", "usable_bytes", "headroom_bytes",
           "memory_fraction", "fits", "inflight", "inflight_last", "bubble_fraction", "bubble_vs_ideal", "tf", "tb",
           "tw", "first_stage_factor", "last_stage_factor", "tp_ratio", "tp_crosses_node", "compute_s",
           "gemm_s", "attention_s", "memory_bound_s", "tp_comm_s", "tp_exposed_s", "pp_exposed_s", "bubble_s",
           "straggler_s",
           "dp_comm_s", "dp_exposed_s", "dp_latency_s", "dp_bandwidth_s", "optimizer_s", "offload_s", "step_time_s",
           "tokens_per_s", "mfu", "hfu",
           "tflops_per_gpu", "feasible", "reasons", "warnings", "frameworks", "expert_state_bytes", "a2a_s",
           "a2a_exposed_s", "ring_s", "ring_exposed_s")
assert set(JSON_KEYS) <= set(COLUMNS) and set(BREAKDOWN_COLUMNS.values()) <= set(COLUMNS)
EMPTY_DTYPES = {**dict.fromkeys(("fits", "feasible", "sequence_parallel", "tp_crosses_node", "reshard",
                                 "tp_comm_overlap"), bool),
                **dict.fromkeys(("schedule", "recompute", "offload", "reasons", "warnings", "frameworks",
                                 "worst_stage"), object),
                **dict.fromkeys(("t", "p", "d", "cp", "ep", "etp", "micro_batch_size", "m", "v", "zero_stage"),
                                "int64")}


def empty_frame() -> pd.DataFrame:
    """A frame with every column and no rows, each column of the type a filled one has."""
    return pd.DataFrame({k: pd.Series(dtype=EMPTY_DTYPES.get(k, float)) for k in COLUMNS})
