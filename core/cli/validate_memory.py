"""`python -m core validate --memory`: the planner's memory against measured per-GPU peaks
(core.planner.memory_validation), each row in its own kind (allocated, reserved, device) and device, calibration
and held-out rows apart, then the summaries."""

from __future__ import annotations

from core.cli.text import render
from core.planner import memory_validation
from core.planner.validation import ROLES
from core.planner.validation import signed_percent as pct
from core.units import GIB


def section(result: memory_validation.MemoryValidation) -> str:
    lines = ["Memory per GPU, measured vs predicted (each run's own layout, GPU and framework accounting; error = "
             "predicted / measured - 1; kind: what the source printed, torch.cuda max_memory_allocated or "
             "max_memory_reserved, or the device total; device: the fullest GPU, or the pipeline stage the source "
             "logs; GiB = 2^30 bytes)."]
    headers = ["run", "framework", "gpu", "t", "p", "cp", "d", "ZeRO", "schedule", "b", "recompute", "kind",
               "device", "measured GiB", "predicted GiB", "error", "fits"]
    rows = result.matched
    for scope_name, in_scope in (("", rows["scope"] == memory_validation.MODELLED),
                                 (" outside the modelled frameworks", rows["scope"] != memory_validation.MODELLED)):
        for role in ROLES:
            part = rows[in_scope & (rows["role"] == role)]
            if not len(part):
                continue
            table = [[r["label"], r["framework"], r["gpu"], r["t"], r["p"], r["cp"], r["d"], r["zero"],
                      r["schedule"] + (f" v={int(r['v'])}" if r["schedule"] == "interleaved" else ""),
                      r["micro_batch"], r["recompute"], r["kind"], r["device"],
                      f"{r['measured_bytes'] / GIB:,.2f}", f"{r['predicted_bytes'] / GIB:,.2f}", pct(r["error"]),
                      "yes" if r["fits"] else "NO"] for r in part.to_dict("records")]
            lines += ["", f"{role} rows{scope_name} ({len(table)}):", render(headers, table)]
    unmatched = result.rows[result.rows["unmatched"].notna()]
    if len(unmatched):
        lines += ["", f"unmatched rows ({len(unmatched)}), kept with the reason:"]
        lines += [f"- {r['label']} ({r['source']}): {r['unmatched']}" for r in unmatched.to_dict("records")]
    lines += ["", *result.summary_lines(),
              "Assumptions where a source is silent: `validate --memory --json`, each row's `assumed`."]
    return "\n".join(lines)
