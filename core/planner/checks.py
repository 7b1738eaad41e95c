"""Why a candidate is infeasible, and what is allowed but worth saying, in words: each reason starts with a tag
("does not fit", "m < p", ...) that the page, the CLI and the recommendation count and filter by.

The checks themselves are numpy masks computed by core.planner.plan; only the masked candidates get a text.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

import numpy as np

from core.params.memory import RECOMPUTE_MODES
from core.params.planner import SEARCH_SCHEDULES
from core.planner import frameworks
from core.planner.candidates import OFFLOAD_MODES
from core.planner.groups import distinct
from core.planner.simulation import MAX_SIM_M
from core.units import GB

# What a framework's refusal depends on (candidate columns; schedule, recompute and offload as codes).
_SETTING = ("t", "p", "zero", "schedule", "sp", "recompute", "offload", "cp", "ep", "fp8")


@dataclass(frozen=True)
class Checks:
    """Masks of what is wrong with each candidate, turned into messages by `reasons`."""

    batch: int
    usable: float
    need: float  # headroom asked for, bytes
    batch_ok: np.ndarray
    fills: np.ndarray
    min_m: np.ndarray
    m_ok: np.ndarray
    refused: np.ndarray
    hopeless: np.ndarray
    floor: np.ndarray
    over: np.ndarray
    total: np.ndarray
    crosses: np.ndarray
    too_deep: np.ndarray
    rules: tuple = ()  # core.planner.cp_ep_rules.violations: (name, mask, reason) for cp and ep

    def reasons(self, c: dict, model, gpu, static: tuple | None = None) -> tuple[np.ndarray, np.ndarray, tuple]:
        """Why each candidate is infeasible (an empty tuple when it is feasible), as an object array of tuples, how
        many reasons each has, and (each candidate's index into the distinct tuples, -1 for none; those tuples):
        what a column read off the reasons needs to word each distinct tuple once. Each reason starts with a tag.
        `static`: static_checks' answer for these candidates, when the caller kept it (core.planner.plan_cache)."""
        n = c["t"].size
        head, tail = static if static is not None else static_checks(c, model, gpu, self.batch, self, self.rules)
        found = list(head)
        add = functools.partial(_add, found, n)
        refused = self.refused != ""
        if refused.any():
            why = {r: f"not simulated: {r}" for r in set(self.refused[refused].tolist())}
            add(refused, lambda i: why[self.refused[i]])
        full = self.floor > self.usable
        add(self.hopeless & full, lambda i: f"does not fit: {self.floor[i] / GB:,.1f} GB per GPU even with one "
                                            f"micro-batch in flight > {self.usable / GB:,.1f} GB usable", by=self.floor)
        add(self.hopeless & ~full, lambda i: f"too little headroom: at most {(self.usable - self.floor[i]) / GB:,.1f} "
                                             f"GB free even with one micro-batch in flight < {self.need / GB:,.1f} GB "
                                             "asked", by=self.floor)
        over = self.over & (self.total > self.usable)
        add(over, lambda i: f"does not fit: {self.total[i] / GB:,.1f} GB per GPU > {self.usable / GB:,.1f} GB usable",
            by=self.total)
        add(self.over & ~over, lambda i: f"too little headroom: {(self.usable - self.total[i]) / GB:,.1f} GB free < "
                                         f"{self.need / GB:,.1f} GB asked", by=self.total)
        return _per_candidate(n, found + list(tail))


def static_checks(c: dict, model, gpu, batch: int, split, rules: tuple) -> tuple[list, list]:
    """The checks no step-time assumption changes, before and after the memory ones (the order reasons are told
    in): the batch split (`split`: batch_ok, fills, min_m, m_ok, crosses, too_deep masks) and, after memory, no
    framework, TP across servers, too many chunks and the cp / ep rules."""
    n = c["t"].size
    head: list = []
    add = functools.partial(_add, head, n)
    B, d, b, m, p = batch, c["d"], c["b"], c["m"], c["p"]
    ok = split.batch_ok
    add(~ok & (d > B), lambda i: f"batch smaller than d: {B:,} sequences cannot feed d = {d[i]:,} replicas", d)
    add(~ok & (d <= B), lambda i: f"batch does not divide: {B:,} is not a multiple of d x b = {d[i]:,} x {b[i]}",
        d, b)
    add(ok & ~split.fills, lambda i: f"m < p: m = {m[i]} micro-batches cannot fill {c['schedule_name'][i]} on "
                                     f"p = {p[i]} (needs m >= {split.min_m[i]})", m, c["schedule"], p, split.min_m)
    add(ok & split.fills & ~split.m_ok, lambda i: f"too many micro-batches: m = {m[i]:,} > {MAX_SIM_M:,}, the "
                                                  "simulator's range (use a larger micro-batch size)", m)
    tail: list = []
    add = functools.partial(_add, tail, n)
    nobody = np.fromiter(map(operator.not_, c["frameworks"].tolist()), dtype=bool, count=n)
    setting = _setting(c)
    add(nobody, None, *setting,
        texts_of=lambda rows: ["no framework runs it: " + r for r in _refusals(setting, rows, model)])
    add(split.crosses, lambda i: f"TP crosses servers: t = {c['t'][i]} > {gpu.gpus_per_node} GPUs per server",
        c["t"])
    add(split.too_deep, lambda i: f"too many chunks: p x v = {p[i] * c['chunks'][i]} > {model.layers} layers "
                                  "(+ 2 where the embedding and loss count as layers)",
        p, c["chunks"])
    for name, mask, text in rules:  # each rule's text depends on t, d, cp, ep, etp and replicate only
        tag = {"cp_seq": "cp does not split the sequence", "ep_experts": "ep does not divide the experts",
               "ep_ranks": "ep does not fit the ranks", "ep_dense": "ep on a dense model",
               "replicate": "replicate does not divide d x cp", "ep_replica": "ep does not fit one replica"}[name]
        add(np.broadcast_to(mask, (n,)), lambda i, text=text, tag=tag: f"{tag}: {text(i)}",
            *(c[k] for k in ("t", "d", "cp", "ep", "etp", "replicate")))
    return head, tail


def _add(found: list, n: int, mask, text, *keys, texts_of=None, by=None) -> None:
    """Append (candidates, text number of each, texts) for the candidates in `mask`: text(i) for each; with `keys`
    (the integer columns the text depends on), once per distinct combination of them, shared by every candidate
    that has it (`texts_of(rows)`: the texts of several candidates at once); with `by` (the one float column it
    depends on), once per distinct value."""
    idx = np.flatnonzero(mask)
    if not idx.size:
        return
    if by is not None:  # thousands of candidates, a few hundred distinct bytes: format each value once
        _, first, inverse = np.unique(by[idx], return_index=True, return_inverse=True)
        found.append((idx, inverse.ravel(), [text(i) for i in idx[first].tolist()]))
    elif keys:
        _, first, inverse = distinct([np.broadcast_to(k, (n,))[idx] for k in keys])
        rows = idx[first]
        found.append((idx, inverse, texts_of(rows) if texts_of else [text(i) for i in rows.tolist()]))
    else:  # a text per candidate, many of them the same (the same GB on every row of a layout)
        ids: dict[str, int] = {}
        which = np.fromiter((ids.setdefault(text(i), len(ids)) for i in idx.tolist()), dtype=np.int64,
                            count=idx.size)
        found.append((idx, which, list(ids)))


def _setting(c: dict) -> list[np.ndarray]:
    """The _SETTING columns as a refusal reads them: p only as 1 or 2 (no pipeline or a pipeline: no text names p,
    and keying on p itself made a search of 30 depths format 30 times the texts, 30 s at 500,000 candidates)."""
    return [np.where(c["p"] > 1, 2, 1) if k == "p" else c[k] for k in _SETTING]


def _refusals(setting: list[np.ndarray], rows: np.ndarray, model) -> list[str]:
    """The first reason each framework gives for not running each candidate of `rows`. A re-plan asks this for
    thousands of distinct settings: each is looked up by its integer codes (cheap to hash), not by its names."""
    codes = np.stack([np.asarray(col)[rows].astype(np.int64) for col in setting], axis=1).tolist()
    moe = model.is_moe or model.mla is not None
    return [_refusal_text(tuple(row), model.kv_heads, moe) for row in codes]


def _per_candidate(n: int, found: list[tuple[np.ndarray, np.ndarray, list[str]]]) -> tuple[np.ndarray, np.ndarray,
                                                                                           tuple]:
    """Each candidate's texts in check order, as one tuple per candidate (an object array; the same tuple object
    for candidates with the same texts: it is built once per distinct combination), their number, and (which
    distinct tuple each candidate has, -1 for none; the distinct tuples)."""
    none = np.empty(1, dtype=object)
    none[0] = ()
    out = none[np.zeros(n, dtype=np.int64)]
    group = np.full(n, -1, dtype=np.int64)
    if not found:
        return out, np.zeros(n, dtype=np.int64), (group, none[:0])
    ids: dict[str, int] = {}  # one number per distinct text (settings that differ can share a refusal)
    number = np.array([ids.setdefault(t, len(ids)) for _, _, ts in found for t in ts], dtype=np.int64)
    texts = list(ids)
    counts = np.zeros(n, dtype=np.int64)
    for idx, _, _ in found:
        counts[idx] += 1
    # Each candidate's text numbers in check order, padded with -1: filled check by check (each check names a
    # candidate at most once), no sort of every (candidate, text) pair.
    codes = np.full((n, int(counts.max())), -1, dtype=np.int64)
    filled = np.zeros(n, dtype=np.int64)
    offset = 0
    for idx, which, ts in found:
        codes[idx, filled[idx]] = number[which + offset]
        filled[idx] += 1
        offset += len(ts)
    has = np.flatnonzero(counts)
    codes = codes[has]
    rows, _, inverse = distinct(list(codes.T))
    table = np.empty(len(rows), dtype=object)
    table[:] = [tuple(texts[j] for j in row if j >= 0) for row in rows.tolist()]
    out[has] = table[inverse]
    group[has] = inverse
    return out, counts, (group, table)


@functools.lru_cache(maxsize=1 << 16)
def _refusal_text(codes: tuple, kv_heads, moe: bool) -> str:
    """_refusals for one setting (many candidates share it: they differ only in d, b or m), given as the codes of
    _SETTING (schedule, recompute and offload as their positions in the planner's fixed tuples of names)."""
    t, p, zero, schedule, sp, recompute, offload, cp, ep, fp8 = codes
    args = (t, p, zero, SEARCH_SCHEDULES[schedule], bool(sp), RECOMPUTE_MODES[recompute], OFFLOAD_MODES[offload])
    more = {"kv_heads": kv_heads, "cp": cp, "ep": ep, "fp8": bool(fp8), "moe": moe}
    return "; ".join(f.refusals(frameworks.Setting(*args, **more), cite=False)[0] for f in frameworks.TABLE.values())


def warnings(c, model) -> np.ndarray:
    """Allowed but worth saying: layers that do not divide evenly over the pipeline's stages. An object array of
    tuples, one shared tuple per distinct text (built per stage count, not per candidate)."""
    n_chunks = c["p"] * c["chunks"]
    uneven = (model.layers % n_chunks != 0) & (n_chunks <= model.layers)
    counts = np.unique(n_chunks[uneven]).tolist()
    texts = np.empty(len(counts) + 1, dtype=object)
    texts[:] = [()] + [(f"uneven stages: {model.layers} layers over {k} stages, the fullest holds "
                        f"{-(-model.layers // k)}",) for k in counts]
    which = np.zeros(n_chunks.size, dtype=np.int64)
    which[uneven] = np.searchsorted(counts, n_chunks[uneven]) + 1 if counts else 0
    return texts[which]
