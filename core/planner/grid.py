"""The planner's search grid: every searched dimension declared once (`dimensions`, what a work count derives
from), their cross product minus combinations that are not layouts at all, and the candidates as one record of
arrays (`Candidates`, one entry per candidate) that the planner's steps pass on whole.

Beyond the layout (t, p, d, cp, ep) and the switches (micro-batch size, schedule, ZeRO stage, recompute, sequence
parallelism, offload), the grid searches what engineers tune:
- the interleave depth v of schedules that take one, at the depths the layers allow (Megatron-LM builds
  L / (p v) layers per chunk: L or, with the embedding and the loss counted as layers
  (--account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split), L + 2 must divide by p x v;
  megatron/core/transformer/transformer_block.py get_num_layers_to_build): v = 2 always, the allowed powers of
  two and the deepest allowed (at most four depths per p, so the simulations stay within their budget);
- ZeRO-3 with and without resharding the parameters after the forward (FSDP reshard_after_forward);
- TP communication overlap (Megatron-LM --tp-comm-overlap: sequence parallel, TP inside a server).
A variant no framework in core.planner.frameworks can run is not generated (the plain variant stays), and a plain
candidate that only frameworks with TP overlap run gives way to its overlapped twin (same memory, never slower).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, fields, replace
from functools import cached_property

import numpy as np

from core.cost.step_input import Layouts
from core.params.memory import RECOMPUTE_MODES
from core.params.planner import SEARCH_SCHEDULES, PlannerParams
from core.pipeline.schedules import REGISTRY
from core.planner import cp_ep, frameworks
from core.planner.factors import chunk_slots
from core.planner.groups import distinct

OFFLOAD_MODES = ("none", "optimizer", "optimizer+params")
MAX_V = 8  # the Pipeline page's (and the simulator's) largest v


def _takes_v() -> np.ndarray:
    """Per planner schedule (by code): it takes an interleave depth v (read from the registry at each plan: a
    schedule registered later is planned too)."""
    return np.array([REGISTRY[s].chunks == "v" for s in SEARCH_SCHEDULES], dtype=bool)


def _fixed_chunks() -> np.ndarray:
    """Per planner schedule (by code): its chunks per device when it takes no v (0 where it does)."""
    return np.array([0 if REGISTRY[s].chunks == "v" else REGISTRY[s].chunks_per_device(1) for s in SEARCH_SCHEDULES])


@dataclass(frozen=True, eq=False)
class Candidates:
    """Every candidate of a plan as arrays (codes index SEARCH_SCHEDULES, RECOMPUTE_MODES, OFFLOAD_MODES).
    Reading `c["t"]` is `c.t` (the memory and cp/ep steps read it as a mapping)."""

    layout: np.ndarray
    t: np.ndarray
    p: np.ndarray
    d: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    b: np.ndarray
    schedule: np.ndarray
    zero: np.ndarray
    recompute: np.ndarray
    sp: np.ndarray
    offload: np.ndarray
    v: np.ndarray  # chunks per device (1 for single-chunk schedules)
    reshard: np.ndarray
    tp_comm_overlap: np.ndarray
    fp8: np.ndarray
    replicate: np.ndarray  # hybrid sharding: ZeRO within d x cp / replicate ranks (1: over all of them)
    recompute_layers: np.ndarray  # full recompute on the first N layers of each chunk (0: all; other modes 0)
    frameworks: np.ndarray  # object array of tuples of framework keys
    m: np.ndarray | None = None  # micro-batches per step, once the batch is split

    def __getitem__(self, key: str):
        return getattr(self, key)

    @property
    def size(self) -> int:
        return int(self.t.size)

    @property
    def chunks(self) -> np.ndarray:
        return self.v

    @cached_property
    def schedule_name(self) -> np.ndarray:
        return np.array(SEARCH_SCHEDULES)[self.schedule]

    @cached_property
    def recompute_name(self) -> np.ndarray:
        return np.array(RECOMPUTE_MODES)[self.recompute]

    @cached_property
    def offload_name(self) -> np.ndarray:
        return np.array(OFFLOAD_MODES)[self.offload]

    @cached_property
    def split_backward(self) -> np.ndarray:
        return np.array([REGISTRY[s].split_backward for s in SEARCH_SCHEDULES])[self.schedule]

    def take(self, rows) -> Candidates:
        """The candidates at `rows` (a mask or indices)."""
        return replace(self, **{f.name: None if getattr(self, f.name) is None else getattr(self, f.name)[rows]
                                for f in fields(self)})

    def with_m(self, m: np.ndarray) -> Candidates:
        return replace(self, m=m)

    def layouts(self) -> Layouts:
        """The candidates as the step-time model's layouts (core.cost.step_input.Layouts)."""
        return Layouts(t=self.t, p=self.p, d=self.d, cp=self.cp, ep=self.ep, etp=self.etp, micro_batch_size=self.b,
                       chunks=self.v, m=1 if self.m is None else self.m, zero=self.zero,
                       recompute=self.recompute_name, sp=self.sp, split=self.split_backward,
                       offload=self.offload_name, reshard=self.reshard, tp_comm_overlap=self.tp_comm_overlap,
                       replicate=self.replicate, recompute_layers=self.recompute_layers)


def v_values(q: PlannerParams) -> tuple[int, ...]:
    """The interleave depths searched: the pinned v, or 2 to MAX_V (each kept where the layers allow it)."""
    return (q.v,) if q.v else tuple(range(2, MAX_V + 1))


def dimensions(q: PlannerParams, degrees: np.ndarray) -> dict[str, np.ndarray]:
    """Every searched dimension and its values, in the grid's order: the cross product of their lengths bounds the
    candidates a plan evaluates (the grid then drops combinations that are not layouts)."""
    return {
        "layout": np.arange(len(degrees)),
        "b": np.array(q.micro_batch_sizes),
        "schedule": np.array([SEARCH_SCHEDULES.index(s) for s in q.searched("schedule")]),
        "zero": np.array(q.searched("zero")),
        "recompute": np.array([RECOMPUTE_MODES.index(r) for r in q.searched("recompute")]),
        "sp": np.array(q.searched("sp")),
        "offload": np.array([OFFLOAD_MODES.index(o) for o in q.searched("offload")]),
        "v": np.array(v_values(q)),
        "reshard": np.array(q.searched("reshard")),
        "tp_comm_overlap": np.array(q.searched("tp_comm_overlap")),
    }


def depth_allowed(layers: int, p, v) -> np.ndarray:
    """v = 2, or a depth whose chunks Megatron-LM builds evenly: L, or L + 2 with the embedding and the loss
    counted as layers, divisible by p x v (core.planner.factors.chunk_slots)."""
    p, v = np.asarray(p), np.asarray(v)
    slots = p * v
    return (v == 2) | ((slots <= chunk_slots(layers, p, v)) & ((layers % slots == 0) | ((layers + 2) % slots == 0)))


def searched_depth(layers: int, p, v) -> np.ndarray:
    """Whether depth v is searched at p (the simulation budget stays in check): of the depths Megatron-LM builds
    evenly (depth_allowed), the powers of two and the deepest."""
    p, v = np.broadcast_arrays(np.asarray(p), np.asarray(v))
    table = depth_mask(layers, p.ravel(), np.arange(2, MAX_V + 1))
    inside = (v >= 2) & (v <= MAX_V)
    return inside & table[np.arange(p.size), np.clip(v.ravel() - 2, 0, MAX_V - 2)].reshape(p.shape)


def depth_mask(layers: int, p, depths) -> np.ndarray:
    """(len(p), len(depths)) booleans: depth searched at p (searched_depth), decided once per distinct p."""
    ps, inverse = np.unique(np.asarray(p), return_inverse=True)
    every = np.arange(2, MAX_V + 1)
    ok = depth_allowed(layers, ps[:, None], every[None, :])
    deepest = np.where(ok, every[None, :], 0).max(axis=1, initial=0)
    pick = ok & (((every & (every - 1)) == 0)[None, :] | (every[None, :] == deepest[:, None]))
    cols = np.clip(np.asarray(depths) - 2, 0, MAX_V - 2)
    inside = (np.asarray(depths) >= 2) & (np.asarray(depths) <= MAX_V)
    return pick[inverse.ravel()][:, cols] & inside[None, :]


BASE = ("layout", "b", "schedule", "zero", "recompute", "sp", "offload")  # crossed with each other
TUNING = ("v", "reshard", "tp_comm_overlap")  # searched only where they apply (expand_tuning)


def grid(q: PlannerParams, degrees: np.ndarray, model, gpus_per_node: int,
         offload_where: np.ndarray | None = None) -> tuple[Candidates, list[str]]:
    """The cross product of layouts and switches, minus combinations that are not layouts at all (and, where
    `offload_where` is given, one flag per row of `degrees`, offload only on the layouts it marks:
    core.planner.budget's narrowing)."""
    dims = dimensions(q, degrees)
    index = np.indices([len(dims[k]) for k in BASE]).reshape(len(BASE), -1)
    c = {k: dims[k][i] for k, i in zip(BASE, index, strict=True)}
    c["t"], c["p"], c["d"], c["cp"], c["ep"] = (degrees[c["layout"], j] for j in range(5))
    keep, notes = _layouts_only(c, dims, q)
    if offload_where is not None:
        keep &= (c["offload"] == 0) | np.asarray(offload_where, dtype=bool)[c["layout"]]
    c = {k: v[keep] for k, v in c.items()}
    c["sp"] = np.where(c["t"] == 1, False, c["sp"])
    c = expand_tuning(c, dims, q, model, gpus_per_node)
    c["etp"] = cp_ep.etp_of(q, c["t"])
    c["fp8"] = np.full(c["t"].size, q.precision == "fp8")  # one value for the whole plan
    c["replicate"] = np.where(c["zero"] >= 1, max(q.fix_replicate, 1), 1)  # ZeRO-0 (plain DDP) shards nothing
    c["recompute_layers"] = np.where(np.array(RECOMPUTE_MODES)[c["recompute"]] == "full", q.recompute_layers, 0)
    c["frameworks"], drop = _frameworks(c, model, q.precision == "fp8", gpus_per_node, q.tp_comm_overlap == "all")
    cand = Candidates(**c)
    if drop.any():
        cand = cand.take(~drop)
    if q.framework != "any":
        cand = cand.take(np.array([q.framework in r for r in cand.frameworks.tolist()], dtype=bool))
        notes.append(frameworks.framework(q.framework).summary())
    return cand, notes


def _layouts_only(c: dict, dims: dict, q: PlannerParams) -> tuple[np.ndarray, list[str]]:
    """Which combinations are layouts: a switch that changes nothing keeps its first value only."""
    notes, schedules = [], q.searched("schedule")
    keep = ~((c["t"] == 1) & (c["sp"] != dims["sp"][0]))  # sequence parallelism is a no-op at t = 1
    if {"1f1b", "gpipe"} & set(schedules):
        keep &= ~((c["p"] == 1) & (c["schedule"] != dims["schedule"][0]))  # p = 1: no pipeline, one row
        c["schedule"] = np.where(c["p"] == 1, SEARCH_SCHEDULES.index("1f1b"), c["schedule"])
    else:
        if (c["p"] == 1).any():
            notes.append(f"Layouts with p = 1 are left out: the pinned schedule {schedules[0]} needs a pipeline.")
        keep &= c["p"] > 1
    keep &= ~((c["offload"] >= 1) & (c["zero"] == 0))  # offload needs ZeRO >= 1
    keep &= ~((c["offload"] == 2) & (c["zero"] != 3))  # parameter offload needs ZeRO-3
    if q.offload != "none" and q.offload != "all" and not keep.any():
        notes.append(f"Offload {q.offload} needs ZeRO stage {'3' if q.offload == 'optimizer+params' else '1-3'}.")
    return keep, notes


def expand_tuning(c: dict, dims: dict, q: PlannerParams, model, gpn: int) -> dict:
    """Each candidate once per value of a tuning dimension where that dimension applies, else once: v for the
    schedules that take one (searched_depth per p, or the pinned v), no resharding for ZeRO-3 (not with
    ZeRO-Infinity, which streams what it frees), TP overlap where it exists (_overlap_applies)."""
    takes = _takes_v()[c["schedule"]] & (c["p"] > 1)
    depths = dims["v"]
    allowed = takes[:, None] & (bool(q.v) | depth_mask(model.layers, c["p"], depths))
    values = np.concatenate([_fixed_chunks()[c["schedule"]][:, None], np.broadcast_to(depths, allowed.shape)],
                            axis=1)
    c = _expand(c, "v", np.concatenate([~takes[:, None], allowed], axis=1), values)
    for key in ("reshard", "tp_comm_overlap"):
        applies = (c["zero"] == 3) & (c["offload"] != 2) if key == "reshard" else _overlap_applies(c, gpn)
        searched = dims[key].astype(bool)  # where it applies; elsewhere reshard on, overlap off
        mask = np.concatenate([~applies[:, None], np.broadcast_to(applies[:, None], (applies.size, searched.size))],
                              axis=1)
        values = np.broadcast_to(np.concatenate([[key == "reshard"], searched]), mask.shape)
        c = _expand(c, key, mask, values)
    return c


def _expand(c: dict, key: str, mask: np.ndarray, values: np.ndarray) -> dict:
    """Candidate i once per true entry of mask[i] (in column order), with `key` set to that entry of values[i];
    the candidates keep their order."""
    rows, cols = np.nonzero(mask)
    out = {k: v[rows] for k, v in c.items()}
    out[key] = values[rows, cols]
    return out


def _overlap_applies(c: dict, gpn: int) -> np.ndarray:
    """TP communication overlap exists with sequence parallelism and TP inside one server."""
    return (c["t"] > 1) & c["sp"].astype(bool) & (c["t"] <= gpn)


def _frameworks(c: dict, model, fp8: bool, gpn: int, replace_plain: bool) -> tuple[np.ndarray, np.ndarray]:
    """Which frameworks run each candidate, asked once per distinct setting (d, b, the tuning switches and the
    value of p beyond p > 1 never change the answer); a variant (no resharding, TP overlap) keeps only the
    frameworks that have that switch. Also which candidates to leave out: a variant no framework runs (the plain
    one stays) and, with `replace_plain`, a plain candidate where TP overlap applies that only frameworks having it
    run (its overlapped twin is never slower, core.cost.step_time._hide_tp, and holds the same memory but for
    Transformer Engine's three userbuffer GEMM workspaces, 96 MiB on Hopper: a plain row within that of the limit
    is left out with it)."""
    keys = ("t", "p", "zero", "schedule", "sp", "recompute", "offload", "cp", "ep", "replicate", "recompute_layers")
    # p only as "a pipeline or none" (frameworks.Framework.runs reads p > 1 only): keyed on p itself, a search over
    # 30 depths asked the table 30 times per setting (a third of a warm re-plan of 133,000 candidates)
    _, first, inverse = distinct([c[k] > 1 if k == "p" else c[k] for k in keys])
    f = {k: c[k][first] for k in keys}
    runs = frameworks.which(frameworks.Setting(
        f["t"], f["p"], f["zero"], np.array(SEARCH_SCHEDULES)[f["schedule"]], f["sp"],
        np.array(RECOMPUTE_MODES)[f["recompute"]], np.array(OFFLOAD_MODES)[f["offload"]], model.kv_heads, f["cp"],
        f["ep"], fp8, model.is_moe or model.mla is not None, f["replicate"], f["recompute_layers"]))
    ids: dict[tuple, int] = {}  # the few distinct answers, numbered
    which = np.fromiter((ids.setdefault(r, len(ids)) for r in runs), dtype=np.int64, count=len(runs))[inverse]
    sets = list(ids)
    no_reshard, overlap = ~c["reshard"].astype(bool), c["tp_comm_overlap"].astype(bool)
    plain = _overlap_applies(c, gpn) & ~overlap if replace_plain else np.zeros(which.shape, dtype=bool)
    code = ((which * 2 + no_reshard) * 2 + overlap) * 2 + plain
    able = {k: frameworks.with_switch(k) for k in ("no_reshard", "tp_comm_overlap")}
    table = np.empty(len(sets) * 8, dtype=object)
    drop = np.zeros(len(sets) * 8, dtype=bool)
    for i, r in enumerate(sets):
        for a, o, pl in itertools.product((0, 1), repeat=3):
            kept = tuple(x for x in r if (not a or x in able["no_reshard"]) and (not o or x in able["tp_comm_overlap"]))
            j = ((i * 2 + a) * 2 + o) * 2 + pl
            table[j] = kept
            drop[j] = ((a or o) and not kept) or bool(pl and kept and set(kept) <= able["tp_comm_overlap"])
    return table[code], drop[code]
