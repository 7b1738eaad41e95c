"""`python -m core plan`: enumerate and rank t x p x d layouts, explain the best, export its configs.

Every input left out takes the default its --help states, the Planner page's (GPT-3 175B on 1,024 H100s, global
batch 1,536):

    python -m core plan --framework megatron --min-headroom 8 --explain
    python -m core plan --model llama3-70b --gpus 64 --gpu a100-80gb --global-batch 512
    python -m core plan --model llama3-405b --seq 131072 --gpus 16384 --gpu h100-80gb --global-batch 128
    python -m core plan --layers 80 --hidden 8192 --heads 64 --seq 4096 --vocab 128256 --params 70e9 \\
        --gpus 64 --gpu-mem 80 --gpu-tflops 312 --gpus-per-node 8 --global-batch 512 --json
    python -m core plan --model bloom-176b --gpu a100-80gb --gpus 384 --global-batch 2048 \\
        --fix t=4,p=12,zero=1,mbs=2,recompute=full,sp=off,schedule=1f1b --explain --export megatron
    python -m core plan --gpu a100-40gb --inter-bw 12.5 --tp-bwd-overlap false --grad-accum-fusion false
    python -m core plan --model llama3-70b --flash false --gpus 64 --global-batch 512
    python -m core plan --model deepseek-v3 --gpus 61440 --seq 1048576 --micro-batch-sizes 1,2,3,4,5,6,7,8 \\
        --fix offload=all                    # above the work budget: narrowed, and the notes say how

Same inputs, same numbers as the Planner page (core.planner.plan on a core.params.planner.PlannerParams).
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from core.cli import spec_args
from core.cli.text import print_json, render
from core.cost import releases
from core.errors import InputError
from core.params.planner import (
    ANY_MODEL_FLAGS,
    ARCH_FLAGS,
    ASSUMPTIONS,
    BUDGET,
    FIX_KEYS,
    GPU_FLAGS,
    PLAN,
    TRAIN_FLAGS,
    PlannerParams,
)
from core.planner import plan as planner
from core.planner import recommend
from core.units import GB


def build(parser: argparse.ArgumentParser) -> None:
    what = parser.add_argument_group("model (a preset, or a custom architecture)")
    spec_args.add(what, PLAN["model"], "--model")
    spec_args.add(what, PLAN["seq"], "--seq")
    for key, flag in {**ARCH_FLAGS, **ANY_MODEL_FLAGS}.items():
        spec_args.add(what, PLAN[key], flag)
    what.add_argument("--tied", choices=("true", "false"), default=None,
                      help="Custom model: tied input and output embeddings (default true). A custom model's "
                           "--kv-heads defaults to --heads and --ffn to 4 x --hidden.")
    cluster = parser.add_argument_group("cluster (a GPU preset, any of its numbers overridden, or custom numbers)")
    spec_args.add(cluster, PLAN["gpus"], "--gpus")
    spec_args.add(cluster, PLAN["gpu"], "--gpu")
    for key, flag in GPU_FLAGS.items():
        spec_args.add(cluster, PLAN[key], flag)
    train = parser.add_argument_group("training")
    for key, flag in TRAIN_FLAGS.items():
        spec_args.add(train, PLAN[key], flag)
    for key in ("precision", "optimizer", "k"):
        spec_args.add(train, PLAN[key])
    counted = parser.add_argument_group("memory (whose bytes, and the framework switches that change them)")
    for key in ("memory_framework", "grad_dtype", "optimizer_dtype", "loss", "compile", "repeat_kv", "sac_attention",
                "grouped_gemm",
                "recompute_modules"):
        spec_args.add(counted, PLAN[key])
    search = parser.add_argument_group("search space")
    spec_args.add(search, PLAN["framework"])
    spec_args.add(search, PLAN["min_headroom"])
    spec_args.add(search, BUDGET)
    search.add_argument("--fix", default="", metavar="KEY=VALUE,...",
                        help="Pin search dimensions (evaluate your layout): " + ", ".join(FIX_KEYS)
                        + "; e.g. t=8,p=16,zero=1,mbs=1,schedule=interleaved,v=2,recompute=full,sp=on or "
                          "t=8,cp=16,p=16 (context parallel) or ep=64,etp=1 (experts). "
                          "zero, schedule, recompute, sp, offload, reshard and tp_overlap also take 'all'.")
    model = parser.add_argument_group("step-time assumptions (each with its justification in --help)")
    for spec in ASSUMPTIONS.values():
        spec_args.add(model, spec)
    out = parser.add_argument_group("output")
    out.add_argument("--top", type=int, default=10, help="Candidates to print (0 = all). Default 10.")
    spec_args.switch(out, "--feasible-only", help="Leave out infeasible candidates.")
    fmt = out.add_mutually_exclusive_group()
    spec_args.switch(fmt, "--json", help="Print a JSON list of candidates (bytes, seconds).")
    spec_args.switch(fmt, "--csv", help="Print the candidates as CSV (every column).")
    spec_args.switch(out, "--explain", help="Print the recommendation in plain words, with every assumption.")
    out.add_argument("--export", choices=("deepspeed", "megatron", "fsdp", "torch"), default=None,
                     help="Print the DeepSpeed JSON, Megatron-LM command or PyTorch (FSDP2) script of a candidate, "
                          "exactly its layout or an error saying why that framework cannot run it (notes go to "
                          "stderr).")
    out.add_argument("--rank", type=int, default=1, help="Which feasible candidate --export uses (default 1).")


def params_from(args: argparse.Namespace) -> PlannerParams:
    """The CLI's arguments as a PlannerParams (InputError for a bad or contradictory value)."""
    raw = {k: getattr(args, k) for k in PLAN if getattr(args, k, None) is not None}
    arch = [ARCH_FLAGS[k] for k in ARCH_FLAGS if k in raw] + (["--tied"] if args.tied else [])
    if arch == ["--layers"] and raw.get("model", "custom") != "custom" and "depth" not in raw:
        raw["depth"], arch = raw.pop("layers"), []  # a preset at another depth (a framework's few-layer proxy)
    if arch:
        if raw.get("model", "custom") != "custom":
            raise InputError(f"give --model or a custom architecture ({', '.join(arch)}), not both")
        raw["model"] = "custom"
        if args.tied:
            raw["tied"] = args.tied
        if "heads" in raw and "kv_heads" not in raw:
            raw["kv_heads"] = raw["heads"]  # plain multi-head attention unless --kv-heads says otherwise
        if "hidden" in raw and "ffn" not in raw:
            raw["ffn"] = str(4 * PLAN["hidden"].parse(raw["hidden"]))  # the GPT MLP width unless --ffn
    if any(k in raw for k in GPU_FLAGS) and "gpu" not in raw:
        raw["gpu"] = "custom"  # numbers without a preset describe a custom GPU; with --gpu they override the preset's
    raw.update(parse_fix(args.fix))  # anything left out takes the default its --help states (the page's)
    return PlannerParams.from_strings(raw)


def parse_fix(text: str) -> dict[str, str]:
    """'t=8,p=16,zero=1' -> {'fix_t': '8', 'fix_p': '16', 'zero': '1'} (values are checked by PLAN's specs)."""
    out: dict[str, str] = {}
    if len(text) > 200:
        raise InputError("--fix: too long")
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if not sep or key not in FIX_KEYS:
            raise InputError(f"--fix: {item[:40]!r} is not KEY=VALUE with KEY one of {', '.join(FIX_KEYS)}")
        out[FIX_KEYS[key]] = value.strip()
    return out


def run(args: argparse.Namespace) -> int:
    if args.top < 0:
        raise InputError("--top: must be 0 (all) or more")
    if args.rank < 1:
        raise InputError(f"--rank: {args.rank} is not a rank; the best feasible candidate is 1")
    budget = int(BUDGET.parse(args.budget)) if args.budget is not None else int(BUDGET.default)
    result = planner.plan(params_from(args), budget)
    if args.export:
        return _export(result, args.export, args.rank)
    frame = result.feasible if args.feasible_only else result.frame
    frame = frame if args.top == 0 else frame.head(args.top)
    if args.json:
        print_json(result.records(top=args.top or None, feasible_only=args.feasible_only))
        _to_stderr(result)
    elif args.csv:
        sys.stdout.write(result.csv(top=args.top or None, feasible_only=args.feasible_only))
        _to_stderr(result)
    else:
        print(_human(result, frame))
    if args.explain:
        print(recommend.recommend(result).text(), file=sys.stderr if args.json or args.csv else sys.stdout)
    return 0


def _to_stderr(result: planner.PlanResult) -> None:
    """With --json/--csv stdout stays machine-readable: what the search left out goes to stderr."""
    for note in result.notes:
        sys.stderr.write(f"note: {note}\n")
    if result.feasible.empty:
        sys.stderr.write(f"note: {result.why_empty()}\n")


def _export(result: planner.PlanResult, kind: str, rank: int) -> int:
    feasible = result.feasible
    if feasible.empty:
        raise InputError("no feasible candidate to export. " + result.why_empty())
    if not 1 <= rank <= len(feasible):
        raise InputError(f"--rank: choose 1 to {len(feasible)} (the feasible candidates)")
    art = result.export(kind, feasible.iloc[rank - 1])
    if art.refused:
        raise InputError(f"candidate {rank} cannot be exported for {kind} exactly: " + "; ".join(art.refused)
                         + ". " + " ".join(art.notes))
    sys.stdout.write(art.text if art.text.endswith("\n") else art.text + "\n")
    if art.setup:
        sys.stderr.write("setup (code the JSON cannot carry):\n" + art.setup)
    for note in art.notes:
        sys.stderr.write(f"note: {note}\n")
    return 0


def _human(result: planner.PlanResult, frame: pd.DataFrame) -> str:
    q, m, g = result.params, result.model, result.gpu
    active = f", {m.params_active / 1e9:,.3g}B active per token" if m.is_moe else ""
    lines = [f"{m.name} ({m.params / 1e9:,.3g}B parameters{active}) on {q.gpus:,} x {g.name} ({g.gpus_per_node} per "
             f"server), global batch {q.batch:,} sequences of {m.seq:,} tokens.",
             f"{len(result.feasible):,} of {len(result.frame):,} candidates feasible; usable memory "
             f"{result.usable / GB:,.1f} GB per GPU (GB = 1e9 bytes). Ranked: fastest first, headroom breaks ties.",
             releases.timing_note(q.release, g.calibration) + " Set --release to the software you run."
             + (f" Plus a production margin of {q.production_margin:g}." if q.production_margin else ""), ""]
    extra = [k for k in ("cp", "ep", "replicate") if not frame.empty and (frame[k] > 1).any()]  # shown when used
    headers = ["rank", "t", "p", "d", *extra, "b", "m", "schedule", "ZeRO", "recompute", "SP", "mem GB", "free GB",
               "bubble %", "step s", "tokens/s", "MFU %", "runs on", "why infeasible"]
    rows = []
    for r in frame.to_dict("records"):
        sched = r["schedule"] + (f" v={r['v']}" if r["schedule"] == "interleaved" else "")
        rows.append(["-" if r["rank"] != r["rank"] else f"{r['rank']:.0f}", r["t"], r["p"], r["d"],
                     *(r[k] for k in extra),
                     r["micro_batch_size"], r["m"] or "-", sched if r["p"] > 1 else "-",
                     f"{r['zero_stage']}" + ("" if r.get("reshard", True) else " kept"), r["recompute"],
                     ("on" + ("+overlap" if r.get("tp_comm_overlap") else "")) if r["sequence_parallel"] else "off",
                     _num(r["memory_bytes"] / GB, 1),
                     _num(r["headroom_bytes"] / GB, 1), _num(100 * r["bubble_fraction"], 1),
                     "not timed" if r.get("timing") else _num(r["step_time_s"], 2),
                     _num(r["tokens_per_s"], 0), _num(100 * r["mfu"], 1), ",".join(r["frameworks"]) or "none",
                     "; ".join(r["reasons"])[:90]])
    if rows:
        lines.append(render(headers, rows))
    if result.feasible.empty:
        lines += ["", result.why_empty()]
    lines += [f"note: {n}" for n in result.notes]
    lines.append("More: --explain (plain words and assumptions), --json/--csv (every column), --export KIND.")
    return "\n".join(lines)


def _num(x: float, digits: int) -> str:
    return "-" if x != x else f"{x:,.{digits}f}"
