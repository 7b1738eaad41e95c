"""`python -m core zero`: model-state bytes per GPU under DP and ZeRO 1-3, offload, communication, fit.

With `--model NAME` (a preset's architecture; default custom: the typed --params) and `--act` it also prints what
the ZeRO page shows with 'Add activations and working buffers' on: each stage's bytes per GPU with the activations
of the fullest pipeline device and ZeRO-3's gathered layers, from the same function and inputs (core.memory.per_gpu
through core.views.zero), so the page's number, the planner row that links to it and this line agree.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from core.cli import spec_args
from core.cli.text import print_json, render
from core.cost.comm import volume_units_note
from core.memory import states as memory
from core.params import zero_page
from core.params.memory import ZERO, ZeroParams
from core.units import GB, GIB
from core.views import zero as zero_report

SHORT_FLAGS = {"t": ("-t", "--t"), "p": ("-p", "--p"), "m": ("-m", "--m"), "v": ("-v", "--v"), "mb": ("-b", "--mb")}
# The page's model and GPU pickers, "custom" by default on the command line (the typed --params, --gpu-mem); the
# activation inputs and the custom model's shape.
PAGE = {k: replace(zero_page.PAGE[k], default="custom") for k in ("model", "gpu")} | {"act": zero_page.PAGE["act"]}
MORE = {**PAGE, **zero_page.ACT, **zero_page.CUSTOM, **zero_page.MOE, **zero_page.MLA}


def build(parser: argparse.ArgumentParser) -> None:
    for spec in (*ZERO.values(), *MORE.values()):
        spec_args.add(parser, spec, *SHORT_FLAGS.get(spec.key, ()))
    spec_args.switch(parser, "--presets", help="List the optimizer presets and their byte counts.")
    spec_args.switch(parser, "--json",
                     help="Print an object keyed dp, zero1, zero2, zero3 (the chosen stages), byte counts.")


def run(args: argparse.Namespace) -> int:
    if args.presets:
        return _print_presets(args.json)
    values = spec_args.collect(args, {**ZERO, **MORE})
    if values["model"] == "custom" and values["gpu"] == "custom" and not values["act"]:
        report = zero_report.build(ZeroParams(**{k: values[k] for k in ZERO}))  # the paper's accounting, typed
        view = None
    else:
        q, shape, act = zero_report.from_inputs({**{k: s.default for k, s in zero_page.CUSTOM.items()}, **values})
        view = zero_report.zero_view(q, shape, act)
        report = replace(view.report, stages={k: r for k, r in view.report.stages.items()
                                              if q.stage == "all" or k == memory.STAGE_KEYS[int(q.stage)]})
    if args.json:
        print_json(report.as_json() | ({"per_gpu": _per_gpu(view)} if view is not None and view.act else {}))
    else:
        print(_human(report) + (_with_activations(view) if view is not None and view.act else ""))
    return 0


def _per_gpu(view) -> dict:
    """Each stage's bytes per GPU as the page draws them with activations and working buffers on."""
    parts = ("params", "grads", "optimizer", "expert_params", "expert_grads", "expert_optimizer", "working",
             "gathered", "activations", "framework", "total", "headroom", "fits")
    return {b.key: {k: getattr(b, k) for k in parts} for b in view.bars}


def _with_activations(view) -> str:
    a = view.act
    rows = [[memory.stage_title(i), _gb(b.total - b.activations - b.gathered - b.framework), _gb(b.gathered),
             _gb(b.activations), _gb(b.framework), _gb(b.total), "yes" if b.fits else "no"]
            for i, b in enumerate(view.bars)]
    return ("\n\nWith activations and working buffers (as the ZeRO page and the planner count them): "
            f"{a.schedule}, p = {a.p}, m = {a.m}; the first stage holds {a.inflight:g} "
            f"micro-batch{'' if a.inflight == 1 else 'es'}, the last {a.inflight_last:g}; peak on the {a.worst} "
            "stage.\n"
            + render(["stage", "states GB", "ZeRO-3 gathered GB", "activations GB", "framework GB", "per GPU GB",
                      "fits"], rows))


def _print_presets(as_json: bool) -> int:
    table = memory.preset_table()
    if as_json:
        print_json(table.to_dict(orient="records"))
        return 0
    cols = ["optimizer", "precision", "params [B/param]", "grads [B/param]", "K [B/param]", "total [B/param]"]
    rows = [[str(r[c]) if i < 2 else f"{r[c]:g}" for i, c in enumerate(cols)] for r in table.to_dict("records")]
    print(render(cols, rows))
    for r in table.to_dict("records"):
        print(f"  {r['optimizer']}/{r['precision']}: {r['source']}")
    return 0


def _gb(x: float) -> str:
    return f"{x / GB:,.2f}"


def _human(report: zero_report.ZeroReport) -> str:
    q, bpp = report.inputs, report.bytes_per_param
    split = f"split {q.split}" + (f", embedding {q.embedding:,.0f}" if q.split != "even" else "")
    lines = [
        f"Model states per GPU: Psi = {q.params:,.0f} parameters; t = {q.t}, p = {q.p} ({split}) -> "
        f"{report.psi_rank:,.0f} per rank; N_d = {q.nd:,}"
        + (f"\nRouted experts: {q.expert_params:,.0f} of Psi over ep = {q.ep} -> {report.expert_rank:,.0f} per rank, "
           f"ZeRO over N_d / ep = {q.nd // q.ep:,} ranks (params/grads/optim columns: the dense part)"
           if report.expert_rank else ""),
        f"Bytes per parameter ({bpp.label}): params {bpp.param_bytes:g}, grads {bpp.grad_bytes:g}, "
        f"optimizer K = {bpp.k:g}",
        f"Units: GB = 1e9 bytes, GiB = 2^30 bytes. Usable per GPU: {_gb(report.usable)} GB of {q.gpu_mem:g} GB.",
        "",
    ]
    headers = ["stage", "params GB", "grads GB", "optim GB", "total GB", "total GiB", "vs DP", "comm/step",
               "smallest N_d", f"fits {q.gpu_mem:g} GB", "headroom GB"]
    if report.expert_rank:
        headers[4:4] = ["experts GB"]
    offload = any(r["offload"] != "none" for r in report.stages.values())
    nvme = any(r["offload"] == "nvme" for r in report.stages.values())
    if offload:
        headers[-2:-2] = ["GPU GB", "CPU/node GB"]
    if nvme:
        headers[-2:-2] = ["NVMe/node GB", "NVMe s/step"]
    rows = []
    for key, r in report.stages.items():
        need = "never" if r["smallest_nd"] != r["smallest_nd"] or r["smallest_nd"] == float("inf") else \
            f"{r['smallest_nd']:,.0f}"
        if r["offload"] != "none":
            need = "-"
        row = [memory.stage_title(memory.STAGE_KEYS.index(key)), _gb(r["params"]), _gb(r["grads"]),
               _gb(r["optimizer"]), _gb(r["total"]), f"{r['total'] / GIB:,.2f}", f"{r['reduction_vs_dp']:.1f}x",
               f"{r['comm_psi']:g} Psi = {_gb(r['comm_bytes'])} GB", need, "yes" if r["fits"] else "no"]
        row.append(_gb(r["headroom"]))
        if report.expert_rank:
            row[4:4] = [_gb(r["expert_total"])]
        if offload:
            row[-2:-2] = [_gb(r["gpu"]), _gb(r["cpu_per_node"])]
        if nvme:
            row[-2:-2] = [_gb(r["nvme_per_node"]) + ("" if r["nvme_fits"] else " (too big)"),
                          f"{r['nvme_seconds']:.3g}"]
        rows.append(row)
    lines.append(render(headers, rows))
    lines.append("")
    lines.append(f"comm/step: bytes each rank sends with ring collectives over N_d = {q.nd:,} "
                 f"({q.bw:g} GB/s per rank: " + ", ".join(
                     f"{memory.STAGE_LABELS[memory.STAGE_KEYS.index(k)]} {r['comm_seconds']:.3g} s"
                     for k, r in report.stages.items()) + "). " + volume_units_note(bpp.param_bytes))
    lines.append("headroom: usable GPU memory left after the model states (negative: short by that much).")
    if nvme:
        lines.append(f"NVMe (ZeRO-Infinity): parameter shards and optimizer state on {q.nvme_tb:g} TB per node; "
                     f"s/step reads the parameters for one forward and backward and reads and writes the optimizer "
                     f"state once, at {q.nvme_bw:g} GB/s per node shared by its GPUs.")
    if q.deepspeed:
        for key, r in report.stages.items():
            if "deepspeed_gpu" in r:
                lines.append(f"DeepSpeed estimate, {memory.STAGE_LABELS[memory.STAGE_KEYS.index(key)]}: "
                             f"{r['deepspeed_gpu'] / GIB:.2f} GiB per GPU, {r['deepspeed_cpu_per_node'] / GIB:.2f} GiB "
                             "per node (DeepSpeed prints these GiB as 'GB'); without offload "
                             f"{r['deepspeed_formula']}.")
    lines.append("Model states only: activations and buffers come on top (--act, or python -m core activations ...).")
    return "\n".join(lines)
