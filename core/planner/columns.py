"""The planner frame's columns and the CLI's JSON keys, in one place so the frame, its CSV, the excluded rows and
`--json` name the same things in the same order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from core.cost import step_time

# Step-time components (core.cost.step_time.BREAKDOWN) as frame columns; in JSON they are one `breakdown` object.
BREAKDOWN_COLUMNS = step_time.COLUMN
JSON_KEYS = ("rank", "t", "p", "d", "cp", "ep", "etp", "replicate", "zero_stage", "reshard", "schedule", "v",
             "tp_comm_overlap", "micro_batch_size", "m", "recompute", "recompute_layers", "sequence_parallel",
             "offload", "memory_bytes", "memory_accounting", "allocated_bytes", "reserve_bytes", "outside_bytes",
             "buffer_bytes", "pool_bytes", "step_moment_bytes", "model_state_bytes", "states_on_gpu_bytes",
             "zero3_working_bytes", "activation_bytes", "worst_stage", "inflight", "inflight_last", "inflight_middle",
             "held_first_stage", "held_last_stage", "usable_bytes", "headroom_bytes", "fits", "bubble_fraction",
             "bubble_vs_ideal", "tf", "tb", "tw", "first_stage_factor", "last_stage_factor", "tp_ratio",
             "tp_crosses_node", "compute_s", "tp_exposed_s", "pp_exposed_s", "bubble_s", "dp_comm_s", "dp_exposed_s",
             "dp_latency_s", "dp_bandwidth_s", "optimizer_s", "offload_s", "step_time_s", "timing", "tokens_per_s",
             "mfu", "hfu", "tflops_per_gpu", "feasible", "reasons", "warnings", "frameworks", "expert_state_bytes",
             "a2a_s", "a2a_exposed_s", "ring_s", "ring_exposed_s")

COLUMNS = ("rank", "t", "p", "d", "cp", "ep", "etp", "replicate", "micro_batch_size", "m", "schedule", "v",
           "zero_stage", "reshard", "tp_comm_overlap", "recompute", "recompute_layers", "sequence_parallel", "offload",
           "memory_bytes", "memory_accounting", "allocated_bytes", "reserve_bytes", "outside_bytes", "buffer_bytes",
           "pool_bytes", "step_moment_bytes", "model_state_bytes", "states_on_gpu_bytes", "zero3_working_bytes",
           "activation_bytes", "worst_stage", "usable_bytes", "headroom_bytes", "memory_fraction", "fits", "inflight",
           "inflight_last", "inflight_middle", "held_first_stage", "held_last_stage", "bubble_fraction",
           "bubble_vs_ideal", "tf", "tb", "tw", "first_stage_factor", "last_stage_factor", "tp_ratio",
           "tp_crosses_node", "compute_s", "gemm_s", "attention_s", "memory_bound_s", "tp_comm_s", "tp_exposed_s",
           "pp_exposed_s", "bubble_s", "straggler_s", "dp_comm_s", "dp_exposed_s", "dp_latency_s", "dp_bandwidth_s",
           "optimizer_s", "offload_s", "step_time_s", "timing", "tokens_per_s", "mfu", "hfu", "tflops_per_gpu",
           "feasible", "reasons", "warnings", "frameworks", "expert_state_bytes", "a2a_s", "a2a_exposed_s", "ring_s",
           "ring_exposed_s", "margin_s")
assert set(JSON_KEYS) <= set(COLUMNS) and set(BREAKDOWN_COLUMNS.values()) <= set(COLUMNS)
EMPTY_DTYPES = {**dict.fromkeys(("fits", "feasible", "sequence_parallel", "tp_crosses_node", "reshard",
                                 "tp_comm_overlap"), bool),
                **dict.fromkeys(("schedule", "recompute", "offload", "reasons", "warnings", "frameworks",
                                 "worst_stage", "timing", "memory_accounting"), object),
                **dict.fromkeys(("t", "p", "d", "cp", "ep", "etp", "replicate", "recompute_layers",
                                 "micro_batch_size", "m", "v", "zero_stage"),
                                "int64")}


def timing(reasons, timed, groups: tuple | None = None) -> np.ndarray:
    """The `timing` column: "" where the step time was simulated, else why not, by the candidate's first reason's
    tag ("not timed: does not fit", "not timed: no framework runs it", ...): the planner simulates only candidates
    that can be feasible (core.planner.simulation), so the others have every term but the pipeline's bubble.
    Candidates share their reason tuples, so each distinct tuple is worded once; `groups` (each candidate's index
    into the distinct tuples, -1 for none; the tuples: core.planner.checks.Checks.reasons) saves finding them."""
    out = np.full(len(reasons), "", dtype=object)
    idle = np.flatnonzero(~np.asarray(timed, dtype=bool))
    if not idle.size:
        return out
    if groups is not None:
        which, table = groups
        words = np.array([_untimed(t) for t in table] + [_untimed(())], dtype=object)
        out[idle] = words[which[idle]]  # -1: the last word, that of no reason
        return out
    if isinstance(reasons, np.ndarray):
        sub = reasons[idle]
    else:  # a list of tuples (excluded rows): np.asarray would make it two-dimensional
        sub = np.empty(idle.size, dtype=object)
        for j, i in enumerate(idle.tolist()):
            sub[j] = reasons[i]
    ids = np.fromiter(map(id, sub), dtype=np.int64, count=len(sub))
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    out[idle] = np.array([_untimed(sub[i]) for i in first], dtype=object)[inverse]
    return out


def _untimed(why: tuple) -> str:
    tag = why[0].split(":")[0] if why else "not simulated"
    if tag == "not simulated":  # the simulator refused the schedule, or the plan's budget ran out
        tag = "simulation budget spent" if why and "simulation budget" in why[0] else "schedule refused"
    return f"not timed: {tag}"


def empty_frame() -> pd.DataFrame:
    """A frame with every column and no rows, each column of the type a filled one has."""
    return pd.DataFrame({k: pd.Series(dtype=EMPTY_DTYPES.get(k, float)) for k in COLUMNS})
