"""Model-state bytes per GPU under plain data parallelism and ZeRO stages 1-3 (Rajbhandari et al. 2019).

Every GPU of a data-parallel group needs 16-bit parameters, 16-bit gradients and K bytes of optimizer
state per parameter. ZeRO removes the copies stage by stage: stage 1 shards the optimizer state over the
N_d ranks, stage 2 also the gradients, stage 3 also the parameters. So each component is divided by N_d
from one stage on (`SHARDED_FROM`), and every formula below follows from that one table:

    DP      (P + G + K) Psi             stage 2  (P + (G + K) / N_d) Psi
    stage 1 (P + G + K / N_d) Psi       stage 3  (P + G + K) Psi / N_d

with P = G = 2 bytes and K = 12 for mixed-precision Adam. All functions broadcast over numpy arrays so
the planner can evaluate thousands of candidate layouts in one call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from core import validate
from core.errors import InputError
from core.params.memory import MAX_BYTES_PER_PARAM, MAX_ND, MAX_PP, MAX_PSI, MAX_TP, SPLITS

STAGE_KEYS = ("dp", "zero1", "zero2", "zero3")
STAGE_LABELS = ("DP", "ZeRO-1", "ZeRO-2", "ZeRO-3")
PAPER_NAMES = ("baseline", "P_os", "P_os+g", "P_os+g+p")  # the ZeRO paper's names for the same stages


def stage_title(stage: int) -> str:
    """'ZeRO-2 (P_os+g)': DeepSpeed's stage number beside the paper's name (plain DP stays 'DP')."""
    return STAGE_LABELS[stage] if stage == 0 else f"{STAGE_LABELS[stage]} ({PAPER_NAMES[stage]})"
COMPONENTS = ("params", "grads", "optimizer")
SHARDED_FROM = {"params": 3, "grads": 2, "optimizer": 1}  # first ZeRO stage that divides it by N_d


# --- bytes per parameter: optimizer x precision presets ------------------------------------------------


@dataclass(frozen=True)
class Optimizer:
    name: str
    state_bytes: float  # optimizer state proper, without any master copy of the weights
    source: str


@dataclass(frozen=True)
class Precision:
    name: str
    param_bytes: float
    grad_bytes: float
    master_bytes: float  # 32-bit master weights kept by the optimizer in mixed precision
    source: str


OPTIMIZERS = {
    "adam": Optimizer("adam", 8.0, "Adam/AdamW: momentum and variance, 4 bytes each (ZeRO paper, sec. 3.1)."),
    "adam-8bit": Optimizer("adam-8bit", 2.0, "8-bit Adam (Dettmers et al. 2022): two 1-byte states; the block "
                           "scales (8 bytes per 2048 values) are neglected."),
    "sgd-momentum": Optimizer("sgd-momentum", 4.0, "SGD with momentum: one 4-byte momentum buffer."),
    "sgd": Optimizer("sgd", 0.0, "Plain SGD keeps no state."),
}

PRECISIONS = {
    "mixed": Precision("mixed", 2.0, 2.0, 4.0, "Mixed precision (Micikevicius et al. 2018): 16-bit weights and "
                       "gradients, a 4-byte master copy counted in K (ZeRO paper: K = 12 for Adam)."),
    "fp32": Precision("fp32", 4.0, 4.0, 0.0, "Single precision: 4-byte weights and gradients, which are their "
                      "own master copy."),
}


@dataclass(frozen=True)
class BytesPerParam:
    """Bytes per parameter of each model-state component; `kwargs()` feeds model_states and friends."""

    param_bytes: float
    grad_bytes: float
    k: float
    label: str = ""

    @property
    def total(self) -> float:
        return self.param_bytes + self.grad_bytes + self.k

    def kwargs(self) -> dict[str, float]:
        return {"param_bytes": self.param_bytes, "grad_bytes": self.grad_bytes, "k": self.k}


def preset(optimizer: str = "adam", precision: str = "mixed", k: float | None = None) -> BytesPerParam:
    """Byte counts of an optimizer/precision pair; `k` overrides the optimizer bytes (K = master + state)."""
    opt = OPTIMIZERS[validate.choice("optimizer", optimizer, tuple(OPTIMIZERS))]
    prec = PRECISIONS[validate.choice("precision", precision, tuple(PRECISIONS))]
    if k is None:
        k_value, label = prec.master_bytes + opt.state_bytes, f"{opt.name}, {prec.name} precision"
    else:
        k_value, label = float(validate.number("k", k, 0, MAX_BYTES_PER_PARAM)), f"custom K, {prec.name} precision"
    return BytesPerParam(prec.param_bytes, prec.grad_bytes, k_value, label)


def preset_table() -> pd.DataFrame:
    """Every optimizer x precision preset with its byte counts and where they come from."""
    rows = []
    for opt in OPTIMIZERS.values():
        for prec in PRECISIONS.values():
            b = preset(opt.name, prec.name)
            rows.append({"optimizer": opt.name, "precision": prec.name, "params [B/param]": b.param_bytes,
                         "grads [B/param]": b.grad_bytes, "K [B/param]": b.k, "total [B/param]": b.total,
                         "source": f"{opt.source} {prec.source}"})
    return pd.DataFrame(rows)


ADAM_MIXED = preset("adam", "mixed")


# --- model states per GPU -------------------------------------------------------------------------------


@dataclass(frozen=True)
class States:
    """Model-state bytes per GPU, one array per component (shapes broadcast from the inputs)."""

    params: np.ndarray
    grads: np.ndarray
    optimizer: np.ndarray

    @property
    def total(self) -> np.ndarray:
        return self.params + self.grads + self.optimizer

    def as_dict(self) -> dict:
        out = {c: getattr(self, c) for c in COMPONENTS} | {"total": self.total}
        return {k: (float(v) if np.ndim(v) == 0 else v) for k, v in out.items()}


def _bytes_args(k, param_bytes, grad_bytes) -> dict[str, np.ndarray]:
    return {
        "params": validate.number("param_bytes", param_bytes, 0, MAX_BYTES_PER_PARAM),
        "grads": validate.number("grad_bytes", grad_bytes, 0, MAX_BYTES_PER_PARAM),
        "optimizer": validate.number("k", k, 0, MAX_BYTES_PER_PARAM),
    }


def check_stage(stage) -> np.ndarray:
    return validate.number("stage", stage, 0, 3, integer=True)


def check_psi(psi, name: str = "params") -> np.ndarray:
    return validate.number(name, psi, 1, MAX_PSI)


def check_nd(nd) -> np.ndarray:
    return validate.number("nd", nd, 1, MAX_ND, integer=True)


def shard_group(d, cp=1, replicate=1) -> np.ndarray:
    """The ranks ZeRO shards over: the d x cp data-parallel ranks, or one copy's share of them under hybrid sharding
    (HSDP: `replicate` copies of the shard group)."""
    whole = np.asarray(d) * np.asarray(cp)
    return np.maximum(whole // np.maximum(np.asarray(replicate), 1), 1)


def model_states(psi, nd, stage, k=12.0, param_bytes=2.0, grad_bytes=2.0, sharded_from=()) -> States:
    """Bytes per GPU of parameters, gradients and optimizer state for `psi` parameters held per rank.
    `sharded_from`: (component, first stage) pairs where a framework shards differently (core.frameworks: FSDP2
    shards the parameters from its stage 2); empty = the ZeRO paper's."""
    psi, nd, stage = check_psi(psi), check_nd(nd), check_stage(stage)
    per_param = _bytes_args(k, param_bytes, grad_bytes)
    first = SHARDED_FROM | dict(sharded_from)
    parts = {c: per_param[c] * psi / np.where(stage >= first[c], nd, 1.0) for c in COMPONENTS}
    return States(**parts)


def split_coefficients(stage, k=12.0, param_bytes=2.0, grad_bytes=2.0, sharded_from=()) -> tuple[np.ndarray,
                                                                                                  np.ndarray]:
    """(replicated, sharded) bytes per parameter: states = Psi (replicated + sharded / N_d).

    The inverse questions (smallest N_d, largest model) and the floors (4 Psi, 2 Psi) all come from this.
    """
    stage = check_stage(stage)
    per_param = _bytes_args(k, param_bytes, grad_bytes)
    first = SHARDED_FROM | dict(sharded_from)
    replicated = sum(np.where(stage >= first[c], 0.0, per_param[c]) for c in COMPONENTS)
    sharded = sum(np.where(stage >= first[c], per_param[c], 0.0) for c in COMPONENTS)
    return np.asarray(replicated), np.asarray(sharded)


def floor_bytes(psi, stage, k=12.0, param_bytes=2.0, grad_bytes=2.0, sharded_from=()) -> np.ndarray:
    """What a stage can never go below however many ranks share the work (4 Psi, 2 Psi, 0 for Adam)."""
    replicated, _ = split_coefficients(stage, k, param_bytes, grad_bytes, sharded_from)
    return replicated * check_psi(psi)


# --- dividing the parameters by tensor and pipeline parallelism -------------------------------------------


def params_per_rank(psi, t=1, p=1, split: str = "even", embedding=None) -> np.ndarray:
    """Parameters on one tensor-parallel rank of the most loaded pipeline stage.

    even: Psi / (t p). embedding-on-ends: the embedding matrix (vocabulary x hidden, `embedding`
    parameters, counted once in Psi) sits on the first stage and, when p > 1, a tied copy of it (the logits
    layer, as Megatron-LM keeps it) on the last; the other Psi - embedding parameters are split evenly.
    Tensor parallelism divides everything by t (vocabulary-parallel embedding; replicated layer norms are
    neglected).
    """
    psi = check_psi(psi)
    t = validate.number("t", t, 1, MAX_TP, integer=True)
    p = validate.number("p", p, 1, MAX_PP, integer=True)
    split = validate.choice("split", split, SPLITS)
    if split == "even":
        return psi / (t * p)
    if embedding is None:
        raise InputError("embedding: the embedding-on-ends split needs the embedding parameter count")
    emb = validate.number("embedding", embedding, 0, MAX_PSI)
    if (emb > psi).any():
        raise InputError("embedding: cannot exceed the total parameters Psi")
    return ((psi - emb) / p + emb) / t


def stage_params(psi: float, p: int, split: str = "even", embedding: float | None = None) -> np.ndarray:
    """Parameters held by each pipeline stage (before tensor parallelism), for a per-stage table."""
    worst = float(params_per_rank(psi, 1, p, split, embedding))
    p = int(validate.number("p", p, 1, MAX_PP, integer=True))
    if split == "even" or p == 1:
        return np.full(p, worst)
    body = (float(psi) - float(embedding)) / p
    out = np.full(p, body)
    out[[0, -1]] = worst
    return out


# --- plain data for the ZeRO page -----------------------------------------------------------------------


def zero_table(psi, nds, k=12.0, param_bytes=2.0, grad_bytes=2.0, sharded_from=()) -> pd.DataFrame:
    """Long table: one row per (N_d, stage) with each component in bytes and the reduction against DP."""
    nds = check_nd(np.atleast_1d(nds)).astype(np.int64)
    nd_grid, stage_grid = np.meshgrid(nds, np.arange(4), indexing="ij")
    states = model_states(psi, nd_grid.ravel(), stage_grid.ravel(), k, param_bytes, grad_bytes, sharded_from)
    baseline = model_states(psi, 1, 0, k, param_bytes, grad_bytes, sharded_from).total
    total = states.total
    return pd.DataFrame({
        "nd": nd_grid.ravel(),
        "stage": stage_grid.ravel(),
        "stage_label": np.asarray(STAGE_LABELS)[stage_grid.ravel()],
        "params [bytes]": states.params,
        "grads [bytes]": states.grads,
        "optimizer [bytes]": states.optimizer,
        "total [bytes]": total,
        "reduction vs DP [x]": np.divide(baseline, total, out=np.full_like(total, np.inf), where=total > 0),
    })


def table1(psi, nds=(1, 4, 16, 64, 256, 1024), k=12.0, param_bytes=2.0, grad_bytes=2.0,
           sharded_from=()) -> pd.DataFrame:
    """The ZeRO paper's Table 1 layout for one model: a row per N_d, a column per stage, total bytes."""
    long = zero_table(psi, nds, k, param_bytes, grad_bytes, sharded_from)
    wide = long.pivot(index="nd", columns="stage", values="total [bytes]")
    wide.columns = [f"{stage_title(s)} [bytes]" for s in wide.columns]
    return wide.reset_index().rename(columns={"nd": "N_d"})


def curve_vs_nd(psi, nd_max=1 << 14, points: int = 64, k=12.0, param_bytes=2.0, grad_bytes=2.0,
                sharded_from=()) -> pd.DataFrame:
    """Total bytes per GPU against N_d on a log grid of whole N_d, plus each stage's floor (for the chart)."""
    nd_max = int(check_nd(nd_max))
    points = int(validate.number("points", points, 2, 4096, integer=True))
    nds = np.unique(np.round(np.geomspace(1, nd_max, points)).astype(np.int64))
    out = {"nd": nds}
    for s, key in enumerate(STAGE_KEYS):
        out[f"{key} [bytes]"] = model_states(psi, nds, s, k, param_bytes, grad_bytes, sharded_from).total
    for s, key in enumerate(STAGE_KEYS):
        out[f"{key} floor [bytes]"] = np.broadcast_to(floor_bytes(psi, s, k, param_bytes, grad_bytes, sharded_from),
                                                      nds.shape)
    return pd.DataFrame(out)


def max_reduction(k=12.0, param_bytes=2.0, grad_bytes=2.0, sharded_from=()) -> dict[int, float]:
    """Per stage, the most it can shrink the per-GPU states against plain DP however large N_d grows:
    the full bytes per parameter over the replicated ones (4x and 8x for mixed-precision Adam; inf for
    stage 3, which has no replicated part)."""
    out = {}
    for s in range(4):
        replicated, sharded = split_coefficients(s, k, param_bytes, grad_bytes, sharded_from)
        whole = float(replicated + sharded)
        out[s] = whole / float(replicated) if replicated > 0 else float("inf")
    return out
