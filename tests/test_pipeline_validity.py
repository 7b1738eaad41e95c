"""Every schedule on a grid: complete, dependency-respecting, deadlock-free, no overlap on a device.

The checks here are written independently of the simulator (plain dictionaries over the result).
"""

import itertools

import numpy as np
import pytest

from core.errors import InputError
from core.pipeline.schedules import REGISTRY, build
from core.pipeline.schedules.ir import Schedule, chain, loop_stage_map, ops
from core.pipeline.simulate import Costs, run_shapes, run_timeline

GRID = [(p, m, v) for p, m, v in itertools.product((1, 2, 3, 4, 8), (1, 2, 4, 8, 12, 16), (2, 3))]


def _valid_grid():
    for name in REGISTRY:
        for p, m, v in GRID:
            try:
                yield name, build(name, p, m, v, iterations=2 if name == "pipedream" else 1)
            except InputError:
                continue  # a documented refusal (e.g. interleaved with m not a multiple of p)


def check_timeline(s: Schedule, tl, tcomm: float) -> None:
    stage, kind, micro, dev = tl.stage.tolist(), tl.kind.tolist(), tl.micro.tolist(), tl.device.tolist()
    start, end = tl.start.tolist(), tl.end.tolist()
    S = s.num_stages
    where = {}
    for i in range(len(kind)):
        group = {0: "F", 1: "back", 2: "back", 3: "W", 4: "R"}[kind[i]]
        key = (group, stage[i], micro[i])
        assert key not in where, f"duplicate {key}"
        where[key] = i
    micros = s.m * s.iterations
    for st in range(S):
        for mb in range(micros):
            assert ("F", st, mb) in where and ("back", st, mb) in where
            has_w = ("W", st, mb) in where
            assert has_w == (kind[where[("back", st, mb)]] == 2)  # W exactly when the backward is split
    for i in range(len(kind)):
        k, st, mb = kind[i], stage[i], micro[i]
        if k == 0:
            need = ("F", st - 1, mb) if st > 0 else None
        elif k in (1, 2, 4):
            need = ("back", st + 1, mb) if st < S - 1 else ("F", st, mb)
        else:
            need = ("back", st, mb)
        if need is not None:
            j = where[need]
            lat = tcomm if dev[j] != dev[i] else 0.0
            finished = end[j] if not (kind[j] == 0 and j + 1 < len(kind) and s_fused(s, j)) else end[j + 1]
            assert start[i] >= finished + lat - 1e-9, f"op {i} starts before its input {j} is ready"
    for d in range(s.p):
        sl = tl.ops_of(d)
        a, b = tl.start[sl], tl.end[sl]
        assert np.all(a[1:] >= b[:-1] - 1e-9), "ops overlap on one device"


def s_fused(s: Schedule, flat_index: int) -> bool:
    return bool(np.concatenate([d[:, 3] for d in s.devices])[flat_index])


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_schedule_is_complete_ordered_and_deadlock_free(name):
    built = [s for n, s in _valid_grid() if n == name]
    assert len(built) >= 10, "the grid should exercise each schedule"
    for s in built:
        for tcomm in (0.0, 0.3):
            tl = run_timeline(s, Costs(tf=1.0, tb=2.0, tw=0.5, tcomm=tcomm))
            check_timeline(s, tl, tcomm)


def test_recompute_adds_a_forward_before_each_backward():
    plain, rec = build("1f1b", 4, 8), build("1f1b", 4, 8, recompute=True)
    assert rec.num_ops == plain.num_ops + 4 * 8
    tl = run_timeline(rec, Costs(tf=1, tb=2))
    check_timeline(rec, tl, 0.0)
    assert tl.makespan == (8 + 4 - 1) * (1 + 2 + 1)  # the recompute forward joins the backward's cost


def _two_devices(dev0, dev1) -> Schedule:
    return Schedule("custom", 2, 1, 1, (dev0, dev1), loop_stage_map(2, 1))


def test_deadlock_is_detected_and_names_the_stuck_ops():
    from core.pipeline.schedules.ir import B, F
    # device 0 waits for the gradient before running the forward that produces it
    s = _two_devices(chain(ops(B, [0]), ops(F, [0])), chain(ops(F, [0]), ops(B, [0])))
    with pytest.raises(InputError, match=r"deadlock.*device 0 B0 .*waits for device 1 B0"):
        run_timeline(s, Costs())


def test_schedules_run_together_time_exactly_as_alone():
    """run_shapes moves several schedules and cost sets in the same rounds: every start time is bit for bit what
    run gives for that schedule and cost set alone (each slot's numbers come from its own entries)."""
    shapes = [build("1f1b", 4, 8), build("interleaved", 4, 8, 2), build("zb-h1", 8, 16), build("1f1b", 1, 3),
              build("zbv", 4, 8), build("dualpipev", 4, 8), build("gpipe", 2, 5, recompute=True)]
    costs = [Costs(1.0, 2.0, 0.0, 0.0, (1.3, 1.0, 1.0, 1.1)), Costs(1.0, 1.5, 0.7, 0.1),
             Costs(0.5, 1.25, 0.25, 0.0, (1.0,) * 7 + (1.6,))]
    jobs = [(s, costs[: 1 + i % 3], None) for i, s in enumerate(shapes)]
    for (s, cs, _), got in zip(jobs, run_shapes(jobs), strict=True):
        assert len(got) == len(cs)
        for k, tl in zip(cs, got, strict=True):
            alone = run_timeline(s, k)
            assert np.array_equal(tl.start, alone.start) and np.array_equal(tl.end, alone.end)


def test_a_deadlock_among_other_schedules_names_its_own_ops():
    from core.pipeline.schedules.ir import B, F
    stuck = _two_devices(chain(ops(B, [0]), ops(F, [0])), chain(ops(F, [0]), ops(B, [0])))
    with pytest.raises(InputError, match=r"deadlock.*device 0 B0 .*waits for device 1 B0"):
        run_shapes([(build("1f1b", 4, 8), [Costs(), Costs(tb=3.0)], None), (stuck, [Costs(), Costs(tb=1.0)], None)])


def test_malformed_schedules_are_refused():
    from core.pipeline.schedules.ir import B, F
    missing = _two_devices(ops(F, [0]), chain(ops(F, [0]), ops(B, [0])))
    with pytest.raises(InputError, match="backward .* appears 0x"):
        run_timeline(missing, Costs())
    twice = _two_devices(chain(ops(F, [0, 0]), ops(B, [0])), chain(ops(F, [0]), ops(B, [0])))
    with pytest.raises(InputError, match="F of stage 0, micro-batch 0 appears 2x"):
        run_timeline(twice, Costs())
    empty = _two_devices(np.empty((0, 4), dtype=np.int32), chain(ops(F, [0]), ops(B, [0])))
    with pytest.raises(InputError, match="at least one operation"):
        run_timeline(empty, Costs())
