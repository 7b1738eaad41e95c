"""Why a candidate is infeasible, and what is allowed but worth saying, in words: each reason starts with a tag
("does not fit", "m < p", ...) that the page, the CLI and the recommendation count and filter by.

The checks themselves are numpy masks computed by core.planner.plan; only the masked candidates get a text.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from core.planner import frameworks
from core.planner.groups import distinct
from core.planner.simulation import MAX_SIM_M
from core.units import GB


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

    def reasons(self, c: dict, model, gpu) -> list[tuple[str, ...]]:
        """Why each candidate is infeasible (an empty tuple when it is feasible); each reason starts with a tag."""
        n = c["t"].size
        found: list[tuple[np.ndarray, list[str]]] = []  # (candidates, their texts) per check, in order

        def add(mask, text, *keys) -> None:
            """text(i) for every candidate i in `mask`; with `keys` (the integer columns the text depends on),
            once per distinct combination of them, shared by every candidate that has it."""
            idx = np.flatnonzero(mask)
            if not idx.size:
                return
            if keys:
                _, first, inverse = distinct([np.broadcast_to(k, (n,))[idx] for k in keys])
                texts = [text(i) for i in idx[first].tolist()]
                found.append((idx, [texts[j] for j in inverse.tolist()]))
            else:
                found.append((idx, [text(i) for i in idx.tolist()]))

        B, d, b, m, p = self.batch, c["d"], c["b"], c["m"], c["p"]
        ok = self.batch_ok
        add(~ok & (d > B), lambda i: f"batch smaller than d: {B:,} sequences cannot feed d = {d[i]:,} replicas", d)
        add(~ok & (d <= B), lambda i: f"batch does not divide: {B:,} is not a multiple of d x b = {d[i]:,} x {b[i]}",
            d, b)
        add(ok & ~self.fills, lambda i: f"m < p: m = {m[i]} micro-batches cannot fill {c['schedule_name'][i]} on "
                                        f"p = {p[i]} (needs m >= {self.min_m[i]})", m, c["schedule"], p, self.min_m)
        add(ok & self.fills & ~self.m_ok, lambda i: f"too many micro-batches: m = {m[i]:,} > {MAX_SIM_M:,}, the "
                                                    "simulator's range (use a larger micro-batch size)", m)
        refused = self.refused != ""
        if refused.any():
            why = {r: f"not simulated: {r}" for r in set(self.refused[refused].tolist())}
            add(refused, lambda i: why[self.refused[i]])
        full = self.floor > self.usable
        add(self.hopeless & full, lambda i: f"does not fit: {self.floor[i] / GB:,.1f} GB per GPU even with one "
                                            f"micro-batch in flight > {self.usable / GB:,.1f} GB usable")
        add(self.hopeless & ~full, lambda i: f"too little headroom: at most {(self.usable - self.floor[i]) / GB:,.1f} "
                                             f"GB free even with one micro-batch in flight < {self.need / GB:,.1f} GB "
                                             "asked")
        over = self.over & (self.total > self.usable)
        add(over, lambda i: f"does not fit: {self.total[i] / GB:,.1f} GB per GPU > {self.usable / GB:,.1f} GB usable")
        add(self.over & ~over, lambda i: f"too little headroom: {(self.usable - self.total[i]) / GB:,.1f} GB free < "
                                         f"{self.need / GB:,.1f} GB asked")
        nobody = np.array([not f for f in c["frameworks"]], dtype=bool)
        add(nobody, lambda i: "no framework runs it: " + _refusals(c, i, model),
            *(c[k] for k in ("t", "p", "zero", "schedule", "sp", "recompute", "offload", "cp", "ep", "fp8")))
        add(self.crosses, lambda i: f"TP crosses servers: t = {c['t'][i]} > {gpu.gpus_per_node} GPUs per server",
            c["t"])
        add(self.too_deep, lambda i: f"too many chunks: p x v = {p[i] * c['chunks'][i]} > {model.layers} layers",
            p, c["chunks"])
        for name, mask, text in self.rules:  # each rule's text depends on t, d, cp, ep and etp only
            tag = {"cp_seq": "cp does not split the sequence", "ep_experts": "ep does not divide the experts",
                   "ep_ranks": "ep does not fit the ranks", "ep_dense": "ep on a dense model"}[name]
            add(np.broadcast_to(mask, (n,)), lambda i, text=text, tag=tag: f"{tag}: {text(i)}",
                *(c[k] for k in ("t", "d", "cp", "ep", "etp")))
        if not found:
            return [()] * n
        # Every (candidate, text) pair, grouped by candidate in check order; one tuple per candidate with reasons.
        who = np.concatenate([idx for idx, _ in found])
        order = np.argsort(who, kind="stable")
        texts = [t for _, ts in found for t in ts]
        texts = [texts[j] for j in order.tolist()]
        who = who[order]
        starts = np.flatnonzero(np.r_[True, who[1:] != who[:-1]]).tolist()
        out: list[tuple[str, ...]] = [()] * n
        for i, lo, hi in zip(who[starts].tolist(), starts, starts[1:] + [len(texts)], strict=True):
            out[i] = tuple(texts[lo:hi])
        return out


def _refusals(c: dict, i: int, model) -> str:
    """The first reason each framework gives for not running candidate i."""
    args = (int(c["t"][i]), int(c["p"][i]), int(c["zero"][i]), str(c["schedule_name"][i]), bool(c["sp"][i]),
            str(c["recompute_name"][i]), str(c["offload_name"][i]))
    more = (("kv_heads", model.kv_heads), ("cp", int(c["cp"][i])), ("ep", int(c["ep"][i])),
            ("fp8", bool(c["fp8"][i])), ("moe", model.is_moe or model.mla is not None))
    return _refusal_text(args, more)


@functools.lru_cache(maxsize=1 << 16)
def _refusal_text(args: tuple, more: tuple) -> str:
    """_refusals for one setting (many candidates share it: they differ only in d, b or m)."""
    return "; ".join(f.refusals(*args, cite=False, **dict(more))[0] for f in frameworks.TABLE.values())


def warnings(c, model) -> list:
    """Allowed but worth saying: layers that do not divide evenly over the pipeline's stages."""
    n_chunks = c["p"] * c["chunks"]
    uneven = (model.layers % n_chunks != 0) & (n_chunks <= model.layers)
    out: list[tuple[str, ...]] = [()] * n_chunks.size
    for k in np.unique(n_chunks[uneven]).tolist():
        text = (f"uneven stages: {model.layers} layers over {k} stages, the fullest holds {-(-model.layers // k)}",)
        for i in np.flatnonzero(uneven & (n_chunks == k)).tolist():
            out[i] = text
    return out
