#!/usr/bin/env python
"""Fit each calibration record of assets/efficiency.json on its own calibration set (rows of assets/validation.json).

    python scripts/fit_efficiency.py                 # print every record's fit and the errors it gives
    python scripts/fit_efficiency.py --write         # store them in assets/efficiency.json
    python scripts/fit_efficiency.py --fit h100      # one fit group
    python scripts/fit_efficiency.py --measurements  # only the values kernel measurements fix

A record (core.cost.calibration) is one GPU family at one precision. Its calibration set is every row whose role is
"calibration", whose GPU preset uses that family (assets/gpus.json `calibration`) and whose precision the record
covers (fp16 and bf16: 16-bit; fp8); the A100 record also sees Korthikanti et al.'s per-layer times. The held-out
rows are only predicted afterwards. FITS says which parameters each fit group fits (the H100 16-bit and FP8 records
together: both run their attention and memory-bound kernels in 16-bit) and within which physical bounds; the rest
stay at the values kernel measurements by shape fix (`measured`, each with its source). The objective is the mean
squared log error within each source, summed over sources (no publication outvotes another by row count). The
search is a coarse grid over the bounds, then finer grids around the best point (deterministic, no solver needed).
A fit of a planner assumption instead ('moe_overlap': moe_overlap_sync_us; 'megatron_deepspeed':
megatron_deepspeed_share) runs its named rows under trial values of
that assumption and stores the value, its set and the held-out errors under the file's `assumption_fits`, where
core.params.planner reads the default. A fit of a software release ('bridge-25.09', 'bridge-26.04') fits the kernels
its own vendor table's dense rows identify and stores them with the release in assets/releases.json
(core.cost.releases), leaving the records as they are.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.cli import spec_args  # noqa: E402
from core.cost import calibration, releases  # noqa: E402
from core.model import presets  # noqa: E402
from core.planner import validation  # noqa: E402

# The fits: each names the records it fits together, their parameters ("record:name") with physical bounds and
# coarse grid points, and each record's calibration set in words. The H100 records are fitted together because the
# attention core and the memory-bound kernels run in 16-bit in both: the FP8 set also measures mem_eff.
FITS = {
    "a100": {
        "bounds": {"a100-16bit:gemm_eff": (0.5, 0.95, 10), "a100-16bit:mem_eff": (0.5, 0.95, 10),
                   "a100-16bit:gemm_k0": (0.0, 1024.0, 9)},
        "sets": {"a100-16bit": "Narayanan et al. 2021 Table 1 rows 3.6B, 7.5B, 39.1B, 76.1B, 310.1B and 529.6B "
                               "(step times) and Korthikanti et al. 2022 Table 4 (22B layer times, forward and "
                               "backward where printed); the twelve validation rows (Narayanan 1.7B, 18.4B, 145.6B, "
                               "1T; Korthikanti Table 5) and every other A100 source are held out"},
    },
    "h100": {
        "bounds": {"h100-16bit:gemm_eff": (0.5, 0.8, 7), "h100-16bit:mem_eff": (0.2, 0.95, 6),
                   "h100-fp8:gemm_eff": (0.4, 0.71, 7)},
        "sets": {"h100-16bit": "the Megatron-Core r0.8.0 weak-scaling table of the Megatron-LM README (H100 80GB, "
                               "BF16, GPT models of 1.7B-462B on 48-6,144 GPUs: one framework, one FLOP convention, "
                               "hidden 2,048-18,432; the 119B row is unmatched), fitted with the FP8 set below; every "
                               "other H100 BF16 source is held out",
                 "h100-fp8": "the NeMo 24.07 FP8 pre-training table on DGX-H100 (twelve GPT-3, Llama 2, Nemotron and "
                             "Llama 3 runs of 5B-340B on 8-512 GPUs, micro-batch, TP, PP, CP and interleave depth "
                             "stated), fitted with the BF16 set above; every other FP8 source is held out"},
    },
}
# Fits whose set is a named subset of rows outside the modelled frameworks (their `fitted_by` names the fit): each
# stores its provenance per parameter (the record's `fits`), leaving the record's own set as it is.
FITS["llmfoundry"] = {
    "bounds": {"h100-16bit:triton_flash_eff": (0.134, 0.337, 9)},
    "fitted_by": "scripts/fit_efficiency.py fit 'llmfoundry' (h100-16bit triton_flash_eff: the Triton "
                 "FlashAttention's H100 rate)",
    "sets": {"h100-16bit": "the llm-foundry benchmark rows of MPT-7b, 30b and 70b on H100 80GB in BF16 (20 rows: "
                           "1,024-65,536 tokens, 8-512 GPUs, FSDP, the Triton kernel on 11 of them); the MPT-1b, 3b "
                           "and 13b rows, every FP8 row and every A100 row are held out"},
    "bounds_why": "between FlashAttention (1.0.x CUDA)'s causal forward + backward asymptote on the H100, 133 TFLOP/s "
                  "(0.134), and FlashAttention-2's (0.337), both from Dao-AILab/flash-attention "
                  "assets/flash2_h100_fwd_bwd_benchmark.png, which has no Triton bars",
}
# A fit of a planner assumption (core.params.planner ASSUMPTIONS, a name without "record:"), stored with its
# provenance under the file's `assumption_fits`, from which the assumption's default is read.
FITS["moe_overlap"] = {
    "bounds": {"moe_overlap_sync_us": (0.0, 3000.0, 13)},
    "fitted_by": "scripts/fit_efficiency.py fit 'moe_overlap' (moe_overlap_sync_us: the EP overlap's cost per "
                 "paired MoE layer)",
    "sets": {"moe_overlap_sync_us": "the ModelZoo Qwen3-235B-A22B pair on 256 H100 with DeepEP at one layout (TP2 "
                                    "EP32 PP8 VPP4), 19.7 s without and 17.6 s with --overlap-moe-expert-parallel-"
                                    "comm (yanring/Megatron-MoE-ModelZoo best_practice/qwen3/readme.md at e865051); "
                                    "the Megatron-Bridge DeepSeek-V3 and Qwen3-235B rows (the other runs of the "
                                    "overlap) and the other ModelZoo rows are held out"},
    "bounds_why": "0 = the schedule costs nothing beyond the SMs DeepEP holds; 3,000 us = about a quarter of one "
                  "paired Qwen3-235B layer's compute on the H100 (about 11 ms for a forward and a backward, "
                  "core.cost.step_time.StageCosts.moe_parts), past which the overlap would have lost time on its "
                  "calibration pair, which it did not",
}
FITS["megatron_deepspeed"] = {
    "bounds": {"megatron_deepspeed_share": (0.5, 1.0, 11)},
    "fitted_by": "scripts/fit_efficiency.py fit 'megatron_deepspeed' (megatron_deepspeed_share: Megatron-DeepSpeed's "
                 "share of the calibrated compute rates)",
    "sets": {"megatron_deepspeed_share": "BigScience's Jean Zay benchmarks of BLOOM-like models (chronicles-prequel.md "
                                         "'Rebalancing layers', 2022-02-28: twelve runs of 178B-203B, 82-106 layers, "
                                         "TP 4-8, PP 6-12, MBS 2-4, on the 384 A100 80GB BLOOM trained on, with the "
                                         "run's BF16 optimizer and layer partition); the section's 70-layer runs (the "
                                         "BLOOM model's own shape), the BLOOM run itself and MT-NLG 530B are held out"},
    "bounds_why": "a search range rather than a physical bound: from 1 (the calibrated Megatron-LM rates, nothing "
                  "lost) down to 0.5 (every kernel at half of them); the fit lands well inside it",
}
# Fits of a software release (assets/releases.json, core.cost.releases): the kernels that release's own vendor table
# identifies, fitted on its dense rows (their `fitted_by`) and stored with the release, not in a record.
for _release in ("bridge-25.09", "bridge-26.04"):
    FITS[_release] = {
        "release": _release,
        "bounds": {"h100-fp8:gemm_eff": (0.4, 0.709, 7), "h100-16bit:flash_eff": (0.337, 0.589, 8)},
        "fitted_by": f"scripts/fit_efficiency.py fit '{_release}'",
    }
FINE = 5  # points per parameter in each refinement, over two steps of the previous grid around the best
ROUNDS = 2
# Why each record's bounds are where they are (written into the file with the fit).
BOUNDS_WHY = ("gemm_eff at most the best matmul rate any shape reaches (stas00/ml-engineering mamf-finder, 744d01e: "
              "A100 SXM BF16 86.9 %, H100 SXM BF16 80.3 %, H100 FP8 70.9 % of the dense peak); mem_eff between an "
              "eager PyTorch RMSNorm (675 GB/s, 0.20 of the H100's HBM) and the best fused kernels (2,795 GB/s, 0.83), "
              "patrick-toulme/pyptx docs/performance.md at 62e63e0")


# ------------------------------------------------------------------------------ values kernel measurements fix

def _fit_flash(m: dict) -> tuple[float, float]:
    """(flash_eff, s0) of a causal flash kernel: TFLOP/s = peak x eff x s / (s + s0), least squares in logs."""
    s, y = np.asarray(m["seq"], dtype=float), np.asarray(m["tflops"], dtype=float) * 1e12
    best = (np.inf, 0.0, 0.0)
    for s0 in np.arange(0.0, 3000.0, 2.0):
        f = s / (s + s0)
        rate = float(np.exp(np.mean(np.log(y / f))))
        cost = float(np.sum(np.log(rate * f / y) ** 2))
        if cost < best[0]:
            best = (cost, rate, s0)
    return best[1] / presets.gpu(m["gpu"]).peak_flops, best[2]


def _rate_at(m: dict, s0: float) -> float:
    """A flash kernel's long-sequence rate, as a share of the 16-bit peak, with s0 given (least squares in logs)."""
    s, y = np.asarray(m["seq"], dtype=float), np.asarray(m["tflops"], dtype=float) * 1e12
    return float(np.exp(np.mean(np.log(y * (s + s0) / s)))) / presets.gpu(m["gpu"]).peak_flops


def _fit_k0(m: dict) -> tuple[float, float]:
    """(efficiency, k0) of core.cost.gemm.gemm_time (waves of 256 x 128 tiles, roofline) on FP8 GEMMs by shape."""
    from dataclasses import replace

    from core.cost.gemm import gemm_time
    from core.cost.rates import Rates

    rows = np.asarray(m["rows"], dtype=float)
    M, N, K, tflops = rows.T
    base = Rates.of(presets.gpu(m["gpu"]), fp8=True)
    best = (np.inf, 0.0, 0.0)
    for mem in np.arange(0.5, 1.001, 0.05):  # that kernel's own memory side, fitted with it
        for eff in np.arange(0.60, 0.951, 0.01):
            for k0 in np.arange(0.0, 2001.0, 25.0):
                r = replace(base, linear_eff=float(eff), linear_k0=float(k0), mem_eff=float(mem))
                got = 2 * M * N * K / gemm_time(r, M, N, K, a_bytes=1.0, linear=True) / 1e12
                cost = float(np.sum(np.log(got / tflops) ** 2))
                if cost < best[0]:
                    best = (cost, float(eff), float(k0))
    return best[1], best[2]


def measured() -> dict[tuple[str, str], tuple[float, str]]:
    """Values the calibration runs cannot identify, from kernel measurements by shape: {(record or "fixed", name):
    (value, source)}."""
    meas = calibration.measurements()
    out = {}
    effs = {}
    for gpu, key in (("a100", "a100-16bit"), ("h100", "h100-16bit")):
        m = meas[f"flash_{gpu}"]
        eff, s0 = _fit_flash(m)
        effs[gpu] = (eff, s0)
        out[(key, "flash_eff")] = (round(eff, 3), f"{m['source']}: the long-sequence asymptote of the keys / "
                                                   f"(keys + s0) form fitted to it, {eff:.3f} of the 16-bit peak "
                                                   f"(s0 = {s0:.0f})")
    s0 = round(float(np.mean([v[1] for v in effs.values()])), -1)
    out[("fixed", "flash_s0")] = (s0, "a flash kernel's rate grows with the keys each query tile sweeps as keys / "
                                      "(keys + s0): FlashAttention-2's causal forward + backward benchmarks fit it "
                                      f"within 1 % with s0 = {effs['a100'][1]:.0f} (A100) and {effs['h100'][1]:.0f} "
                                      f"(H100); {s0:g} is their mean (measurements flash_a100, flash_h100)")
    m = meas["flash_triton_a100"]
    rate = _rate_at(m, s0)
    out[("a100-16bit", "triton_flash_eff")] = (round(rate, 3), f"{m['source']}: their rate at the shared s0 = {s0:g} "
                                                              f"(keys / (keys + s0) form), {rate:.3f} of the 16-bit "
                                                              "peak")
    m = meas["gemm_fp8_h800"]
    eff, k0 = _fit_k0(m)
    out[("h100-fp8", "gemm_k0")] = (k0, f"{m['source']}: core.cost.gemm's form fitted to them gives k0 = {k0:.0f} "
                                        f"elements (at {eff:.3f} of the FP8 peak for that kernel)")
    out[("h100-16bit", "gemm_k0")] = (k0 / 2, f"half the FP8 fit's k0 = {k0:.0f} (DeepGEMM's H800 shapes): Hopper's "
                                              "tensor-core pipelines take k in 128-byte blocks, 64 BF16 or 128 FP8 "
                                              "elements, so the same fixed number of blocks per tile is half the "
                                              "elements in BF16; the BF16 calibration set cannot tell k0 from mem_eff "
                                              "(both scale as 1 / h)")
    return out


def apply_measured(doc: dict | None = None) -> dict[tuple[str, str], tuple[float, str]]:
    """Put the measured values into the loaded file (and into `doc`, the copy --write saves)."""
    values = measured()
    for target in filter(None, (calibration.document_copy(), doc)):
        for (where, name), (value, source) in values.items():
            if where == "fixed":
                target["fixed"][name] = value
                target["fixed_sources"][name] = source
            else:
                target["calibrations"][where]["values"][name] = value
                target["calibrations"][where].setdefault("sources", {})[name] = source
    calibration.record.cache_clear()
    return values


def record_of(row: dict) -> str:
    """The calibration record a published row belongs to: its GPU preset's family at its precision."""
    return calibration.for_family(presets.gpu(row["gpu"]).calibration, row["precision"]).key


def calibration_rows(key: str) -> list[dict]:
    """Record `key`'s calibration set (rows another fit uses, `fitted_by`, are not in it)."""
    return [r for r in validation.data()["rows"] if r["role"] == "calibration" and not r.get("unmatched")
            and not r.get("fitted_by") and record_of(r) == key]


def _paper(source: str) -> str:
    return source.split("-")[0]


def _records(group: str) -> list[str]:
    return list(FITS[group].get("sets", ()))


@contextmanager
def _trial(values: dict[str, float], release: str | None = None) -> Iterator[None]:
    """Every record of `values` ("record:name" keys) tried at once; under `release`, as that release's values."""
    if release is not None:
        with releases.trial(release, **values):
            yield
        return
    with ExitStack() as stack:
        by_record: dict[str, dict[str, float]] = {}
        for name, value in values.items():
            record, param = name.split(":")
            by_record.setdefault(record, {})[param] = value
        for record, params in by_record.items():
            stack.enter_context(calibration.trial(record, **params))
        yield


def group_rows(group: str) -> list[dict]:
    """The fit group's calibration set: its records' sets, or the rows whose `fitted_by` names the group."""
    tag = FITS[group].get("fitted_by")
    if tag is None:
        return [r for key in _records(group) for r in calibration_rows(key)]
    return [r for r in validation.data()["rows"] if r["role"] == "calibration" and r.get("fitted_by") == tag]


def _split(values: dict[str, float]) -> tuple[dict[str, float], dict[str, float] | None]:
    """("record:name" values, planner assumptions or None)."""
    assumed = {k: v for k, v in values.items() if ":" not in k}
    return {k: v for k, v in values.items() if ":" in k}, assumed or None


def calibration_errors(group: str, values: dict[str, float]) -> dict[str, np.ndarray]:
    """Errors of the fit group's calibration rows under `values`, grouped by publication."""
    wanted = {r["key"] for r in group_rows(group)}
    records, assumed = _split(values)
    with _trial(records, FITS[group].get("release")):
        steps = validation.step_rows(assumed, roles=("calibration",), keep=lambda r: r["key"] in wanted)
        layers = validation.layer_rows() if "a100-16bit" in _records(group) else None
    out: dict[str, list] = {}
    for source, error in zip(steps.get("source", []), steps.get("error", []), strict=True):
        out.setdefault(_paper(source), []).append(error)
    if layers is not None:  # forward and backward where published
        for row in layers[layers["role"] == "calibration"].to_dict("records"):
            finite = row["forward_error"] is not None and np.isfinite(row["forward_error"])
            split = [row["forward_error"], row["backward_error"]] if finite else [row["error"]]
            out.setdefault(_paper(row["source"]), []).extend(split)
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}


def objective(group: str, values: dict[str, float]) -> float:
    """Mean squared log error within each source, summed over sources."""
    return float(sum(np.mean(np.log1p(e) ** 2) for e in calibration_errors(group, values).values()))


def _grid(bounds: dict, centre: dict | None, steps: dict | None) -> list[dict[str, float]]:
    axes = {}
    for k, (lo, hi, n) in bounds.items():
        axes[k] = (np.linspace(lo, hi, n) if centre is None
                   else np.unique(np.clip(np.linspace(centre[k] - steps[k], centre[k] + steps[k], FINE), lo, hi)))
    return [dict(zip(axes, map(float, pt), strict=True)) for pt in itertools.product(*axes.values())]


def fit(group: str) -> tuple[dict[str, float], float]:
    """The group's fitted values ("record:name", rounded as stored) and the objective there."""
    bounds = FITS[group]["bounds"]
    steps = {k: (hi - lo) / (n - 1) for k, (lo, hi, n) in bounds.items()}
    best, best_cost, centre = None, np.inf, None
    for _ in range(ROUNDS + 1):
        for values in _grid(bounds, centre, None if centre is None else steps):
            cost = objective(group, values)
            if cost < best_cost:
                best, best_cost = values, cost
        centre, steps = best, {k: 2 * v / (FINE - 1) for k, v in steps.items()}
    rounded = {k: round(v) if k.endswith(("gemm_k0", "_us")) else round(v, 3) for k, v in best.items()}
    return rounded, objective(group, rounded)


def _summary(result: validation.Validation, key: str) -> dict:
    """Calibration and held-out errors of the rows that use record `key` as it is (a release fit's rows aside)."""
    steps = result.matched
    rows = {r["key"]: r for r in validation.data()["rows"]}
    mine = steps[[record_of(rows[k]) == key and validation.release(rows[k]) == releases.base() for k in steps["key"]]]
    fitted = {r["key"] for r in calibration_rows(key)}
    parts = {"calibration": mine[mine["key"].isin(fitted)], "held-out": mine[mine["role"] == "held-out"]}
    out = {}
    for role, part in parts.items():
        s = validation.summarize(part["error"], part["source"])
        if s.rows:
            out[role] = {"rows": s.rows, "mean_abs_error": round(s.mean_abs_error, 4),
                         "max_abs_error": round(s.max_abs_error, 4), "signed_mean_error": round(s.signed_mean_error, 4)}
    if key == "a100-16bit":
        s = validation.summarize(result.layers["error"])
        out["per-layer (calibration)"] = {"rows": s.rows, "mean_abs_error": round(s.mean_abs_error, 4),
                                          "max_abs_error": round(s.max_abs_error, 4),
                                          "signed_mean_error": round(s.signed_mean_error, 4)}
    return out


def _subset_summary(result: validation.Validation, group: str) -> dict:
    """Errors of a subset fit's rows and of the held-out rows of their sources."""
    rows = [r["key"] for r in group_rows(group)]
    steps = result.matched[result.matched["source"].isin({r["source"] for r in group_rows(group)})]
    summary = {}
    for role, part in (("calibration", steps[steps["key"].isin(rows)]), ("held-out", steps[~steps["key"].isin(rows)])):
        s = validation.summarize(part["error"], part["source"])
        summary[role] = {"rows": s.rows, "mean_abs_error": round(s.mean_abs_error, 4),
                         "max_abs_error": round(s.max_abs_error, 4), "signed_mean_error": round(s.signed_mean_error, 4)}
    return summary


def _store_subset_fit(doc: dict, group: str, values: dict[str, float], cost: float,
                      result: validation.Validation) -> None:
    """A subset fit's provenance, per parameter, in its record's `fits` (the record's own set stays as it is)."""
    spec = FITS[group]
    rows = [r["key"] for r in group_rows(group)]
    summary = _subset_summary(result, group)
    for name, value in values.items():
        key, param = name.split(":")
        lo, hi, _ = spec["bounds"][name]
        record = {"value": value, "set": spec["sets"][key], "rows": rows, "fitted_by": spec["fitted_by"],
                  "objective": "mean squared log(predicted / published) over the set", "bounds": [lo, hi],
                  "bounds_why": spec["bounds_why"], "cost": round(cost, 6), "summary": summary,
                  "script": "scripts/fit_efficiency.py"}
        doc["calibrations"][key].setdefault("fits", {})[param] = record
        calibration.entry(key).setdefault("fits", {})[param] = record
        print(json.dumps({key: {param: record}}, indent=2))


def _store_assumption_fit(doc: dict, group: str, values: dict[str, float], cost: float,
                          result: validation.Validation) -> None:
    """A planner assumption's fit under `assumption_fits` (its Spec reads the default from there), with the
    errors of its set and of every other row that runs the mechanism (`held_out`)."""
    spec = FITS[group]
    rows = [r["key"] for r in group_rows(group)]
    others = result.matched[result.matched["key"].isin(HELD_OUT.get(group, ()))]
    held = {k: round(float(e), 4) for k, e in zip(others["key"], others["error"], strict=True)}
    for name, value in values.items():
        lo, hi, _ = spec["bounds"][name]
        record = {"value": value, "set": spec["sets"][name], "rows": rows, "fitted_by": spec["fitted_by"],
                  "objective": "mean squared log(predicted / published) over the set", "bounds": [lo, hi],
                  "bounds_why": spec["bounds_why"], "cost": round(cost, 6),
                  "summary": _subset_summary(result, group), "held_out": held, "script": "scripts/fit_efficiency.py"}
        doc.setdefault("assumption_fits", {})[name] = record
        print(json.dumps({name: record}, indent=2))


def _store_release_fit(group: str, values: dict[str, float], cost: float, write: bool) -> None:
    """A release's fitted kernels in assets/releases.json (the loaded copy too, so later fits and summaries see
    them), with the errors of its own rows and of every row timed with it."""
    release = FITS[group]["release"]
    path = ROOT / "assets" / "releases.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    for target in (doc["releases"][release], releases.entry(release)):
        target["values"] = dict(values)
    releases.values.cache_clear()
    steps = validation.validate().matched
    mine = steps[steps["release"].map(releases.fitted_by) == release]
    fit = doc["releases"][release]["fit"]
    fit.update({"rows": [r["key"] for r in group_rows(group)], "fitted_by": FITS[group]["fitted_by"],
                "objective": "mean squared log(predicted / published) over the set", "cost": round(cost, 6),
                "errors": {k: round(float(e), 4) for k, e in zip(mine["key"], mine["error"], strict=True)},
                "script": "scripts/fit_efficiency.py"})
    print(json.dumps({release: doc["releases"][release]}, indent=2))
    if write:
        path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


# The rows outside a subset fit's sources that run its mechanism, whose errors its record keeps.
HELD_OUT = {"moe_overlap": ("mb2509-deepseekv3-1024", "mb260401-qwen3_235b_a22b-256"),
            "megatron_deepspeed": ("bloom-176b-384", "mtnlg-530b-2240", "mtnlg-530b-2800", "mtnlg-530b-3360")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    spec_args.switch(parser, "--write", help="store the fits in assets/efficiency.json")
    parser.add_argument("--fit", choices=tuple(FITS), action="append", help="run only this fit (repeatable)")
    spec_args.switch(parser, "--measurements", help="only print the values the kernel measurements fix, and how")
    args = parser.parse_args()
    path = ROOT / "assets" / "efficiency.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    fixed = apply_measured(doc)
    print(json.dumps({f"{w} {n}": {"value": v, "source": src} for (w, n), (v, src) in fixed.items()}, indent=2))
    if args.measurements:
        return 0
    for group in args.fit or FITS:
        values, cost = fit(group)
        records, assumed = _split(values)
        if assumed:
            _store_assumption_fit(doc, group, values, cost, validation.validate(assumed))
            continue
        if "release" in FITS[group]:
            _store_release_fit(group, values, cost, bool(args.write))
            continue
        for name, value in values.items():
            record, param = name.split(":")
            calibration.entry(record)["values"][param] = value  # the loaded copy: the summaries below use the fit
            doc["calibrations"][record]["values"][param] = value
        calibration.record.cache_clear()
        result = validation.validate()
        if "fitted_by" in FITS[group]:
            _store_subset_fit(doc, group, values, cost, result)
            continue
        for key, described in FITS[group]["sets"].items():
            mine = sorted(n.split(":")[1] for n in values if n.startswith(key + ":"))
            rows = [r["key"] for r in calibration_rows(key)]
            if key == "a100-16bit":
                rows += [r["key"] for r in validation.data()["per_layer"]]
            record = {
                "fitted": mine, "set": described, "rows": rows,
                "objective": "mean squared log(predicted / published) within each source, summed over sources (no "
                             "publication outvotes another by row count), over the fit's records together",
                "fitted_with": [k for k in FITS[group]["sets"] if k != key],
                "bounds": {n.split(":")[1]: [lo, hi] for n, (lo, hi, _) in FITS[group]["bounds"].items()
                           if n.startswith(key + ":")},
                "bounds_why": BOUNDS_WHY, "cost": round(cost, 6), "summary": _summary(result, key),
                "script": "scripts/fit_efficiency.py",
            }
            doc["calibrations"][key].update(record)
            print(json.dumps({key: {"values": doc["calibrations"][key]["values"], **record}}, indent=2))
    if args.write:
        path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
