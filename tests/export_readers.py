"""Read a layout back out of each export's text, independently of how the exporters wrote it, so tests can check
that an export reproduces its row exactly: t, p, d, schedule and v, micro-batch, recompute, ZeRO stage, offload."""

from __future__ import annotations

import ast
import json
import re
import shlex

FIELDS = ("t", "p", "d", "schedule", "v", "micro_batch_size", "recompute", "zero_stage", "offload",
          "sequence_parallel", "global_batch", "cp", "ep", "replicate")


def of_layout(layout) -> dict:
    """The fields an export must reproduce, from a core.planner.layout.Layout (p = 1 runs no schedule)."""
    out = {k: getattr(layout, k) for k in FIELDS}
    out["sequence_parallel"] = bool(layout.sequence_parallel and layout.t > 1)
    if layout.p == 1:
        out["schedule"], out["v"] = None, 1
    return out


def words(command: str) -> list[str]:
    body = "\n".join(line for line in command.splitlines() if not line.startswith("#"))
    return [w for w in shlex.split(body.replace("$MASTER_ADDR", "node0")) if w.strip()]


def _value(ws: list[str], flag: str, default=None):
    return ws[ws.index(flag) + 1] if flag in ws else default


def megatron(text: str) -> dict:
    ws = words(text)
    t, p = int(_value(ws, "--tensor-model-parallel-size")), int(_value(ws, "--pipeline-model-parallel-size"))
    cp, ep = int(_value(ws, "--context-parallel-size", 1)), int(_value(ws, "--expert-model-parallel-size", 1))
    n = int(_value(ws, "--nnodes", 1)) * int(_value(ws, "--nproc-per-node"))
    v = int(_value(ws, "--num-virtual-stages-per-pipeline-rank", 1))
    strategy = _value(ws, "--data-parallel-sharding-strategy")
    zero = {"optim_grads": 2, "optim_grads_params": 3}.get(strategy, 1 if "--use-distributed-optimizer" in ws else 0)
    return {"t": t, "p": p, "d": n // (t * p * cp), "cp": cp, "ep": ep,
            "schedule": None if p == 1 else ("interleaved" if v > 1 else "1f1b"),
            "v": v, "micro_batch_size": int(_value(ws, "--micro-batch-size")),
            "recompute": _value(ws, "--recompute-granularity", "none"), "zero_stage": zero,
            "offload": "optimizer" if "--optimizer-cpu-offload" in ws else "none",
            "sequence_parallel": "--sequence-parallel" in ws, "global_batch": int(_value(ws, "--global-batch-size")),
            "replicate": int(_value(ws, "--num-distributed-optimizer-instances", 1))}


def deepspeed(text: str, setup: str) -> dict:
    cfg = json.loads(text)
    topo = re.search(r"PipeModelDataParallelTopology\(num_pp=(\d+), num_mp=(\d+), num_dp=(\d+)\)", setup)
    p = int(topo.group(1)) if topo else 1
    t = int(topo.group(2)) if topo else cfg.get("tensor_parallel", {}).get("autotp_size", 1)
    b, m = cfg["train_micro_batch_size_per_gpu"], cfg["gradient_accumulation_steps"]
    d = cfg["train_batch_size"] // (b * m)
    assert not topo or int(topo.group(3)) == d
    zero = cfg["zero_optimization"]
    offload = ("optimizer+params" if "offload_param" in zero else "optimizer" if "offload_optimizer" in zero
               else "none")
    full = "activation_checkpointing" in cfg and (p == 1 or cfg.get("pipeline", {}).get(
        "activation_checkpoint_interval") == 1)
    return {"t": t, "p": p, "d": d, "schedule": None if p == 1 else "1f1b", "v": 1, "micro_batch_size": b,
            "recompute": "full" if full else "none", "zero_stage": zero["stage"], "offload": offload,
            "sequence_parallel": False, "global_batch": cfg["train_batch_size"], "cp": 1, "ep": 1, "replicate": 1}


CLASSES = {"ScheduleGPipe": "gpipe", "Schedule1F1B": "1f1b", "ScheduleInterleaved1F1B": "interleaved",
           "ScheduleZBVZeroBubble": "zbv", "ScheduleDualPipeV": "dualpipev"}


def torch_script(text: str) -> dict:
    tree = ast.parse(text)
    const = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple | ast.Name):
            names = ([e.id for e in node.targets[0].elts] if isinstance(node.targets[0], ast.Tuple)
                     else [node.targets[0].id])
            try:
                values = ast.literal_eval(node.value)
            except ValueError:
                continue
            values = values if isinstance(node.targets[0], ast.Tuple) else (values,)
            const.update(zip(names, values, strict=True))
    p = const["P"]
    schedule, v = None, 1
    if p > 1:
        used = [c for c in CLASSES if f"{c}(" in text]
        csv = re.search(r'_load_csv\("([a-z0-9-]+)_p\d+_m\d+\.csv"\)', text)
        schedule = CLASSES[used[0]] if used else csv.group(1)
        stage_map = ast.literal_eval(re.search(r"stage_map = (\[\[.*?\]\])", text).group(1))
        v = len(stage_map[0])
    return {"t": const["T"], "p": p, "d": const["D"], "schedule": schedule, "v": v,
            "micro_batch_size": const["MICRO_BATCH"], "recompute": const["RECOMPUTE"], "zero_stage": const["ZERO"],
            "offload": const["OFFLOAD"], "sequence_parallel": "SequenceParallel()" in text,
            "cp": const.get("CP", 1), "ep": 1, "replicate": _mesh(text).get("dp_replicate", 1),
            "global_batch": const["MICRO_BATCH"] * const["MICROBATCHES"] * const["D"]}


def _mesh(text: str) -> dict:
    """The device mesh the script builds: dimension name -> size."""
    found = re.search(r"init_device_mesh\(device_type, (\(.*?\)), mesh_dim_names=(\(.*?\))\)", text)
    return dict(zip(ast.literal_eval(found.group(2)), ast.literal_eval(found.group(1)), strict=True))
