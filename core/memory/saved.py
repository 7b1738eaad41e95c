"""Bytes a transformer layer keeps for its backward, from the list of tensors a framework's code keeps
(core.frameworks: each framework's `block`, read from its source) and the model's widths.

A kept tensor is `nbytes` per element, `width` elements per token; replicated ones are cut by t only under sequence
parallelism, split ones by t (a key/value head stays whole: max(kv_heads / t, 1) of them per rank), and every token
term by the context-parallel degree c. So one layer keeps, per micro-batch of b sequences of s tokens,

    s b / c x [ sum_rep nbytes x width / (t if SP) + sum_split nbytes x width_per_rank ]

where the widths are h, the query width a d, the key/value width kv d, the MLP width f, the heads a (fp32
statistics) or the key/value heads kv (a key norm's), the heads x s of an unfused attention's matrices, or 1 (a
norm's statistics). Coefficients are summed once per (framework, block, recompute mode); the candidates' arrays
only multiply.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from core import validate
from core.frameworks.records import WIDTHS, Arch, Kept
from core.params.memory import RECOMPUTE_MODES


@dataclass(frozen=True)
class Widths:
    """A model's widths per token, as scalars: hidden h, query width (heads x head size), key/value heads and head
    size, the MLP width f, the heads; a MoE layer's routed copies per token (top-k x capacity factor), expert width,
    shared experts' total width and routed experts; multi-head latent attention's ranks and head dims."""

    hidden: float
    q: float
    kv_heads: float
    head_dim: float
    ffn: float
    heads: float
    routed: float = 0.0
    expert_ffn: float = 0.0
    shared_ffn: float = 0.0
    experts: float = 0.0
    mla: tuple[float, ...] = ()  # (kv_lora_rank, q_lora_rank, qk_head_dim, qk_rope_dim, v_head_dim); () = no MLA

    def full(self) -> np.ndarray:
        """Elements per token of each width in WIDTHS, before tensor parallelism (scores: per token of s)."""
        r = self.routed
        by = {"h": self.hidden, "q": self.q, "kv": self.kv_heads * self.head_dim, "f": self.ffn, "heads": self.heads,
              "kvheads": self.kv_heads, "scores": 0.0, "token": 1.0, "kh": r * self.hidden, "kf": r * self.expert_ffn,
              "k": r, "sf": self.shared_ffn, "experts": self.experts}
        kv_rank, q_rank, qk, rope, v = self.mla or (0.0,) * 5
        by |= {"mqk": self.heads * (qk + rope), "mv": self.heads * v, "mkv": self.heads * (qk + v), "lat": kv_rank,
               "qlat": q_rank}
        return np.array([by[w] for w in WIDTHS])


def coefficients(kept: tuple[Kept, ...]) -> np.ndarray:
    """Bytes per element summed by (recompute mode, split, width): shape (3, 2, len(WIDTHS))."""
    out = np.zeros((len(RECOMPUTE_MODES), 2, len(WIDTHS)))
    for k in kept:
        for m, mode in enumerate(RECOMPUTE_MODES):
            if mode in k.modes:
                out[m, 0 if k.split == "rep" else 1, WIDTHS.index(k.width)] += k.nbytes
    return out


@lru_cache(maxsize=256)
def block_coefficients(block, arch: Arch) -> np.ndarray:
    """coefficients() of a framework's block for one architecture (cached: a plan asks for one)."""
    return coefficients(block(arch))


def layer_bytes(coef: np.ndarray, w: Widths, seq, mb, t, sp, cp, mode) -> np.ndarray:
    """Bytes one layer keeps for one micro-batch on one GPU (arrays broadcast); `mode` holds recompute mode codes
    (RECOMPUTE_MODES order) or names."""
    t, cp, s = (np.asarray(x, dtype=float) for x in (t, cp, seq))
    codes = validate.choice_codes("recompute", mode, RECOMPUTE_MODES)
    full = w.full()
    direct = np.array([0.0 if name in ("kv", "kvheads", "scores") else 1.0 for name in WIDTHS])
    kv, kvh, sc = WIDTHS.index("kv"), WIDTHS.index("kvheads"), WIDTHS.index("scores")
    rep, split = coef[:, 0], coef[:, 1]  # (modes, widths) each
    scores = w.heads * s * (cp == 1)  # context parallelism runs fused attention: no s x s matrices
    replicated = (rep @ full)[codes] + rep[:, sc][codes] * scores
    per_token = (np.where(np.asarray(sp, dtype=bool), replicated / t, replicated)
                 + (split @ (full * direct))[codes] / t
                 + (split[:, kv][codes] * w.head_dim + split[:, kvh][codes]) * np.maximum(w.kv_heads / t, 1.0)
                 + split[:, sc][codes] * scores / t)
    return per_token * s * np.asarray(mb, dtype=float) / cp
