"""The planner's memory against measured per-GPU peaks of public runs (assets/memory_validation.json), row by row.

Each measured run is planned with its own layout pinned (t, p, d, cp, ep, schedule, v, micro-batch, recompute,
sequence parallelism, ZeRO stage) on its own GPU, in its own framework's accounting (core.frameworks), exactly as
`python -m core plan --framework ... --fix ...` would, so the number checked is the number the planner decides
"fits" with. Each row is compared in its own kind: a source that prints torch.cuda.max_memory_allocated is
compared with the predicted peak of tensors, one that prints max_memory_reserved with that plus the caching
allocator's reserve, one that reads nvidia-smi with the device total; and on its own device: the fullest one
(a maximum over GPUs, what the planner ranks by), or the pipeline's last or first stage where the source logs
only that rank. Rows name their role: the allocator reserves (core.frameworks, scripts/fit_memory.py) are fitted
on the 'calibration' rows and on nothing else; 'held-out' rows are only predicted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from core.errors import InputError
from core.memory import device_activations, per_gpu
from core.memory import framework_terms as terms
from core.params.catalog import document
from core.params.planner import PlannerParams
from core.planner import candidates, rank_memory
from core.planner import plan as planner
from core.planner.validation import ROLES, Summary, summarize
from core.units import GB, GIB

LAYOUT_AXES = ("t", "p", "d", "cp", "ep")  # the parallel groups, each an NCCL communicator (framework_terms.groups)

KINDS = ("allocated", "active", "reserved", "device")  # torch.cuda max_memory_allocated; memory_stats
# active_bytes.all.peak (blocks tensors hold: the allocated bytes rounded up to 512-byte blocks, compared as allocated);
# max_memory_reserved; nvidia-smi
DEVICES = ("fullest", "first", "last", "rank0")  # rank0: global rank 0, the first stage (any rank without a pipeline)
UNITS = {"GiB": GIB, "GB": GB, "MiB": float(1 << 20), "bytes": 1.0}
MODELLED = "modelled"


@lru_cache(maxsize=1)
def data() -> dict[str, Any]:
    """assets/memory_validation.json as read: sources and measured rows."""
    return document("memory_validation.json")


def scope(source: str) -> str:
    """`modelled`, or which framework outside the three accountings the source ran (compared with the nearest)."""
    return data()["sources"][source].get("scope", MODELLED)


def measured_bytes(row: dict) -> float:
    m = row["measured"]
    return float(m["value"]) * UNITS[m["unit"]]


def _model(spec: dict) -> dict[str, Any]:
    """PlannerParams model fields of a row's model: a preset (at its sequence length) or a custom architecture."""
    flags = {k: ("auto" if spec.get(k) is None else str(spec[k]).lower()) for k in ("flash", "dropout")}
    if "preset" in spec:
        return {"model": spec["preset"], "seq": spec.get("seq", 0), **flags}
    moe = {k: spec[k] for k in ("experts", "top_k", "shared_experts", "expert_ffn", "dense_layers", "mtp_layers")
           if k in spec}
    moe |= spec.get("mla", {})  # kv_lora_rank, q_lora_rank, qk_head_dim, qk_rope_dim, v_head_dim
    return {"model": "custom", "seq": spec["seq"], **flags, **moe,
            **{k: spec[k] for k in ("layers", "hidden", "heads", "vocab", "mlp")},
            "kv_heads": spec.get("kv_heads", spec["heads"]), "head_dim": spec.get("head_dim", 0),
            "ffn": spec.get("ffn", 4 * spec["hidden"]), "tied": spec.get("tied", True),
            **{k: spec[k] for k in ("parallel", "qk_norm", "window", "window_share") if k in spec}}


def params_of(row: dict) -> PlannerParams:
    """The PlannerParams that pin a measured run: its layout, GPU (with the memory the source reports) and software
    switches, counted in its framework's accounting (memory_framework: a fork may run a layout the framework's
    capability table does not list, as the zero-bubble paper's Megatron-LM fork runs its ZB schedules)."""
    lay = row["layout"]
    t, p, cp = lay["t"], lay["p"], lay.get("cp", 1)
    gpu_mem = row.get("gpu_mem_gib")
    return PlannerParams(
        **_model(row["model"]), gpu=row["gpu"], gpu_mem=gpu_mem * GIB / GB if gpu_mem else 0.0, reserve_frac=0.0,
        gpus=lay["gpus"], batch=lay["batch"], mb_sizes=(float(lay["micro_batch"]),), precision=row["precision"],
        fix_t=t, fix_p=p, fix_cp=cp, fix_ep=lay.get("ep", 0), fix_etp=lay.get("etp", 0),
        fix_replicate=lay.get("replicate", 1),
        fix_d=lay["gpus"] // (t * p * cp), zero=str(lay.get("zero", 0)), schedule=lay.get("schedule") or "1f1b",
        v=max(int(lay.get("v") or 2), 2), recompute=lay["recompute"], sp="on" if lay["sequence_parallel"] else "off",
        reshard="on" if lay.get("reshard", True) else "off", offload="none",
        tp_comm_overlap="on" if lay.get("tp_comm_overlap") else "off",
        framework="any", memory_framework=row["framework"], **row.get("software", {}))


def _pinned(q: PlannerParams) -> tuple[pd.Series | None, str]:
    """The planner's row for a pinned run, or None and why the planner cannot express it."""
    result = planner.plan(q, budget=0)
    frame = result.frame
    if frame.empty:
        return None, "; ".join(result.notes) or "the pinned layout gave no candidate"
    got = frame.iloc[0]
    if not np.isfinite(got["memory_bytes"]):
        return None, "; ".join(got["reasons"])
    return got, ""


def device_bytes(q: PlannerParams, got: pd.Series, device: str) -> dict[str, float]:
    """(allocated, reserved, device) bytes of the pinned row's `device`: the fullest one is the planner's own
    row; the first or last stage's takes the same model states, buffers and gathers with that stage's activations
    (core.memory.device_activations.end_stages, at the row's simulated micro-batches in flight)."""
    acts = float(got["activation_bytes"])
    if device in ("first", "last", "rank0") and int(got["p"]) > 1:
        ends = device_activations.end_stages(_config(q, got))
        acts = float(ends.last_total if device == "last" else ends.first_total)
    peak = sum(float(got[k]) for k in ("states_on_gpu_bytes", "zero3_working_bytes", "buffer_bytes")) + acts
    extra = per_gpu.device_extras(str(got["memory_accounting"]), peak, float(got["step_moment_bytes"]),
                                  float(got["pool_bytes"]), terms.groups(*(int(got[k]) for k in LAYOUT_AXES)))
    allocated = peak + float(extra["step"])
    reserved = allocated + float(extra["reserve"])
    return {"allocated": allocated, "reserved": reserved, "device": reserved + float(extra["outside"]),
            "pools": float(got["pool_bytes"])}


def _config(q: PlannerParams, got: pd.Series) -> per_gpu.MemoryConfig:
    """The memory model's record of one planner row (its layout, training settings and in-flight counts)."""
    model, _, precision = candidates.resolve(q)
    lay = per_gpu.Layout(t=int(got["t"]), p=int(got["p"]), d=int(got["d"]), cp=int(got["cp"]), ep=int(got["ep"]),
                         etp=int(got["etp"]), chunks=int(got["v"]), zero=int(got["zero_stage"]),
                         offload=str(got["offload"]), reshard=bool(got["reshard"]), ends_in_split=q.ends_in_split)
    tr = per_gpu.Training(micro_batch_size=int(got["micro_batch_size"]),
                          sequence_parallel=bool(got["sequence_parallel"]),
                          recompute=str(got["recompute"]), fp8=precision == "fp8", moe_capacity=q.moe_capacity,
                          cp_comm=q.cp_comm, micro_batches=int(got["m"]), compiled=q.compile,
                          repeat_kv=q.repeat_kv, sac_attention=q.sac_attention,
                          grad_dtype=q.grad_dtype, optimizer_dtype=q.optimizer_dtype, loss=q.loss,
                          fp16=precision == "fp16", tp_overlap=bool(got["tp_comm_overlap"]),
                          grouped_gemm=q.grouped_gemm, recompute_modules=q.recompute_modules)
    inflight = per_gpu.InFlight(float(got["inflight"]), float(got["inflight_last"]), False,
                                float(got["inflight_middle"]), float(got["held_first_stage"]),
                                float(got["held_last_stage"]))
    return per_gpu.MemoryConfig(per_gpu.ModelMemory.of(model), lay, tr, inflight,
                                accounting=str(got["memory_accounting"]))


def memory_row(row: dict) -> dict[str, Any]:
    """One measured run: measured and predicted bytes in the measured kind, error, the prediction's parts."""
    lay, m = row["layout"], row["measured"]
    out = {"key": row["key"], "label": row["label"], "source": row["source"], "role": row["role"],
           "scope": scope(row["source"]), "framework": row["framework"], "gpu": row["gpu"],
           "precision": row["precision"], "kind": m["kind"], "device": row.get("device", "fullest"),
           "t": lay["t"], "p": lay["p"], "cp": lay.get("cp", 1), "d": lay["gpus"] // (lay["t"] * lay["p"] *
                                                                                    lay.get("cp", 1)),
           "zero": lay.get("zero", 0), "schedule": lay.get("schedule") or "1f1b", "v": lay.get("v") or 1,
           "micro_batch": lay["micro_batch"], "recompute": lay["recompute"], "measured_bytes": measured_bytes(row),
           "assumed": dict(row.get("assumed", {}))}
    if row.get("unmatched"):
        return {**out, "unmatched": row["unmatched"], "predicted_bytes": np.nan, "error": np.nan, "fits": False}
    try:
        q = params_of(row)
    except InputError as exc:
        return {**out, "unmatched": f"not expressible as planner inputs: {exc}", "predicted_bytes": np.nan,
                "error": np.nan, "fits": False}
    got, why = _pinned(q)
    if got is None:
        return {**out, "unmatched": why, "predicted_bytes": np.nan, "error": np.nan, "fits": False}
    pred = device_bytes(q, got, out["device"])
    predicted = pred["allocated" if m["kind"] in ("allocated", "active") else m["kind"]]
    parts = {k: float(got[k]) for k in ("model_state_bytes", "states_on_gpu_bytes", "zero3_working_bytes",
                                          "activation_bytes", "buffer_bytes", "reserve_bytes", "outside_bytes")}
    return {**out, "predicted_bytes": predicted, "error": predicted / out["measured_bytes"] - 1.0,
            "predicted_allocated": pred["allocated"], "predicted_pools": pred["pools"],
            "fits": bool(got["fits"]), "m": int(got["m"]), "worst_stage": str(got["worst_stage"]), "unmatched": None,
            **parts}


def memory_rows(roles: tuple[str, ...] = ROLES, keep=None) -> pd.DataFrame:
    rows = [r for r in data()["rows"] if r["role"] in roles and (keep is None or keep(r))]
    return pd.DataFrame([memory_row(r) for r in rows])


@dataclass(frozen=True)
class MemoryValidation:
    rows: pd.DataFrame

    @property
    def matched(self) -> pd.DataFrame:
        return self.rows[self.rows["unmatched"].isna()]

    def summary(self) -> dict[str, Summary]:
        """Mean, max and signed mean error: calibration rows; held-out rows of the modelled frameworks (also by
        framework, by kind and by source); rows of other frameworks apart, by source."""
        s = self.matched
        modelled = s["scope"] == MODELLED
        cal, held = s[(s["role"] == "calibration") & modelled], s[(s["role"] == "held-out") & modelled]
        out = {"calibration": summarize(cal["error"], cal["source"]),
               "held-out": summarize(held["error"], held["source"])}
        for col in ("framework", "kind", "source"):
            for name, part in held.groupby(col, sort=True):
                out[f"held-out {col} {name}"] = summarize(part["error"], part["source"])
        for source, part in s[~modelled].groupby("source", sort=True):
            out[f"outside the modelled frameworks: {source}"] = summarize(part["error"], part["source"])
        return out

    def summary_lines(self) -> list[str]:
        return [f"{name}: {s.rows} row{'s' if s.rows != 1 else ''}"
                + (f" from {s.sources} sources" if s.sources > 1 else "")
                + f", mean |error| {100 * s.mean_abs_error:.2f} %, max {100 * s.max_abs_error:.2f} %, "
                f"signed mean {100 * s.signed_mean_error:+.2f} %" for name, s in self.summary().items() if s.rows]

    def to_json(self) -> dict[str, Any]:
        def plain(v: Any) -> Any:
            v = v.item() if isinstance(v, np.generic) else v
            return None if isinstance(v, float) and not np.isfinite(v) else v
        return {"rows": [{k: plain(v) for k, v in r.items()} for r in self.rows.to_dict("records")],
                "summary": {k: vars(v) for k, v in self.summary().items()}, "sources": data()["sources"]}


def validate() -> MemoryValidation:
    """Every measured row, predicted with the planner."""
    return MemoryValidation(memory_rows())


__all__ = ["DEVICES", "KINDS", "MemoryValidation", "data", "memory_row", "params_of", "rank_memory", "replace",
           "validate"]
