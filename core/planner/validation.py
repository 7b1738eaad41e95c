"""The planner's step time against published training runs (assets/validation.json), row by row.

Each published run is planned with its own layout pinned (t, p, d, cp, schedule, v, micro-batch, recompute,
sequence parallelism, ZeRO stage) on its own GPU and precision, exactly as `python -m core plan --fix ...` would,
so the number checked is the number the planner ranks by. A published throughput is turned into a step time under
its own source's FLOP convention (core.cost.flops.CONVENTIONS), and the prediction is turned back into that measure
beside it. Korthikanti et al.'s Table 4 (time per layer of the 22B model) is checked against core.cost.layer_ops
directly. Every row says whether its GPU family's calibration record was fitted on it ("calibration") or not
("held-out"); summaries are kept apart by role. A run the model cannot express stays in the table with the reason
("unmatched") instead of a prediction.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from core.cost import flops, layer_ops, releases, step_time
from core.cost.collective import Fabric
from core.cost.step_input import Layouts
from core.model import presets
from core.params.catalog import document
from core.params.planner import PLAN, PlannerParams
from core.planner import candidates
from core.planner import plan as planner

ROLES = ("calibration", "held-out")
MODELLED = "modelled"  # a source's `scope`: the frameworks the step-time model describes (Megatron-LM, NeMo 2021-25.02)
OUTSIDE = "outside the modelled frameworks"
MOE_KEYS = ("experts", "top_k", "shared_experts", "expert_ffn", "dense_layers")
MEASURES = ("step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu")


@lru_cache(maxsize=1)
def data() -> dict[str, Any]:
    """assets/validation.json as read: sources, step-time rows and per-layer rows."""
    return document("validation.json")


def scope(source: str) -> str:
    """`modelled`, or why the source's software is not what the step-time model describes."""
    return data()["sources"][source].get("scope", MODELLED)


def row_scope(row: dict) -> str:
    """A row's own scope where it differs from its source's (a vendor table's MoE rows beside its dense ones)."""
    return row.get("scope") or scope(row["source"])


def release(row: dict) -> str:
    """The software release a row ran (its `software.release`; the base records' release where not given)."""
    return row.get("software", {}).get("release", releases.base())


def _model(spec: dict) -> dict[str, Any]:
    """PlannerParams model fields of a row's model: a preset (with its own seq / flash if given) or a custom model,
    a GPT block unless the row says otherwise."""
    if "preset" in spec:
        flash = spec.get("flash")
        return {"model": spec["preset"], "seq": spec.get("seq", 0),
                "flash": "auto" if flash is None else str(flash).lower()}
    h = spec["hidden"]
    moe = {k: spec[k] for k in MOE_KEYS if k in spec}  # routed experts of a custom MoE model
    return {"model": "custom", "layers": spec["layers"], "hidden": h, "heads": spec["heads"],
            "kv_heads": spec.get("kv_heads", spec["heads"]), "head_dim": spec.get("head_dim", 0),
            "ffn": spec.get("ffn", 4 * h), "vocab": spec["vocab"],
            "seq": spec["seq"], "mlp": spec.get("mlp", "gelu"), "tied": spec.get("tied", True),
            "flash": "true" if spec.get("flash", False) else "false", "parallel": spec.get("parallel", False),
            "qk_norm": spec.get("qk_norm", False), **moe,
            **{k: spec[k] for k in ("window", "window_share") if k in spec}}


# What a row leaves open when its source does not state it: the planner searches these and keeps the fastest
# layout that fits, as a tuned vendor benchmark would have chosen (the choice is reported in `chosen`). "Fits" is
# judged as the planner judges it, the row's framework's bytes against the memory the device reports, with no extra
# reserve: the run did run.
OPEN_MICRO_BATCHES = (1.0, 2.0, 4.0, 8.0)


def params_of(row: dict, assumptions: dict[str, float] | None = None, depth: tuple[str, int] | None = None
              ) -> PlannerParams:
    """The PlannerParams that pin a published run's layout and its software's switches (row["software"]); a
    micro-batch size or recompute the source leaves unstated (null) is searched. depth: (schedule, v) to run where
    the row leaves the interleave depth open (depths(row))."""
    lay = row["layout"]
    t, p, cp = lay["t"], lay["p"], lay.get("cp", 1)
    schedule, v = depth or (lay["schedule"] or "1f1b", lay["v"] or 2)
    mb = OPEN_MICRO_BATCHES if lay["micro_batch"] is None else (float(lay["micro_batch"]),)
    return PlannerParams(
        **_model(row["model"]), gpu=row["gpu"], reserve_frac=0.0, gpus=lay["gpus"],
        batch=lay["batch"], mb_sizes=mb, precision=row["precision"], fix_t=t, fix_p=p, fix_cp=cp,
        fix_ep=lay.get("ep", 0), fix_etp=lay.get("etp", 0), fix_d=lay["gpus"] // (t * p * cp),
        zero=str(lay.get("zero", 0)), schedule=schedule,
        v=max(v, 2), recompute=lay["recompute"] or "all", sp="on" if lay["sequence_parallel"] else "off",
        offload="none", tp_comm_overlap=_switch(lay.get("tp_comm_overlap", False)),
        reshard=_switch(lay.get("reshard", True)),
        **{"release": release(row), **row.get("software", {}), **(assumptions or {})})


def _switch(value: bool | None) -> str:
    """A layout switch as the planner takes it: on, off, or all (searched) where the source does not say."""
    return "all" if value is None else "on" if value else "off"


def depths(row: dict) -> list[tuple[str, int]]:
    """(schedule, v) pairs a row runs: its own; where it leaves the interleave depth open (v null), every depth up to
    the simulator's 8 that splits each stage's layers evenly (Megatron-LM's rule), and 1F1B too where the source
    does not even say it interleaved (schedule null)."""
    lay = row["layout"]
    if lay["p"] == 1:
        return [("1f1b", 1)]
    if lay["v"] is not None:
        return [(lay["schedule"], lay["v"])]
    spec, p = row["model"], lay["p"]
    layers = presets.model(spec["preset"]).layers if "preset" in spec else spec["layers"]
    even = layers % p == 0
    deep = [("interleaved", v) for v in range(2, 9) if p * v <= layers and (not even or (layers // p) % v == 0)]
    return deep if lay["schedule"] == "interleaved" and deep else [("1f1b", 1), *deep]


def measure(row: dict) -> str:
    """Which number the source prints (MEASURES)."""
    found = [k for k in MEASURES if k in row["published"]]
    if len(found) != 1:
        raise ValueError(f"{row['key']}: published needs exactly one of {', '.join(MEASURES)}")
    return found[0]


def _conversion(row: dict) -> float:
    """c such that the published measure = c / step seconds (c = seconds for a step time itself)."""
    pub, lay, kind = row["published"], row["layout"], measure(row)
    if kind == "step_time_s":
        return 1.0
    model, gpu, _ = candidates.resolve(params_of(row))
    if kind == "tokens_per_s_per_gpu":
        return lay["batch"] * model.seq / lay["gpus"]
    work = float(flops.convention_flops(model, lay["batch"], pub["flops"])) / lay["gpus"]
    if kind == "tflops_per_gpu":
        return work / 1e12
    peak = gpu.peak_flops_fp8 if pub.get("peak") == "fp8" else gpu.peak_flops
    return work / peak


def published_step(row: dict) -> float:
    """The published step time in seconds, from the number the source prints under its own FLOP convention."""
    pub, kind = row["published"], measure(row)
    return float(pub[kind]) if kind == "step_time_s" else _conversion(row) / float(pub[kind])


def _fixed(row: dict) -> dict[str, Any]:
    lay, pub = row["layout"], row["published"]
    kind = measure(row)
    return {"key": row["key"], "label": row["label"], "source": row["source"], "gpu": row["gpu"],
            "precision": row["precision"], "role": row["role"], "scope": row_scope(row), "release": release(row),
            "t": lay["t"], "p": lay["p"], "cp": lay.get("cp", 1),
            "d": lay["gpus"] // (lay["t"] * lay["p"] * lay.get("cp", 1)), "gpus": lay["gpus"],
            "schedule": lay["schedule"], "v": lay["v"], "micro_batch": lay["micro_batch"], "batch": lay["batch"],
            "zero": lay.get("zero", 0), "recompute": lay["recompute"], "sequence_parallel": lay["sequence_parallel"],
            "measure": kind, "flops": pub.get("flops"), "published_value": float(pub[kind]),
            "assumed": dict(row.get("assumed", {})), "unmatched": row.get("unmatched"), "moe": _is_moe(row)}


def _is_moe(row: dict) -> bool:
    spec = row["model"]
    return bool(spec.get("experts")) or ("preset" in spec and presets.model(spec["preset"]).moe is not None)


def step_row(row: dict, assumptions: dict[str, float] | None = None) -> dict[str, Any]:
    """One published run: published and predicted step time and measure, error, breakdown, whether it fits."""
    out = _fixed(row)
    if row.get("unmatched"):
        return {**out, "published_s": None, "predicted_s": None, "error": None, "predicted_value": None, "chosen": {}}
    runs = [_pinned(params_of(row, assumptions, depth), row["key"]) for depth in depths(row)]
    ok = [r for r in runs if r["feasible"] and np.isfinite(r["step_time_s"])]
    got = min(ok or runs, key=lambda r: r["step_time_s"] if np.isfinite(r["step_time_s"]) else np.inf)
    fits = bool(got["fits"])
    if not np.isfinite(got["step_time_s"]):  # the run did fit: time it as if memory were no limit, say it does not
        depth = (got["schedule"], int(got["v"]))
        got = _pinned(replace(params_of(row, assumptions, depth), gpu_mem=PLAN["gpu_mem"].hi), row["key"])
    pub, predicted = published_step(row), float(got["step_time_s"])
    value = predicted if out["measure"] == "step_time_s" else _conversion(row) / predicted
    lay = row["layout"]
    out["chosen"] = {k: (int(got["micro_batch_size"]) if k == "micro_batch" else got["recompute"])
                     for k in ("micro_batch", "recompute") if lay[k] is None}
    if lay["v"] is None and lay["p"] > 1:
        out["chosen"]["v"] = int(got["v"]) if got["schedule"] == "interleaved" else 1
    out["schedule"], out["v"] = got["schedule"], int(got["v"]) if got["schedule"] == "interleaved" else 1
    out["m"] = int(got["m"])
    return {**out, "published_s": pub, "predicted_s": predicted, "error": predicted / pub - 1.0,
            "predicted_value": value, "fits": fits, "memory_bytes": float(got["memory_bytes"]),
            "mfu": float(got["mfu"]), **{k: float(got[col]) for k, col in step_time.COLUMN.items()}}


def _pinned(q: PlannerParams, key: str) -> pd.Series:
    """The planner's first row for a pinned layout (the fastest that fits, where the row leaves a choice open)."""
    frame = planner.plan(q).frame
    if frame.empty:
        raise RuntimeError(f"{key}: the pinned layout gave no candidate")
    return frame.iloc[0]


def step_rows(assumptions: dict[str, float] | None = None, roles: tuple[str, ...] = ROLES,
              keep=None) -> pd.DataFrame:
    """One row per published run (of the given roles, and where `keep(row)` says so)."""
    rows = [r for r in data()["rows"] if r["role"] in roles and (keep is None or keep(r))]
    return pd.DataFrame([step_row(r, assumptions) for r in rows])


def layer_rows(assumptions: dict[str, float] | None = None) -> pd.DataFrame:
    """Korthikanti et al.'s Table 4: one layer's forward + backward time, published and predicted."""
    out = []
    for row in data()["per_layer"]:
        gpu = presets.gpu(row["gpu"])
        a = step_time.Assumptions(**{"release": release(row), **row.get("software", {}), **(assumptions or {})})
        rates = a.rates(gpu)
        lay, spec = row["layout"], row["model"]
        model = presets.custom_model({k: v for k, v in _model(spec).items() if k != "model"} | {"flash": False})
        shape = Layouts(t=lay["t"], micro_batch_size=lay["micro_batch"], sp=lay["sequence_parallel"],
                        recompute=lay["recompute"])
        times = layer_ops.layer_times(model, rates, shape, Fabric.of(gpu, a), a.grad_accum_fusion)
        if a.tp_bwd_overlap:
            times["B"]["tp"] = times["B"]["tp"] - times["hidden"]["tp"]
        exposed = 1.0 - a.tp_overlap
        per = {ph: float(sum(times[ph][c] * (exposed if c == "tp" else 1.0) for c in layer_ops.COMPONENTS))
               for ph in layer_ops.PHASES}
        forward, backward = per["F"], per["B"] + per["W"] + per["R"]
        pub = row["published"]
        out.append({"key": row["key"], "label": row["label"], "source": row["source"], "role": row["role"],
                    "gpu": row["gpu"], "precision": row["precision"],
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
    signed_mean_error: float
    sources: int = 0


def summarize(errors, sources=()) -> Summary:
    e = np.asarray([x for x in errors if x is not None and np.isfinite(x)], dtype=float)
    if not e.size:
        return Summary(0, float("nan"), float("nan"), float("nan"), 0)
    return Summary(int(e.size), float(np.abs(e).mean()), float(np.abs(e).max()), float(e.mean()),
                   len(set(sources)))


def _by_release(s: pd.DataFrame) -> dict[str, Summary]:
    """Each release's rows apart (the base's are the records' own sets): its fitted rows, and the rows its fit or
    the release it uses did not see."""
    out = {}
    for rel in releases.keys():
        part = s[s["release"] == rel]
        if rel == releases.base() or part.empty:
            continue
        fitted = part["key"].isin(releases.rows(rel))
        if fitted.any():
            out[f"release {rel}: its own fit's rows"] = summarize(part[fitted]["error"], part[fitted]["source"])
        rest = part[~fitted]
        if not rest.empty:
            source = releases.fitted_by(rel)
            how = "its own fit" if source == rel else f"{source}'s fit"
            how = f"any fit ({source}'s kernels are measured, not fitted)" if releases.measured(rel) else how
            out[f"release {rel}: held out of {how}"] = summarize(rest["error"], rest["source"])
    return out


def cross_release() -> dict[str, Summary]:
    """Each fitted release's own rows timed with every other release fit (fit on one, predict the other): what
    moves between releases, seen as the kernels each fit identifies."""
    fits = [r for r in releases.keys() if releases.rows(r)]
    out = {}
    for own in fits:
        wanted = frozenset(releases.rows(own))
        for other in fits:
            if other != own:
                steps = step_rows({"release": other}, keep=lambda r, keys=wanted: r["key"] in keys)
                out[f"release {own}'s rows timed as {other}"] = summarize(steps["error"], steps["source"])
    return out


@dataclass(frozen=True)
class Validation:
    steps: pd.DataFrame
    layers: pd.DataFrame

    @property
    def matched(self) -> pd.DataFrame:
        return self.steps[self.steps["unmatched"].isna()]

    def summary(self) -> dict[str, Summary]:
        """Mean, max and signed mean error: of the calibration rows; of the held-out rows of the frameworks the model
        describes ("held-out", also by GPU and precision); of the rows outside them, by source; of Table 4."""
        s = self.matched
        modelled = s["scope"] == MODELLED
        cal, held = s[(s["role"] == "calibration") & modelled], s[(s["role"] == "held-out") & modelled]
        out = {"calibration": summarize(cal["error"], cal["source"]), "held-out": summarize(held["error"],
                                                                                            held["source"])}
        for (gpu, precision), part in held.groupby(["gpu", "precision"], sort=True):
            out[f"held-out {gpu} {precision}"] = summarize(part["error"], part["source"])
        out.update(_by_release(s[modelled]))
        other = s[~modelled]  # held out of every efficiency fit (MegaScale's 175B series calibrates the scale losses)
        out[OUTSIDE] = summarize(other["error"], other["source"])
        for source, part in other.groupby("source", sort=True):
            out[f"{OUTSIDE}: {source}"] = summarize(part["error"], part["source"])
            if part["role"].nunique() > 1:  # a named subset fits a parameter of its own (the row's `fitted_by`)
                for role in ROLES:
                    mine = part[part["role"] == role]
                    out[f"{OUTSIDE}: {source} {role}"] = summarize(mine["error"], mine["source"])
        moe = s[s["moe"] & (s["role"] == "held-out")]  # every source's, modelled framework or not
        out["held-out mixture of experts"] = summarize(moe["error"], moe["source"])
        out["per-layer (calibration)"] = summarize(self.layers["error"])
        return out

    def summary_lines(self) -> list[str]:
        """The summary in words, one line per group, then Calculon's figures for comparison (CLI, docs/step-time.md)."""
        lines = [f"{name}: {s.rows} row{'s' if s.rows > 1 else ''}"
                 + (f" from {s.sources} sources" if s.sources > 1 else "")
                 + f", mean |error| {100 * s.mean_abs_error:.2f} %, max {100 * s.max_abs_error:.2f} %, "
                 f"signed mean {100 * s.signed_mean_error:+.2f} %" for name, s in self.summary().items() if s.rows]
        unmatched = self.steps[self.steps["unmatched"].notna()]
        if len(unmatched):
            lines.append(f"unmatched: {len(unmatched)} published rows kept with the reason they cannot be predicted")
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
                "conventions": {k: vars(c) for k, c in flops.CONVENTIONS.items()},
                "calculon": data()["calculon"], "sources": data()["sources"]}


def validate(assumptions: dict[str, float] | None = None) -> Validation:
    """Every published row, predicted with the planner (and the per-layer rows with the layer model)."""
    return Validation(step_rows(assumptions), layer_rows(assumptions))
