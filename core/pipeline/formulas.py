"""Closed-form bubbles, kept apart from the simulator: they are what the simulation is checked against.

Each formula holds only under its stated assumptions (equal stages, no p2p latency, no recompute,
and a few schedule-specific conditions). The forms and their conditions are the schedules' own (their records
in core.pipeline.schedules, beside their generators); `bubble_formula` evaluates one, or returns None with the
reason when it does not hold, so a page can say "no closed form here" instead of showing a wrong number.

Conventions (always say which one a number is):
- idle share of the timeline: bubble / (bubble + ideal), GPipe (p-1)/(m+p-1);
- relative to ideal time: bubble / ideal, GPipe (p-1)/m. Convert with the two helpers below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from core.errors import InputError
from core.pipeline.schedules import REGISTRY
from core.pipeline.schedules.flush import gpipe_bubble_share as gpipe_bubble_share  # (p-1)/(m+p-1), beside GPipe
from core.pipeline.schedules.record import Case


def share_from_relative(x: float) -> float:
    """(p-1)/m style (relative to ideal) -> idle share of the timeline: x / (1 + x)."""
    return x / (1.0 + x)


def relative_from_share(s: float) -> float:
    """Idle share of the timeline -> relative to ideal time: s / (1 - s)."""
    if not 0 <= s < 1:
        raise InputError(f"an idle share must be in [0, 1), got {s}")
    return s / (1.0 - s)


def gpipe_efficiency(p: int, m: int) -> float:
    """m/(m+p-1): the busy share of the same timeline (the course's "pipeline efficiency")."""
    return m / (m + p - 1)


def overstatement(share: float) -> float:
    """How much the relative-to-ideal number overstates the idle share it stands for: relative / share - 1.

    For any bubble this equals the relative number itself (x / (x / (1 + x)) - 1 = x), so (p-1)/m at p = 4,
    m = 8 overstates the true 3/11 by 3/8 = 37.5 %. Zero when there is no bubble."""
    return relative_from_share(share) / share - 1.0 if share > 0 else 0.0


# GPipe (Huang et al. 2019, sec. 2.2): the bubble overhead "is negligible when M >= 4 x K" (K partitions).
# By the idle share alone m = 4p still leaves (p-1)/(5p-1) idle; GPipe's own runs also recompute activations
# in the backward, which fills part of the bubble. Said where it is shown.
GPIPE_RULE_FACTOR = 4


def gpipe_rule_of_thumb(p: int) -> int:
    """The m at which GPipe calls the bubble negligible: 4 micro-batches per stage."""
    return GPIPE_RULE_FACTOR * p


@dataclass(frozen=True)
class Formula:
    """A closed form evaluated for one configuration."""

    bubble_time: float  # per device, in the schedule's time units
    fraction: float  # idle share of the timeline
    relative: float  # bubble relative to ideal time
    expression: str  # the formula as written in its source
    convention: str  # "makespan": idle within the makespan; "span": within each device's own span
    source: str
    conditions: str = ""  # when it holds, besides equal stages, no latency and no recompute (see `applies`)


def bubble_formula(schedule: str, p: int, m: int, v: int = 1, tf: float = 1.0, tb: float = 2.0, tw: float = 0.0,
                   iterations: int = 1) -> tuple[Formula | None, str]:
    """The schedule's closed-form bubble (its registry entry's), or (None, why not). Costs are per device share of
    the model; v is the chunks per device the schedule uses."""
    entry = REGISTRY.get(schedule)
    form = entry.closed_form if entry else None
    if form is None:
        return None, (entry.no_form if entry and entry.no_form else f"no closed form for {schedule}")
    case = Case(p, m, v, tf, tb, tw, iterations)
    failed = form.fails(case)
    if failed:
        return None, f"{schedule}'s closed form needs {form.conditions}; here {failed}"
    t = form.bubble(case)
    ideal = m * case.full * iterations
    return Formula(t, t / (t + ideal), t / ideal, form.expression, form.convention, form.source, form.conditions), ""


def controllable_estimate(schedule: str, p: int, m: int) -> float:
    """Qi et al. 2024's estimate of V-Half's / V-Min's idle share when T_F = T_B = T_W, from 1F1B's
    B = (p-1)/(m+p-1): B/2 and 2B/3 (zero-bubble repository README; V-Min adds an O(p) overhead it
    does not size). An estimate to compare with the simulation, not a closed form."""
    estimate = REGISTRY[schedule].estimate
    if estimate is None:
        raise KeyError(f"{schedule} has no published estimate")
    return estimate(p, m)


def published_peak_activation(schedule: str, p: int) -> float | None:
    """Peak activation per device in micro-batches of one device's share of layers (1F1B's device 0: p), as the
    sources state it (the authors' V-Min/V-Half table, the DualPipe README): None where they state none."""
    peak = REGISTRY[schedule].peak_activation if schedule in REGISTRY else None
    return None if peak is None else peak(p)


def applies(p: int, tcomm: float, recompute: bool, uneven: bool) -> str:
    """Empty string when the closed forms' shared assumptions hold, else why they do not."""
    problems = []
    if tcomm > 0:
        problems.append("t_comm > 0")
    if recompute:
        problems.append("recompute is on")
    if uneven:
        problems.append("stages are uneven")
    return ("closed forms assume equal stages, no latency and no recompute (" + ", ".join(problems) + ")"
            if problems else "")


def min_microbatches(p: int, target: float, v: int = 1, strict: bool = True) -> int:
    """Smallest m whose idle share (p-1)/v / (m + (p-1)/v) is below `target` ("under 5 %": strict) or
    at most `target` (strict=False). Exact rational arithmetic, so 7/70 counts as exactly 10 %."""
    if not 0 < target < 1:
        raise InputError(f"target idle share must be between 0 and 1 (exclusive), got {target}")
    if p < 1 or v < 1:
        raise InputError("p and v must be >= 1")
    goal = Fraction(str(target))
    k = Fraction(p - 1, v)
    ok = (lambda m: k / (m + k) < goal) if strict else (lambda m: k / (m + k) <= goal)
    m = max(1, math.floor(k * (1 - goal) / goal))
    while not ok(m):
        m += 1
    while m > 1 and ok(m - 1):
        m -= 1
    return m
