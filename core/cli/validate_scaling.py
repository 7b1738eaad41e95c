"""The scaling-series section of `python -m core validate` (core.planner.validation_scaling): per series, each
published point against the planner's prediction, then the series' drift (the spread of its errors)."""

from __future__ import annotations

from core.cli.text import render
from core.planner import validation_scaling
from core.planner.validation import signed_percent as pct


def section(result: validation_scaling.Scaling) -> str:
    lines = ["", "Scaling series (assets/scaling.json; one model and layout on more GPUs, each point a row of the "
             "table above; drift = max - min error along the series; 'derived' = published TFLOP/s or MFU turned into "
             "seconds with the source's FLOP count):"]
    headers = ["series", "role", "GPUs", "m", "published s", "predicted s", "error", "fits"]
    table = [[r["label"], r["role"], f"{r['gpus']:,}", r["m"],
              f"{r['published_s']:,.2f}" + (" (derived)" if r["derived"] else ""), f"{r['predicted_s']:,.2f}",
              pct(r["error"]), "yes" if r["fits"] else "NO"] for r in result.steps.to_dict("records")]
    lines.append(render(headers, table))
    lines.append("")
    lines += [f"{s.key} ({s.role}): {s.points} points, mean |error| {100 * s.mean_abs_error:.1f} %, signed "
              f"{100 * s.signed_mean_error:+.1f} %, drift {100 * s.drift:.1f} points (floor {100 * s.floor:.1f})"
              for s in result.summary()]
    lines.append("floor: the least drift any step time c x m + F + g x log2(d) (c > 0; F, g >= 0; m sequences "
                 "per pipeline, batch / d; d data-parallel ranks) reaches on the published points, i.e. their own "
                 "scatter.")
    fit = result.fit
    trends = ", ".join(f"{k}: {100 * v:+.2f}" for k, v in fit["trends"].items())
    lines.append(f"ring_loss the calibration series asks for (least error trend against log2 GPUs): "
                 f"{fit['fitted_ring_loss']:g} (trend {100 * fit['fitted_trend_per_doubling']:+.2f} points per "
                 f"doubling; by ring_loss: {trends}); the default 0.06 is NVIDIA/nccl issue 1229's measurement.")
    return "\n".join(lines)
