"""Run every synchronous schedule's action table (core.pipeline.trace_export) in torch.distributed.pipelining's
runtime, one step each on the gloo processes torchrun starts: once with real compute (loss and gradients against a
single-process reference) and once with each F, B, I, W padded to a set time through the runtime's custom-function
hook (the measured step against our simulated makespan). Rank 0 writes one JSON file.

    python -m torch.distributed.run --standalone --nproc-per-node 4 tests/engines/pipelining_worker.py OUT.json
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import (
    BACKWARD_INPUT,
    BACKWARD_WEIGHT,
    FORWARD,
    FULL_BACKWARD,
    OVERLAP_F_B,
    _PipelineScheduleRuntime,
    _wait_batch_p2p,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from core.pipeline.result import PipelineParams, simulate  # noqa: E402
from core.pipeline.schedules import build  # noqa: E402
from core.pipeline.trace_export import pytorch_actions_csv  # noqa: E402

SCHEDULES = ("gpipe", "1f1b", "interleaved", "looped-bfs", "zb-h1", "zb-h2", "zbv", "v-half", "v-min", "dualpipev")
M, V, WIDTH, MICRO = 8, 2, 16, 2
OP_MS = {"F": 20.0, "B": 40.0, "I": 20.0, "W": 20.0}  # per operation (one chunk), as the issue suggests
# Timed steps per schedule: delays only ever add (a loaded machine wakes a sleeper late now and then), so the
# fastest of a few steps is the estimate; stop early once one is within GOOD of the simulated makespan.
REPEATS, GOOD = 8, 1.10


def chunks(name: str) -> int:
    return 1 if name in ("gpipe", "1f1b", "zb-h1", "zb-h2") else V


def stage_modules(n: int) -> list[torch.nn.Module]:
    torch.manual_seed(0)
    return [torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh()).double() for _ in range(n)]


def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return (torch.randn(M * MICRO, WIDTH, generator=g, dtype=torch.float64),
            torch.randn(M * MICRO, WIDTH, generator=g, dtype=torch.float64))


def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((out - target) ** 2).mean()


def reference(n: int) -> tuple[list[float], list[list[torch.Tensor]]]:
    """One process, the same micro-batches, gradients averaged over them (the runtime's scale_grads)."""
    mods = stage_modules(n)
    model = torch.nn.Sequential(*mods)
    x, y = data()
    losses = []
    for xm, ym in zip(x.chunk(M), y.chunk(M), strict=True):
        loss = loss_fn(model(xm), ym)
        (loss / M).backward()
        losses.append(loss.item())
    return losses, [[w.grad for w in mod.parameters()] for mod in mods]


def runtime(name: str, rank: int, p: int, csv_dir: Path, timed: bool):
    s = build(name, p, M, V)
    n = s.num_stages
    mine = [int(s.stage_map[rank, c]) for c in range(s.stage_map.shape[1])]
    mods = stage_modules(n)
    stages = [PipelineStage(mods[i], i, n, torch.device("cpu")) for i in mine]
    sched = _PipelineScheduleRuntime(stages, M, loss_fn=loss_fn)
    path = csv_dir / f"{name}.csv"
    if rank == 0:
        path.write_text(pytorch_actions_csv(s), encoding="utf-8")
    dist.barrier()
    sched._load_csv(str(path))
    if timed:
        local = {st.stage_index: st for st in stages}
        run = {letter: padded(letter, local) for letter in "FBIW"}
        for kind, letter in ((FORWARD, "F"), (FULL_BACKWARD, "B"), (BACKWARD_INPUT, "I"), (BACKWARD_WEIGHT, "W")):
            sched.register_custom_function(kind, run[letter])
        # DualPipeV's overlapped pair: its parts one after the other, as the runtime does (both sends follow it).
        sched.register_custom_function(OVERLAP_F_B, lambda action, ctx: [
            run[{FORWARD: "F", FULL_BACKWARD: "B", BACKWARD_INPUT: "I", BACKWARD_WEIGHT: "W"}[a.computation_type]](
                a, ctx) for a in action.sub_actions])
    x, y = data()
    losses: list[torch.Tensor] = []
    args = (x,) if 0 in mine else ()
    kwargs = {"target": y, "losses": losses} if n - 1 in mine else {}
    dist.barrier()
    start, LAST[0] = time.time(), time.perf_counter()
    sched.step(*args, **kwargs)
    end = time.time()
    grads = {i: [w.grad.clone() for w in mods[i].parameters()] for i in mine}
    return [float(v.detach()) for v in losses], grads, start, end


def padded(letter: str, local: dict):
    """The runtime's own work for one compute action (receive, compute, hand on), then sleep until the action has
    taken OP_MS[letter] from its start, so every F, B, I, W costs a set time whatever the machine's speed."""

    def run(action, ctx) -> None:
        entry = time.perf_counter()
        sched, idx, mb = ctx.schedule_ref, action.stage_index, action.microbatch_index
        stage = local[idx]
        if letter == "F" and not stage.is_first and idx - 1 not in local:
            _wait_batch_p2p(sched.fwd_recv_ops.pop((idx, mb)))
        if letter in "BI" and not stage.is_last and idx + 1 not in local:
            _wait_batch_p2p(sched.bwd_recv_ops.pop((idx, mb)))
        t0 = time.perf_counter()
        if letter == "F":
            out = stage.forward_one_chunk(mb, ctx.arg_mbs[mb], ctx.kwarg_mbs[mb])
            sched._maybe_compute_loss(stage, out, ctx.target_mbs, mb)
            if idx + 1 in local:
                local[idx + 1].set_local_fwd_input(out, mb)
        elif letter in "BI":
            if letter == "B":
                sched.backward_counter[idx] += 1
            last = letter == "B" and sched.backward_counter[idx] == sched._n_microbatches
            stage.backward_one_chunk(mb, loss=sched._maybe_get_loss(stage, mb), full_backward=letter == "B",
                                     last_backward=last)
            if idx - 1 in local:
                local[idx - 1].set_local_bwd_input(stage.get_local_bwd_output(mb), mb)
        else:
            sched.backward_counter[idx] += 1
            stage.backward_weight_one_chunk(mb, last_backward=sched.backward_counter[idx] == sched._n_microbatches)
        left = OP_MS[letter] / 1000 - (time.perf_counter() - t0)
        if left > 0:
            time.sleep(left)
        end = time.perf_counter()
        # What this action cost the rank beyond waiting for its input: its padded time, plus the runtime's own
        # work since the previous action ended (posting sends and receives, the Python loop).
        TOOK[letter].append(1000 * ((end - t0) + (entry - LAST[0])))
        LAST[0] = end

    return run


TOOK: dict[str, list[float]] = {k: [] for k in OP_MS}  # measured cost of every padded operation, ms
LAST = [0.0]  # perf_counter() when this rank's previous action (or the step) ended


def hop_ms(rank: int, p: int, rounds: int = 20) -> float:
    """One-way latency of a stage-boundary message (an activation of MICRO x WIDTH doubles) between neighbouring
    ranks, half the mean ping-pong round trip, measured under the same load as the timed steps."""
    x = torch.zeros(MICRO, WIDTH, dtype=torch.float64)
    out = []
    for a in range(p - 1):
        dist.barrier()
        if rank in (a, a + 1):
            other = a + 1 if rank == a else a
            t0 = time.perf_counter()
            for _ in range(rounds):
                if rank == a:
                    dist.send(x, other)
                    dist.recv(x, other)
                else:
                    dist.recv(x, other)
                    dist.send(x, other)
            out.append(1000 * (time.perf_counter() - t0) / (2 * rounds))
    got = [None] * p
    dist.all_gather_object(got, out)
    values = [v for g in got for v in g]
    return sum(values) / len(values)


def simulated_ms(name: str, p: int, op_ms: dict | None = None, hop: float = 0.0) -> float:
    """Our makespan for the same per-operation times (a chunk costs 1/v of t_f, t_b, t_w), optionally with measured
    operation times and a point-to-point latency on every cross-device dependency."""
    v, op = chunks(name), op_ms or OP_MS
    split = build(name, p, M, V).split_backward
    tb, tw = (op["I"], op["W"]) if split else (op["B"], 0.0)
    prm = PipelineParams(schedule=name, p=p, m=M, v=V, tf=op["F"] * v, tb=tb * v, tw=tw * v, tcomm=hop)
    return float(simulate(prm).timeline.makespan)


def main() -> None:
    out_path = Path(sys.argv[1])
    dist.init_process_group("gloo")
    rank, p = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    report: dict = {"p": p, "m": M, "v": V, "op_ms": OP_MS, "torch": torch.__version__, "schedules": {}}
    with tempfile.TemporaryDirectory() as tmp:
        shared = [tmp]
        dist.broadcast_object_list(shared, src=0)  # one directory every rank reads the tables from
        csv_dir = Path(shared[0])
        report["hop_ms"] = hop = hop_ms(rank, p)
        for name in SCHEDULES:
            losses, grads, _, _ = runtime(name, rank, p, csv_dir, timed=False)
            ref_losses, ref_grads = reference(build(name, p, M, V).num_stages)
            loss_err = max((abs(a - b) for a, b in zip(losses, ref_losses, strict=True)), default=0.0) \
                if losses else 0.0  # only the rank holding the last stage has the losses
            grad_err = max(float((g - r).abs().max()) for i, gs in grads.items()
                           for g, r in zip(gs, ref_grads[i], strict=True))
            spans, took, target = [], [], simulated_ms(name, p) * GOOD / 1000
            for _ in range(REPEATS):
                for x in TOOK.values():
                    x.clear()
                spans.append(runtime(name, rank, p, csv_dir, timed=True)[2:])
                took.append({k: statistics.fmean(x) for k, x in TOOK.items() if x})
                ends = [None] * p
                dist.all_gather_object(ends, spans[-1])
                if max(e[1] for e in ends) - min(e[0] for e in ends) <= target:
                    break
            gathered = [None] * p
            dist.all_gather_object(gathered, {"rank": rank, "stages": sorted(grads), "losses": len(losses),
                                              "loss_err": loss_err, "grad_err": grad_err, "spans": spans,
                                              "took": took})
            steps = [1000 * (max(g["spans"][k][1] for g in gathered) - min(g["spans"][k][0] for g in gathered))
                     for k in range(len(spans))]
            best = steps.index(min(steps))  # the step measured is the step whose actions are explained
            if rank == 0:
                report["schedules"][name] = {
                    "stages_checked": sorted(i for g in gathered for i in g["stages"]),
                    "losses_checked": sum(g["losses"] for g in gathered),
                    "max_loss_error": max(g["loss_err"] for g in gathered),
                    "max_grad_error": max(g["grad_err"] for g in gathered),
                    "measured_ms": min(steps),
                    "timed_steps": len(spans),
                    "simulated_ms": simulated_ms(name, p),
                }
                op = {k: statistics.fmean([g["took"][best][k] for g in gathered if k in g["took"][best]]
                                          or [OP_MS[k]]) for k in OP_MS}
                report["schedules"][name].update(op_ms=op, explained_ms=simulated_ms(name, p, op, hop))
        dist.barrier()
    if rank == 0:
        out_path.write_text(json.dumps(report, indent=1), encoding="utf-8")
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
