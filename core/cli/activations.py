"""`python -m core activations`: activation bytes per GPU (Korthikanti et al.), optionally with model states.

The micro-batches a stage holds come from `--inflight X`, or from the pipeline simulator's peak for
`--schedule NAME -p P -m M [-v V]` (core.pipeline.peak_inflight); with p = 1 it is one micro-batch.
"""

from __future__ import annotations

import argparse

from core.cli import spec_args
from core.cli.text import print_json, render
from core.errors import InputError
from core.memory import activations, fit, per_gpu
from core.params.memory import ACTIVATIONS
from core.units import GB, GIB

SHORT_FLAGS = {"t": ("-t", "--t"), "p": ("-p", "--p"), "m": ("-m", "--m"), "v": ("-v", "--v"),
               "mb": ("-b", "--mb")}
# This command prints the textbook count (Korthikanti et al.), which has no framework: the switches that change only
# a framework's accounting (`plan`, `zero --act`, the pages) are not its flags, where they would be taken and ignored
FRAMEWORK_SWITCHES = frozenset({"compile", "repeat_kv", "sac_attention", "loss", "grouped_gemm", "tp_comm_overlap",
                                "recompute_modules"})


def build(parser: argparse.ArgumentParser) -> None:
    for spec in ACTIVATIONS.values():
        if spec.key not in FRAMEWORK_SWITCHES:
            spec_args.add(parser, spec, *SHORT_FLAGS.get(spec.key, ()))
    spec_args.switch(parser, "--json", help="Print the breakdown as JSON (bytes).")


def inflight_from(values: dict, schedule_given: bool) -> tuple[float, str]:
    """Micro-batches in flight and where the number came from."""
    if values["inflight"] is not None:
        if schedule_given:
            raise InputError("inflight: give either --inflight or --schedule, not both")
        return float(values["inflight"]), "given"
    if schedule_given:
        try:
            from core.pipeline.result import peak_inflight
        except ImportError:
            raise InputError("schedule: the pipeline simulator (core.pipeline.peak_inflight) is not available; "
                             "pass --inflight instead") from None
        name, p, m, v = values["schedule"], values["p"], values["m"], values["v"]
        return float(peak_inflight(name, p, m, v)), f"pipeline simulator: {name}, p={p}, m={m}, v={v}"
    if values["p"] == 1:
        return 1.0, "p = 1: one micro-batch at a time"
    raise InputError("inflight: with p > 1 give --inflight X or --schedule NAME -m M "
                     "(the pipeline simulator supplies the micro-batches in flight)")


def run(args: argparse.Namespace) -> int:
    values = spec_args.collect(args, ACTIVATIONS)
    inflight, source = inflight_from(values, args.schedule is not None)
    shape = activations.Shape(values["seq"], values["mb"], values["hidden"], values["heads"], values["t"],
                              values["sequence_parallel"], values["recompute"], values["vocab"], values["cp"],
                              values["fp8"], values["flash"])
    result = activations.report(shape, values["layers"], values["p"], inflight)
    result["inflight_source"] = source
    if values["params"] is not None:  # the one memory function's model states (even t x p split, Adam, mixed)
        model = per_gpu.ModelMemory(dense_params=values["params"], layers=values["layers"], hidden=values["hidden"],
                                    heads=values["heads"], seq=values["seq"], vocab=values["vocab"])
        layout = per_gpu.Layout(t=values["t"], p=values["p"], d=values["nd"], zero=values["zero_stage"])
        states = per_gpu.model_state_parts(per_gpu.MemoryConfig(model, layout)).states_on_gpu
        usable = fit.usable_bytes(values["gpu_mem"])
        result["together"] = fit.together(states, result["peak"], usable)
    if args.json:
        print_json(result)
    else:
        print(_human(values, result))
    return 0


def _gb(x: float) -> str:
    return f"{x / GB:,.3f}"


def _human(values: dict, r: dict) -> str:
    sp = "with" if values["sequence_parallel"] else "without"
    lines = [
        f"Activations per GPU: s={values['seq']}, b={values['mb']}, h={values['hidden']}, a={values['heads']}, "
        f"L={values['layers']}, t={values['t']} ({sp} sequence parallelism), cp={values['cp']}, "
        f"recompute {values['recompute']}{', FP8 activations' if values['fp8'] else ''}"
        f"{', flash attention' if values['flash'] else ''}",
        f"{r['layers_per_stage']:g} layers per stage (p = {values['p']}), {r['inflight']:g} micro-batches in flight "
        f"({r['inflight_source']}). Units: GB = 1e9 bytes, GiB = 2^30 bytes.",
        "",
        render(["mode (per layer, one micro-batch)", "GB", "GiB"],
               [[name, _gb(b), f"{b / GIB:,.3f}"] for name, b in r["modes"].items()]),
        "",
    ]
    stages = [("first stage", r["first_stage"])] + ([("last stage (upper bound)", r["last_stage"])]
                                                    if r["last_stage"] else [])
    terms = ["layers", "embedding", "output", "recompute_buffer", "total"]
    lines.append(render(["stage"] + [f"{t} GB" for t in terms],
                        [[name] + [_gb(s[t]) for t in terms] for name, s in stages]))
    if "together" in r:
        tg = r["together"]
        lines += ["", f"Model states (ZeRO stage {values['zero_stage']}, N_d = {values['nd']}) {_gb(tg['states'])} GB "
                      f"+ activations {_gb(tg['activations'])} GB = {_gb(tg['total'])} GB of {_gb(tg['usable'])} GB: "
                      f"{'fits' if tg['fits'] else 'does NOT fit'}"
                      + (" (the states alone would)" if tg["fits_states_only"] and not tg["fits"] else "")]
    return "\n".join(lines)
