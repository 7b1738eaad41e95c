"""A plain pure-Python event loop, the kind the course's first simulator uses: the baseline to beat.

Written for the benchmark only (core never imports it). Same inputs and outputs as the engine's
1F1B/GPipe run: it builds the per-stage op lists, replays them with a dictionary of finish times,
sweeping the stages round-robin until every op has run, then counts the peak micro-batches held.
"""

from __future__ import annotations


def stage_orders(p: int, m: int, schedule: str) -> list[list[tuple[str, int]]]:
    orders = []
    for s in range(p):
        if schedule == "gpipe":
            orders.append([("F", i) for i in range(m)] + [("B", i) for i in range(m)])
            continue
        warm = min(p - 1 - s, m)
        seq = [("F", i) for i in range(warm)]
        for k in range(m - warm):
            seq += [("F", warm + k), ("B", k)]
        seq += [("B", k) for k in range(m - warm, m)]
        orders.append(seq)
    return orders


def simulate(p: int, m: int, schedule: str = "1f1b", tf: float = 1.0, tb: float = 2.0):
    orders = stage_orders(p, m, schedule)
    finished: dict[tuple[str, int, int], float] = {}
    clock = [0.0] * p
    cursor = [0] * p
    timeline: list[list[tuple[str, int, float, float]]] = [[] for _ in range(p)]
    left = sum(len(o) for o in orders)
    while left:
        moved = False
        for s in range(p):
            while cursor[s] < len(orders[s]):
                kind, mb = orders[s][cursor[s]]
                if kind == "F":
                    need = ("F", mb, s - 1) if s > 0 else None
                else:
                    need = ("B", mb, s + 1) if s < p - 1 else ("F", mb, s)
                if need is not None and need not in finished:
                    break
                begin = max(clock[s], finished[need] if need else 0.0)
                stop = begin + (tf if kind == "F" else tb)
                finished[(kind, mb, s)] = clock[s] = stop
                timeline[s].append((kind, mb, begin, stop))
                cursor[s] += 1
                left -= 1
                moved = True
        if not moved:
            raise RuntimeError("deadlock")
    makespan = max(clock)
    idle = 1 - p * m * (tf + tb) / (p * makespan)
    peak = 0
    for ops in timeline:
        held = 0
        for kind, *_ in ops:
            held += 1 if kind == "F" else -1
            peak = max(peak, held)
    return makespan, idle, peak
