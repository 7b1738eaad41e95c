"""The planner's step time against published training runs (assets/validation.json), row by row.

Each published run is planned with its own layout pinned (t, p, d, schedule, v, micro-batch, recompute, sequence
parallelism, no ZeRO), exactly as `python -m core plan --fix ...` would, so the number checked is the number the
planner ranks by. Korthikanti et al.'s Table 4 (time per layer of the 22B model) is checked against
core.cost.layer_ops directly. Every row says whether the efficiency fit saw it ("calibration") or not
("held-out"); summaries are kept apart by role.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from core.cost import flops, layer_ops, step_time
from core.cost.collective import Fabric
from core.cost.step_input import Layouts
from core.model import presets
from core.params.catalog import document
from core.params.planner import PlannerParams
from core.planner import plan as planner

ROLES = ("calibration", "held-out")


@lru_cache(maxsize=1)
def data() -> dict[str, Any]:
    """assets/validation.json as read: sources, step-time rows and per-layer rows."""
    return document("validation.json")


def _model(spec: dict) -> dict[str, Any]:
    h = spec["hidden"]
    return {"model": "custom", "layers": spec["layers"], "hidden": h, "heads": spec["heads"],
            "kv_heads": spec["heads"], "ffn": 4 * h, "vocab": spec["vocab"], "seq": spec["seq"], "mlp": "gelu",
            "tied": True, "flash": False}


def params_of(row: dict, assumptions: dict[str, float] | None = None) -> PlannerParams:
    """The PlannerParams that pin a published run's layout and its software's switches (row["software"])."""
    lay, doc = row["layout"], data()
    t, p = lay["t"], lay["p"]
    return PlannerParams(
        **_model(row["model"]), gpu=doc["gpu"], gpus=lay["gpus"], batch=lay["batch"],
        mb_sizes=(float(lay["micro_batch"]),), precision=doc["precision"], fix_t=t, fix_p=p,
        fix_d=lay["gpus"] // (t * p), zero="0", schedule=lay["schedule"], v=max(lay["v"], 2),
        recompute=lay["recompute"], sp="on" if lay["sequence_parallel"] else "off", offload="none",
        tp_comm_overlap="off", reshard="on", **{**row.get("software", {}), **(assumptions or {})})


def published_step(row: dict) -> float:
    """The published step time in seconds (Narayanan's rows give TFLOP/s per GPU with full-recompute FLOPs)."""
    pub = row["published"]
    if "step_time_s" in pub:
        return float(pub["step_time_s"])
    m, lay = row["model"], row["layout"]
    hw = flops.narayanan_flops(lay["batch"], m["seq"], m["layers"], m["hidden"], m["vocab"], "full")
    return float(hw) / (lay["gpus"] * pub["tflops_per_gpu"] * 1e12)


def step_rows(assumptions: dict[str, float] | None = None, roles: tuple[str, ...] = ROLES) -> pd.DataFrame:
    """One row per published run (of the given roles): published and predicted step time, error, the breakdown,
    whether the layout fits."""
    out = []
    for row in (r for r in data()["rows"] if r["role"] in roles):
        result = planner.plan(params_of(row, assumptions))
        if len(result.frame) != 1:
            raise RuntimeError(f"{row['key']}: the pinned layout gave {len(result.frame)} candidates, not one")
        got = result.frame.iloc[0]
        pub = published_step(row)
        lay = row["layout"]
        out.append({
            "key": row["key"], "label": row["label"], "source": row["source"], "role": row["role"],
            "t": lay["t"], "p": lay["p"], "d": lay["gpus"] // (lay["t"] * lay["p"]), "gpus": lay["gpus"],
            "schedule": lay["schedule"], "v": lay["v"], "micro_batch": lay["micro_batch"], "batch": lay["batch"],
            "recompute": lay["recompute"], "sequence_parallel": lay["sequence_parallel"],
            "published_s": pub, "predicted_s": float(got["step_time_s"]),
            "error": float(got["step_time_s"]) / pub - 1.0, "fits": bool(got["fits"]),
            "memory_bytes": float(got["memory_bytes"]), "mfu": float(got["mfu"]),
            **{k: float(got[col]) for k, col in step_time.COLUMN.items()},
        })
    return pd.DataFrame(out)


def layer_rows(assumptions: dict[str, float] | None = None) -> pd.DataFrame:
    """Korthikanti et al.'s Table 4: one layer's forward + backward time, published and predicted."""
    gpu = presets.gpu(data()["gpu"])
    out = []
    for row in data()["per_layer"]:
        a = step_time.Assumptions(**{**row.get("software", {}), **(assumptions or {})})
        rates = a.rates(gpu)
        lay, spec = row["layout"], row["model"]
        model = presets.custom_model({k: v for k, v in _model(spec).items() if k != "model"})
        shape = Layouts(t=lay["t"], b=lay["micro_batch"], sp=lay["sequence_parallel"], recompute=lay["recompute"])
        times = layer_ops.layer_times(model, rates, shape, Fabric.of(gpu, a), a.grad_accum_fusion)
        if a.tp_bwd_overlap:
            times["B"]["tp"] = times["B"]["tp"] - times["hidden"]["tp"]
        exposed = 1.0 - a.tp_overlap
        per = {ph: float(sum(times[ph][c] * (exposed if c == "tp" else 1.0) for c in layer_ops.COMPONENTS))
               for ph in layer_ops.PHASES}
        forward, backward = per["F"], per["B"] + per["W"] + per["R"]
        pub = row["published"]
        out.append({"key": row["key"], "label": row["label"], "source": row["source"], "role": row["role"],
                    "published_ms": pub["combined_ms"], "predicted_ms": 1e3 * (forward + backward),
                    "error": 1e3 * (forward + backward) / pub["combined_ms"] - 1.0,
                    "forward_ms": 1e3 * forward, "backward_ms": 1e3 * backward,
                    "published_forward_ms": pub.get("forward_ms"), "published_backward_ms": pub.get("backward_ms"),
                    "forward_error": 1e3 * forward / pub["forward_ms"] - 1.0 if "forward_ms" in pub else None,
                    "backward_error": 1e3 * backward / pub["backward_ms"] - 1.0 if "backward_ms" in pub else None})
    return pd.DataFrame(out)


def signed_percent(x: float) -> str:
    """An error as the validation tables print it: +1.4 %."""
    return f"{100 * x:+.1f} %"


@dataclass(frozen=True)
class Summary:
    rows: int
    mean_abs_error: float
    max_abs_error: float


def summarize(errors) -> Summary:
    e = np.abs(np.asarray(errors, dtype=float))
    return Summary(int(e.size), float(e.mean()) if e.size else float("nan"), float(e.max()) if e.size else float("nan"))


@dataclass(frozen=True)
class Validation:
    steps: pd.DataFrame
    layers: pd.DataFrame

    def summary(self) -> dict[str, Summary]:
        """Mean and max |error| of the step-time rows by role, of Korthikanti's eight rows, and of Table 4."""
        s = self.steps
        out = {role: summarize(s.loc[s["role"] == role, "error"]) for role in ROLES}
        out["korthikanti2022"] = summarize(s.loc[s["source"] == "korthikanti2022", "error"])
        out["per-layer (calibration)"] = summarize(self.layers["error"])
        return out

    def summary_lines(self) -> list[str]:
        """The summary in words, one line per group, then Calculon's figures for comparison (CLI and README)."""
        lines = [f"{name}: {s.rows} rows, mean |error| {100 * s.mean_abs_error:.2f} %, "
                 f"max {100 * s.max_abs_error:.2f} %" for name, s in self.summary().items()]
        calc = data()["calculon"]
        return lines + [f"Calculon on Korthikanti's eight rows (for comparison): mean "
                        f"{100 * calc['mean_abs_error']:.2f} %, max {100 * calc['max_abs_error']:.2f} %"]

    def to_json(self) -> dict[str, Any]:
        def plain(v: Any) -> Any:
            v = v.item() if isinstance(v, np.generic) else v
            return None if isinstance(v, float) and not np.isfinite(v) else v

        def records(frame: pd.DataFrame) -> list[dict]:
            return [{k: plain(v) for k, v in r.items()} for r in frame.to_dict("records")]
        return {"steps": records(self.steps), "per_layer": records(self.layers),
                "summary": {k: vars(v) for k, v in self.summary().items()},
                "calculon": data()["calculon"], "sources": data()["sources"]}


def validate(assumptions: dict[str, float] | None = None) -> Validation:
    """Every published row, predicted with the planner (and the per-layer rows with the layer model)."""
    return Validation(step_rows(assumptions), layer_rows(assumptions))
