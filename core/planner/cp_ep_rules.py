"""The rules context and expert parallelism must obey, each with the reason shown when it excludes a layout.

Written once, vectorised: the planner masks thousands of candidates with them and core.planner.layout checks a
single layout with the same functions. Sources: Megatron-LM's validate_args and parallel_state (context
parallelism needs the sequence divisible by 2 x cp, its load-balanced causal split gives each rank two chunks;
the MoE layer's etp x ep x expert-dp regroups the t x cp x d ranks of a stage, so ep x etp divides t x d x cp;
the experts divide evenly over ep), and Transformer Engine (context parallelism runs on its fused or flash
attention, whose heads are split by t as everywhere).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Rule = tuple[str, np.ndarray, Callable[[int], str]]


def _arr(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def violations(model, t, d, cp, ep, etp, replicate=1) -> list[Rule]:
    """(name, mask of violating entries, reason for entry i) for every broken rule; masks broadcast together."""
    t, d, cp, ep, etp, r = (_arr(x) for x in (t, d, cp, ep, etp, replicate))
    etp = np.where(etp == 0, t, etp)
    out: list[Rule] = []

    def add(name: str, mask, text: Callable[[int], str]) -> None:
        mask = np.asarray(mask, dtype=bool)
        if mask.any():
            out.append((name, mask, text))

    def at(x: np.ndarray, i: int) -> int:
        return int(np.broadcast_to(x, np.broadcast(t, d, cp, ep, etp, r).shape).flat[i]) if x.ndim else int(x)

    add("replicate", (d * cp) % r != 0,
        lambda i: f"replicate = {at(r, i)} does not divide d x cp = {at(d, i) * at(cp, i)} (hybrid sharding keeps "
                  "that many equal copies of the ZeRO shard group)")

    add("cp_seq", (cp > 1) & (model.seq % (2 * cp) != 0),
        lambda i: f"sequence {model.seq:,} does not split into 2 x cp = {2 * at(cp, i)} chunks "
                  "(Megatron's load-balanced context parallelism)")
    if model.is_moe:
        experts = model.moe.experts
        add("ep_experts", experts % ep != 0,
            lambda i: f"ep = {at(ep, i)} does not divide the {experts} experts")
        add("ep_ranks", (t * d * cp) % (ep * etp) != 0,
            lambda i: f"ep x expert-tp = {at(ep, i) * at(etp, i)} does not divide t x d x cp = "
                      f"{at(t, i) * at(d, i) * at(cp, i)} (Megatron regroups a stage's ranks for the experts)")
        add("ep_replica", (r > 1) & ((d * cp) % r == 0) & ((t * (d * cp // r)) % (ep * etp) != 0),
            lambda i: f"ep x expert-tp = {at(ep, i) * at(etp, i)} does not divide one replica's t x d x cp / "
                      f"replicate = {at(t, i) * at(d, i) * at(cp, i) // at(r, i)} ranks (hybrid sharding keeps every "
                      "expert within each copy)")
    else:
        add("ep_dense", ep != 1, lambda i: f"ep = {at(ep, i)} on a dense model (no experts to spread)")
    return out


def first_reason(model, t, d, cp, ep, etp, replicate=1) -> str | None:
    """The first broken rule of one layout, in words (None when it obeys them all)."""
    for _, mask, text in violations(model, t, d, cp, ep, etp, replicate):
        if np.asarray(mask).any():
            return text(0)
    return None
