"""Zero Bubble schedules (Qi et al., arXiv 2401.10241): the backward is split into I and W.

I (input gradient) is on the critical path: the previous stage waits for it. W (weight gradient) is
not, so it can be moved into what would otherwise be bubble. Patterns read left to right: F forward,
I input-gradient backward, W weight-gradient backward; micro-batches are taken in order.
"""

from __future__ import annotations

import math

from core.pipeline.schedules.ir import Schedule, loop_stage_map, pattern, v_stage_map
from core.pipeline.schedules.record import Case, ClosedForm, Engines, Entry, Search


def zb_h1(p: int, m: int, v: int = 1) -> Schedule:
    """ZB-H1: 1F1B whose device d keeps d weight-gradients pending.

    The pending W's fill the drain at the end, cutting the bubble to (p-1)(T_F + T_B - T_W), and each
    device still holds at most p micro-batches, like stage 0 of 1F1B.
    """
    devices = []
    for d in range(p):
        warm = min(p - 1 - d, m)
        steady = m - warm  # steps that still start a forward; step k runs I_k, and W once k >= d
        kinds = ("F" * warm + "FI" * min(d, steady) + "FIW" * max(steady - d, 0)
                 + "I" * max(min(d, m) - steady, 0) + "IW" * max(m - max(d, steady), 0) + "W" * min(d, m))
        devices.append(pattern(kinds))
    return Schedule("zb-h1", p, 1, m, tuple(devices), loop_stage_map(p, 1))


def zb_h2(p: int, m: int, v: int = 1) -> Schedule:
    """ZB-H2: more warm-up forwards fill the start, W's fill the end: zero bubble when T_F=T_B=T_W.

    Device d starts with 2(p-1-d)+1 forwards; a W runs whenever another F would exceed 2p-1 held
    micro-batches (the memory this schedule trades for its bubble). Needs m >= 2p-1 to reach
    (p-1)(T_F + T_B - 2T_W).
    """
    cap = 2 * p - 1
    devices = []
    for d in range(p):
        warm = min(2 * (p - 1 - d) + 1, m)
        steady = m - warm
        free = min(steady, cap - warm)  # steps before the memory cap forces a W
        tail_w = m - (steady - free) - (m - steady)
        devices.append(pattern("F" * warm + "IF" * free + "IWF" * (steady - free) + "IW" * (m - steady) + "W" * tail_w))
    return Schedule("zb-h2", p, 1, m, tuple(devices), loop_stage_map(p, 1))


def zbv(p: int, m: int, v: int = 2) -> Schedule:
    """ZB-V: two chunks per device in a V (device d holds stages d and 2p-1-d).

    The V puts the first and last stage on the same device, so the turn-around needs no hop. With
    T_F = T_B = T_W it has (almost) no bubble while holding about as much as 1F1B's stage 0. Built
    for n = max(m, 2p-1) micro-batches; those past m are dropped.
    """
    n = max(m, 2 * p - 1)
    devices = []
    for r in range(p):
        k0, c0 = "F" * (2 * (p - r) - 1), "0" * (2 * (p - r) - 1)
        k1, c1 = "FF" * r, "10" * r
        k2, c2 = "FIW" * (p - r), "111" * (p - r)
        both = n - 2 * p + r + 1  # steady steps that still start a chunk-0 forward
        k3, c3 = "FIWFIW" * both + "IWFIW" * (p - r - 1), "000111" * both + "00111" * (p - r - 1)
        k4, c4 = "II" * r + "IW" * (p - r) + "W" * r + "W" * r, "01" * r + "00" * (p - r) + "1" * r + "0" * r
        rows = pattern(k0 + k1 + k2 + k3 + k4, c0 + c1 + c2 + c3 + c4)
        devices.append(rows[rows[:, 1] < m])
    return Schedule("zbv", p, 2, m, tuple(devices), v_stage_map(p))


# The closed forms of Qi et al. 2024, Table 2, in the span convention (a device's idle time between its own first
# and last operation), with when they hold.
ZB = "Qi et al. 2024 (Zero Bubble), Table 2"


def _w_fits(c: Case) -> str:
    return f"T_W = {c.tw:g} > min(T_F, T_B) = {min(c.tf, c.tb):g}" if c.tw > min(c.tf, c.tb) else ""


def _long_enough(c: Case, note: str = "") -> str:
    return f"m = {c.m} < 2p-1 = {2 * c.p - 1}{note}" if c.m < 2 * c.p - 1 else ""


def _h1_fails(c: Case) -> str:
    return f"m = {c.m} < p = {c.p}" if c.m < c.p else _w_fits(c)


def _zbv_fails(c: Case) -> str:
    equal = math.isclose(c.tf, c.tb) and math.isclose(c.tb, c.tw)
    return (_long_enough(c, " (the simulated bubble is not zero below that)")
            or ("" if equal else f"T_F, T_B, T_W = {c.tf:g}, {c.tb:g}, {c.tw:g}"))


ZB_H1 = Entry(
    "zb-h1", "ZB-H1", zb_h1, "Zero Bubble H1: W's fill the drain; 1F1B's memory", "1", split_backward=True,
    closed_form=ClosedForm(lambda c: (c.p - 1) * (c.tf + c.tb - c.tw) * c.iterations, "(p-1)(T_F+T_B-T_W)", "span",
                           ZB, "m >= p and T_W <= min(T_F, T_B)", _h1_fails),
    derivation="The backward is split into B (input gradient, on the critical path: the previous device waits "
               "for it) and W (weight gradient, needed only by the optimizer). Device d defers d of its W's; they "
               "fill the drain, so each of the p-1 fill/drain steps is T_W shorter: (p-1)(T_F+T_B-T_W). Memory "
               "stays 1F1B's p, since a deferred W keeps only what its backward already held.",
    peak_activation=lambda p: p, search=Search(rank=3, by_default=True))

ZB_H2 = Entry(
    "zb-h2", "ZB-H2", zb_h2, "Zero Bubble H2: extra warm-up too; zero bubble at 2p-1 held", "1", split_backward=True,
    closed_form=ClosedForm(lambda c: (c.p - 1) * (c.tf + c.tb - 2 * c.tw) * c.iterations, "(p-1)(T_F+T_B-2T_W)",
                           "span", ZB, "m >= 2p-1 and T_W <= min(T_F, T_B)",
                           lambda c: _w_fits(c) or _long_enough(c)),
    derivation="ZB-H1 plus extra warm-up forwards (2(p-1-d)+1 on device d) that fill the start: one more T_W "
               "saved per step, (p-1)(T_F+T_B-2T_W), zero when T_F = T_B = T_W. The warm-up needs m >= 2p-1 "
               "micro-batches to exist, and each device then holds up to 2p-1 of them.",
    peak_activation=lambda p: 2 * p - 1, search=Search(rank=4))

ZBV = Entry(
    "zbv", "ZB-V", zbv, "Zero Bubble V: two chunks in a V shape; 1F1B's memory", "2", split_backward=True,
    v_shape=True,
    closed_form=ClosedForm(lambda c: 0.0, "0 when T_F = T_B = T_W", "span", "Qi et al. 2024 (Zero Bubble), ZB-V",
                           "T_F = T_B = T_W and m >= 2p-1", _zbv_fails),
    derivation="Two chunks per device in a V (device d holds stages d and 2p-1-d) put the first and the last stage "
               "on device 0, so the turn from forward to backward needs no hop. With T_F = T_B = T_W the warm-up "
               "is exactly filled by second-chunk forwards and the cool-down by W's, at 1F1B's peak of p. The "
               "pattern needs 2p-1 micro-batches: with fewer, the gaps stay (p=8, m=8: 22.6 % idle).",
    peak_activation=lambda p: p, engines=Engines(torch="ScheduleZBVZeroBubble"), search=Search(rank=5))
