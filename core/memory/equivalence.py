"""Sharding Adam's state changes nothing numerically: a bit-for-bit demonstration on a numpy toy problem.

Plain data parallelism: every rank averages all ranks' gradients (all-reduce) and runs Adam on the full
vector with a full copy of the moments. ZeRO stage 1/2 style: each rank receives only its slice of the
averaged gradient (reduce-scatter), updates only that slice with only that slice of the moments, and the
slices are reassembled (all-gather). Adam is element-wise and both sides average the ranks' gradients in
the same order, so each element sees the very same floating-point operations: the difference is 0.0.

Global-norm clipping mixes elements. Under sharding each rank sums the squares of its slice and one
all-reduce of a scalar adds the partial sums; when the replicated side sums per slice in the same order
the results are again identical. Summing the full vector in one go instead (np.sum's pairwise order)
rounds differently, which the demo reports too: equivalence is exact only for the same reduction order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core import validate
from core.errors import InputError
from core.params.memory import EQUIVALENCE

LR, BETA1, BETA2, EPS = 0.05, 0.9, 0.999, 1e-8
MAX_WORK = 20_000_000  # ranks x steps x size: a few seconds on the 2-core development machine


@dataclass(frozen=True)
class Equivalence:
    ranks: int
    steps: int
    size: int
    max_abs_diff: float  # sharded vs replicated, no clipping (0.0)
    max_abs_diff_clipped: float  # with global-norm clipping, per-shard reduction order (0.0)
    max_abs_diff_clipped_one_sum: float  # replicated side summing the squares in one np.sum
    replicas_identical: bool  # every replicated rank ends with the same parameters
    sharded_identical: bool  # every sharded rank ends with the same parameters after its all-gathers
    clipped_steps: int  # steps on which clipping was active
    extra_scalar_allreduces: int  # one per step for the clipped norm
    state_per_rank_replicated: int  # Adam moments (m and v) held by one rank, numbers
    state_per_rank_sharded: tuple[int, ...]  # per rank
    loss_start: float
    loss_end: float
    error_start: float  # mean |theta - target|: the module's figure of merit (0.777 -> 0.056 at its settings)
    error_end: float

    def as_dict(self) -> dict:
        out = dict(self.__dict__)
        out["state_per_rank_sharded"] = list(self.state_per_rank_sharded)
        return out


def _adam(theta, grad, m, v, step):
    """One element-wise Adam step on whatever slice it is given; updates m, v in place."""
    m *= BETA1
    m += (1 - BETA1) * grad
    v *= BETA2
    v += (1 - BETA2) * grad * grad
    m_hat = m / (1 - BETA1**step)
    v_hat = v / (1 - BETA2**step)
    return theta - LR * m_hat / (np.sqrt(v_hat) + EPS)


def _average(pieces):
    """Sum the ranks in rank order, then divide: the same order for a full vector or any slice of it."""
    total = pieces[0].copy()
    for piece in pieces[1:]:
        total += piece
    return total / len(pieces)


def _clip_scale(sq_sum, max_norm):
    norm = np.sqrt(sq_sum)
    return min(1.0, max_norm / (norm + 1e-6)), norm > max_norm


@dataclass(frozen=True)
class _Problem:
    """Minimise 0.5 |theta - target|^2; rank r at step k sees the gradient plus its own noise.

    One generator draws the target, then each step's (ranks, size) noise in turn: the same numbers as the
    module's single (steps, ranks, size) draw after its target, without holding all of them at once."""

    target: np.ndarray
    ranks: int
    steps: int
    seed: int

    def noises(self):
        """Each step's (ranks, size) noise, in order (a fresh stream per run, so every run sees the same)."""
        rng = np.random.default_rng(self.seed)
        rng.standard_normal(self.target.size)  # the target's draw
        for _ in range(self.steps):
            yield 0.1 * rng.standard_normal((self.ranks, self.target.size))


def _replicated(problem: _Problem, slices, clip, one_sum):
    thetas = [np.zeros_like(problem.target) for _ in range(problem.ranks)]
    moments = [(np.zeros_like(problem.target), np.zeros_like(problem.target)) for _ in range(problem.ranks)]
    clipped = 0
    for step, noise in enumerate(problem.noises()):
        grad = _average([(thetas[r] - problem.target) + noise[r] for r in range(problem.ranks)])  # all-reduce
        if clip is not None:
            sq = float(np.sum(grad * grad)) if one_sum else sum(float(np.sum(grad[s] * grad[s])) for s in slices)
            scale, active = _clip_scale(sq, clip)
            clipped += active
            grad = grad * scale
        thetas = [_adam(thetas[r], grad, *moments[r], step + 1) for r in range(problem.ranks)]
    return thetas, clipped, moments[0][0].size * 2


def _sharded(problem: _Problem, slices, clip):
    """Stage 1/2: every rank keeps its own full copy of the parameters, only its slice of the moments."""
    thetas = [np.zeros_like(problem.target) for _ in range(problem.ranks)]
    moments = [(np.zeros(s.stop - s.start), np.zeros(s.stop - s.start)) for s in slices]
    for step, noise in enumerate(problem.noises()):
        grads = [(thetas[r] - problem.target) + noise[r] for r in range(problem.ranks)]
        owned = [_average([g[s] for g in grads]) for s in slices]  # reduce-scatter
        if clip is not None:
            sq = sum(float(np.sum(g * g)) for g in owned)  # each rank's partial sum, then a scalar all-reduce
            scale, _ = _clip_scale(sq, clip)
            owned = [g * scale for g in owned]
        pieces = [_adam(thetas[r][s], owned[r], *moments[r], step + 1) for r, s in enumerate(slices)]
        for theta in thetas:  # all-gather: every rank writes every rank's updated shard into its own copy
            for s, piece in zip(slices, pieces, strict=True):
                theta[s] = piece
    return thetas, [m.size + v.size for m, v in moments]


def demonstrate(ranks: int = 4, steps: int = 50, size: int = 1000, seed: int = 0, clip: float = 1.0) -> Equivalence:
    """Run replicated and sharded Adam side by side, with and without global-norm clipping."""
    ranks = int(validate.number("ranks", ranks, EQUIVALENCE["ranks"].lo, EQUIVALENCE["ranks"].hi, integer=True))
    steps = int(validate.number("steps", steps, EQUIVALENCE["steps"].lo, EQUIVALENCE["steps"].hi, integer=True))
    size = int(validate.number("size", size, max(EQUIVALENCE["size"].lo, ranks), EQUIVALENCE["size"].hi, integer=True))
    seed = int(validate.number("seed", seed, 0, EQUIVALENCE["seed"].hi, integer=True))
    clip = float(validate.number("clip", clip, EQUIVALENCE["clip"].lo, EQUIVALENCE["clip"].hi))
    if ranks * steps * size > MAX_WORK:
        raise InputError(f"ranks x steps x size must be at most {MAX_WORK:,} (the demo trains five times over it)")
    problem = _Problem(np.random.default_rng(seed).standard_normal(size), ranks, steps, seed)
    bounds = np.linspace(0, size, ranks + 1).round().astype(int)
    slices = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    plain, _, replicated_state = _replicated(problem, slices, None, False)
    shards, sharded_state = _sharded(problem, slices, None)
    shard = shards[0]
    plain_c, clipped, _ = _replicated(problem, slices, clip, False)
    shard_c = _sharded(problem, slices, clip)[0][0]
    plain_one, _, _ = _replicated(problem, slices, clip, True)

    def loss(theta):
        return float(0.5 * np.mean((theta - problem.target) ** 2))

    def error(theta):
        return float(np.mean(np.abs(theta - problem.target)))

    return Equivalence(
        ranks=ranks, steps=steps, size=size,
        max_abs_diff=float(np.max(np.abs(plain[0] - shard))),
        max_abs_diff_clipped=float(np.max(np.abs(plain_c[0] - shard_c))),
        max_abs_diff_clipped_one_sum=float(np.max(np.abs(plain_one[0] - shard_c))),
        replicas_identical=all(np.array_equal(plain[0], th) for th in plain),
        sharded_identical=all(np.array_equal(shard, th) for th in shards),
        clipped_steps=int(clipped), extra_scalar_allreduces=steps,
        state_per_rank_replicated=int(replicated_state), state_per_rank_sharded=tuple(sharded_state),
        loss_start=loss(np.zeros(size)), loss_end=loss(plain[0]),
        error_start=error(np.zeros(size)), error_end=error(plain[0]),
    )
