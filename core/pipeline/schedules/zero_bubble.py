"""Zero Bubble schedules (Qi et al., arXiv 2401.10241): the backward is split into I and W.

I (input gradient) is on the critical path: the previous stage waits for it. W (weight gradient) is
not, so it can be moved into what would otherwise be bubble. Patterns read left to right: F forward,
I input-gradient backward, W weight-gradient backward; micro-batches are taken in order.
"""

from __future__ import annotations

from core.pipeline.schedules.ir import Schedule, loop_stage_map, pattern, v_stage_map


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
