"""Fair comparisons: every schedule's memory against its bubble, and schedules matched to equal memory.

- `frontier(params)`: each schedule at the same p, m, v and costs, by peak activation (max device,
  micro-batches of L/p layers) and idle share; `pareto` marks the points no other schedule beats on both.
- `match_memory(ref, name)`: the same global batch, cut into m' micro-batches (and v' chunks where the
  schedule takes any v), so that the schedule's activation memory equals the reference's. A micro-batch
  then holds m/m' of the reference's, so its costs and activations scale by m/m': memory =
  peak_activation(m') x m/m' in the reference's micro-batches, and times are in the reference's units.
  Not modelled: a GPU's efficiency at a smaller micro-batch (it usually drops), which favours the
  schedules that need fewer, larger micro-batches.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from core.errors import InputError
from core.params.pipeline import MAX_OPS, PIPELINE
from core.pipeline.result import PipelineParams, simulate
from core.pipeline.schedules import REGISTRY, estimated_ops

M_MAX = int(PIPELINE["m"].hi)
FRONTIER_OPS = MAX_OPS // 4  # per schedule: above this a schedule is left out of the frontier (page and CLI alike)

MATCH_MAX_V = 8  # depths the equal-memory match tries (a deeper v can be set directly: PIPELINE["v"] goes to 64)


def peak_activation(params: PipelineParams) -> float:
    return float(simulate(params).timeline.peak_activation.max())


def frontier(params: PipelineParams, names=None, max_ops: int | None = None) -> list[dict]:
    """One row per schedule: peak activation and bubble at these p, m, v and costs; refusals say why."""
    rows = []
    for name in names or REGISTRY:
        p = replace(params, schedule=name, iterations=1)
        row = {"schedule": name, "peak activation": None, "idle share": None, "relative to ideal": None,
               "makespan": None, "note": ""}
        try:
            if max_ops is not None and estimated_ops(name, p.p, p.m, p.v) > max_ops:
                raise InputError(f"over {max_ops:,} operations at this size")
            tl = simulate(p).timeline
        except InputError as exc:
            row["note"] = str(exc)
            rows.append(row)
            continue
        row.update({"peak activation": float(tl.peak_activation.max()), "idle share": tl.bubble_fraction,
                    "relative to ideal": tl.bubble_vs_ideal, "makespan": tl.makespan})
        rows.append(row)
    ok = [r for r in rows if r["peak activation"] is not None]
    for r in ok:
        r["pareto"] = not any(o is not r and o["peak activation"] <= r["peak activation"] + 1e-9
                              and o["idle share"] <= r["idle share"] + 1e-12
                              and (o["peak activation"] < r["peak activation"] - 1e-9
                                   or o["idle share"] < r["idle share"] - 1e-12) for o in ok)
    return rows


@dataclass(frozen=True)
class Match:
    schedule: str
    params: PipelineParams | None  # None when no m' (and v') reaches the target
    memory: float | None  # peak activation in the reference's micro-batches of L/p layers
    target: float
    scale: float | None = None  # the matched micro-batch's size relative to the reference's: m / m'
    note: str = ""


def match_memory(ref: PipelineParams, name: str, target: float | None = None) -> Match:
    """The m' (and v') at which `name` holds `target` activations (default: what `ref` holds), the same
    global batch m x micro-batch; the setting that holds at most the target and comes closest to it,
    then the smaller bubble. Raises nothing: a schedule that cannot get there says why."""
    goal = peak_activation(ref) if target is None else float(target)
    entry = REGISTRY[name]
    vs = [ref.v] if entry.chunks != "v" else list(range(2 if name == "interleaved" else 1, MATCH_MAX_V + 1))
    best: tuple | None = None
    notes = []
    for v in vs:
        found = _smallest_m_within(ref, name, v, goal)
        if isinstance(found, str):
            notes.append(found)
            continue
        prm, mem = found
        share = simulate(prm).timeline.bubble_fraction
        key = (round(goal - mem, 9), share)
        if best is None or key < best[0]:
            best = (key, prm, mem)
    if best is None:
        return Match(name, None, None, goal, None, notes[0] if notes else f"{name} cannot hold {goal:.3g} or less")
    return Match(name, best[1], best[2], goal, ref.m / best[1].m)


def _scaled(ref: PipelineParams, name: str, m: int, v: int) -> PipelineParams:
    s = ref.m / m
    return replace(ref, schedule=name, m=m, v=v, iterations=1, tf=ref.tf * s, tb=ref.tb * s, tw=ref.tw * s,
                   tcomm=ref.tcomm * s)


def _memory(ref: PipelineParams, name: str, m: int, v: int) -> tuple[PipelineParams, float] | None:
    try:
        prm = _scaled(ref, name, m, v)
        if estimated_ops(name, prm.p, m, v) > MAX_OPS:
            return None
        return prm, peak_activation(prm) * ref.m / m
    except InputError:
        return None


def _smallest_m_within(ref: PipelineParams, name: str, v: int, goal: float):
    """The valid m' whose memory is at most `goal` and closest to it (memory falls as m' grows: the same
    batch in smaller pieces); a reason string when there is none.

    Peak activation stops growing once m' passes a few p (every schedule here but GPipe and looped BFS),
    so beyond a probe at about 4p the answer is computed, not searched: m' = held x m / goal, rounded
    up to a valid m'. Below the probe, bisection over the cheap small m'.
    """
    valid = [m for m in _valid_m(name, ref.p, v) if estimated_ops(name, ref.p, m, v) <= MAX_OPS]
    if not valid:
        return f"{name} has no valid m at p = {ref.p} within the operation limit"
    i_probe = min(range(len(valid)), key=lambda i: (valid[i] < min(4 * ref.p, valid[-1]), abs(valid[i] - 4 * ref.p)))
    probe = _memory(ref, name, valid[i_probe], v)
    if probe is not None and probe[1] <= goal + 1e-9:
        return _bisect(ref, name, v, goal, valid[: i_probe + 1])
    held = None if probe is None else probe[1] * valid[i_probe] / ref.m  # peak activation at the probe
    twice = [m for m in valid if m >= 2 * valid[i_probe]]
    level = twice and held is not None and _memory(ref, name, twice[0], v)
    if not level or abs(level[1] * twice[0] / ref.m - held) > 1e-9:  # still growing with m': GPipe-like
        last = level or _memory(ref, name, valid[-1], v)  # holding the whole batch, m' changes nothing
        reach = "" if not last else f" (it holds {last[1]:.3g} at m = {last[0].m})"
        if not last or last[1] > goal + 1e-9:
            return f"{name} cannot hold {goal:.3g} micro-batches' worth or less at the same global batch{reach}"
        return _bisect(ref, name, v, goal, valid)
    need = held * ref.m / goal - 1e-9
    fits = [m for m in valid if m >= need]
    if not fits:
        return (f"{name} cannot hold {goal:.3g} micro-batches' worth or less at the same global batch "
                f"(it would need m = {need:.0f}, above the limit)")
    return _memory(ref, name, fits[0], v)


def _bisect(ref: PipelineParams, name: str, v: int, goal: float, valid: list[int]):
    lo, hi = 0, len(valid) - 1  # valid[hi] is within the goal
    while lo < hi:
        mid = (lo + hi) // 2
        got = _memory(ref, name, valid[mid], v)
        if got is not None and got[1] <= goal + 1e-9:
            hi = mid
        else:
            lo = mid + 1
    first = _memory(ref, name, valid[hi], v)
    # Where memory stays level (1F1B below m = p holds m' x m/m' = m), more micro-batches cost no memory and
    # cut the bubble: take the last m' of that level.
    lo, top = hi, len(valid) - 1
    while lo < top:
        mid = (lo + top + 1) // 2
        got = _memory(ref, name, valid[mid], v)
        if got is not None and got[1] >= first[1] - 1e-9:
            lo = mid
        else:
            top = mid - 1
    return _memory(ref, name, valid[lo], v)


def _valid_m(name: str, p: int, v: int) -> list[int]:
    lo = REGISTRY[name].min_m(p)
    ms = range(max(1, lo), M_MAX + 1)
    if name == "interleaved":
        return [m for m in ms if m % p == 0]
    if name == "dualpipe":
        return [m for m in ms if m % 2 == 0]
    return list(ms)
