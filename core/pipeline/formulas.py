"""Closed-form bubbles, kept apart from the simulator: they are what the simulation is checked against.

Each formula holds only under its stated assumptions (equal stages, no p2p latency, no recompute,
and a few schedule-specific conditions). `bubble_formula` returns None with the reason when they do
not hold, so a page can say "no closed form here" instead of showing a wrong number.

Conventions (always say which one a number is):
- idle share of the timeline: bubble / (bubble + ideal), GPipe (p-1)/(m+p-1);
- relative to ideal time: bubble / ideal, GPipe (p-1)/m. Convert with the two helpers below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from core.errors import InputError


def share_from_relative(x: float) -> float:
    """(p-1)/m style (relative to ideal) -> idle share of the timeline: x / (1 + x)."""
    return x / (1.0 + x)


def relative_from_share(s: float) -> float:
    """Idle share of the timeline -> relative to ideal time: s / (1 - s)."""
    if not 0 <= s < 1:
        raise InputError(f"an idle share must be in [0, 1), got {s}")
    return s / (1.0 - s)


def gpipe_bubble_share(p: int, m: int) -> float:
    """(p-1)/(m+p-1): idle share of a flushed GPipe/1F1B timeline with equal stages."""
    return (p - 1) / (m + p - 1)


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


ZB = "Qi et al. 2024 (Zero Bubble), Table 2"
DUALPIPE = "deepseek-ai/DualPipe README"

# When each closed form holds, besides the shared assumptions of `applies`: checked below, said on the page.
CONDITIONS = {
    "gpipe": "any m",
    "1f1b": "any m",
    "pipedream": "any m; the bubble is paid once, not per iteration",
    "interleaved": "m a multiple of p (Megatron runs micro-batches in rounds of p)",
    "looped-bfs": "m >= p",
    "zb-h1": "m >= p and T_W <= min(T_F, T_B)",
    "zb-h2": "m >= 2p-1 and T_W <= min(T_F, T_B)",
    "zbv": "T_F = T_B = T_W and m >= 2p-1",
    "dualpipev": "t_f = t_b (forward = input-gradient backward), t_w <= t_f, m >= 2p (2 x devices)",
    "dualpipe": "p even, m even and m >= 2p (half each way), t_f = t_b, t_w <= t_f",
}


def bubble_formula(schedule: str, p: int, m: int, v: int = 1, tf: float = 1.0, tb: float = 2.0, tw: float = 0.0,
                   iterations: int = 1) -> tuple[Formula | None, str]:
    """The schedule's closed-form bubble, or (None, why not). Costs are per device share of the model."""
    full = tf + tb + tw  # one micro-batch's forward + whole backward on one device share
    n = iterations
    failed = _failed_condition(schedule, p, m, tf, tb, tw)
    if failed:
        return None, failed
    if schedule in ("gpipe", "1f1b"):
        found = ((p - 1) * full * n, "(p-1)(t_f+t_b)", "makespan", "Huang et al. 2019; Narayanan et al. 2021")
    elif schedule == "pipedream":
        found = ((p - 1) * full, "(p-1)(t_f+t_b), once for all iterations", "makespan", "Harlap et al. 2018")
    elif schedule in ("interleaved", "looped-bfs"):
        found = ((p - 1) * full / v * n, "(p-1)(t_f+t_b)/v", "makespan", "Narayanan et al. 2021")
    elif schedule == "zb-h1":
        found = ((p - 1) * (tf + tb - tw) * n, "(p-1)(T_F+T_B-T_W)", "span", ZB)
    elif schedule == "zb-h2":
        found = ((p - 1) * (tf + tb - 2 * tw) * n, "(p-1)(T_F+T_B-2T_W)", "span", ZB)
    elif schedule == "zbv":
        found = (0.0, "0 when T_F = T_B = T_W", "span", "Qi et al. 2024 (Zero Bubble), ZB-V")
    elif schedule == "dualpipev":
        f, b, w = tf / 2, (tb + tw) / 2, tw / 2  # per chunk: a device holds two
        found = ((p - 1) * ((f + b) + b - 3 * w) * n, "(PP/2-1)(F&B+B-3W), PP = 2p stages, F&B = F+B", "makespan",
                 DUALPIPE)
    elif schedule == "dualpipe":
        f, b, w = tf, tb + tw, tw  # a chunk is a whole device share: 1/p of the model
        found = ((p / 2 - 1) * ((f + b) + b - 3 * w) * n, "(PP/2-1)(F&B+B-3W), PP = p stages, F&B = F+B",
                 "makespan", DUALPIPE)
    elif schedule in ("v-half", "v-min"):
        return None, (f"{schedule} has no exact closed form: Qi et al. 2024 estimate its idle share as about "
                      + ("B/2" if schedule == "v-half" else "2B/3 plus an O(p) overhead")
                      + ", B = (p-1)/(m+p-1), when T_F = T_B = T_W (see controllable_estimate)")
    else:
        return None, f"no closed form for {schedule}"
    t, expression, convention, source = found
    ideal = m * full * n
    return Formula(t, t / (t + ideal), t / ideal, expression, convention, source, CONDITIONS[schedule]), ""


def _failed_condition(schedule: str, p: int, m: int, tf: float, tb: float, tw: float) -> str:
    """Why the schedule's own conditions (CONDITIONS) fail here, naming the values; "" when they hold."""
    def fails(what: str) -> str:
        return f"{schedule}'s closed form needs {CONDITIONS[schedule]}; here {what}"

    equal_fb = math.isclose(tf, tb)
    if schedule == "interleaved" and m % p:
        return fails(f"m = {m}, p = {p}")
    if schedule in ("looped-bfs", "zb-h1") and m < p:
        return fails(f"m = {m} < p = {p}")
    if schedule in ("zb-h1", "zb-h2") and tw > min(tf, tb):
        return fails(f"T_W = {tw:g} > min(T_F, T_B) = {min(tf, tb):g}")
    if schedule in ("zb-h2", "zbv") and m < 2 * p - 1:
        return fails(f"m = {m} < 2p-1 = {2 * p - 1}"
                     + (" (the simulated bubble is not zero below that)" if schedule == "zbv" else ""))
    if schedule == "zbv" and not (equal_fb and math.isclose(tb, tw)):
        return fails(f"T_F, T_B, T_W = {tf:g}, {tb:g}, {tw:g}")
    if schedule in ("dualpipev", "dualpipe"):
        if schedule == "dualpipe" and (p % 2 or m % 2):
            return fails(f"p = {p}, m = {m}")
        if m < 2 * p:
            return fails(f"m = {m} < 2p = {2 * p}")
        if not equal_fb or tw > tf:
            return fails(f"t_f, t_b, t_w = {tf:g}, {tb:g}, {tw:g}")
    return ""


def controllable_estimate(schedule: str, p: int, m: int) -> float:
    """Qi et al. 2024's estimate of V-Half's / V-Min's idle share when T_F = T_B = T_W, from 1F1B's
    B = (p-1)/(m+p-1): B/2 and 2B/3 (zero-bubble repository README; V-Min adds an O(p) overhead it
    does not size). An estimate to compare with the simulation, not a closed form."""
    b = gpipe_bubble_share(p, m)
    return {"v-half": b / 2, "v-min": 2 * b / 3}[schedule]


# Peak activation per device in micro-batches of one device's share of layers (1F1B's device 0: p), as
# the sources state it: the authors' V-Min/V-Half table ((p+4)//3, (p+2)//2; ZB-V and 1F1B p) and the
# DualPipe README (PP+1 stages' worth per device, PP = p for DualPipe, 2p half-size stages for DualPipeV).
def published_peak_activation(schedule: str, p: int) -> float | None:
    return {"1f1b": p, "zb-h1": p, "zbv": p, "zb-h2": 2 * p - 1, "v-half": (p + 2) // 2, "v-min": (p + 4) // 3,
            "dualpipe": p + 1, "dualpipev": (2 * p + 1) / 2}.get(schedule)


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
