"""For every schedule PyTorch also generates, its order (torch.distributed.pipelining's own classes, their action
tables timed through our CSV import with the same costs) is never faster than ours.

Grid: p 2-8, m from p to 4p, v 2-4 where the schedule has chunks, t_b = t_f and 2 t_f, t_w 0 or t_f, t_comm 0 or
1/4. PyTorch's overlapped F&B pairs ("(0F7;7B3)OVERLAP_F_B") are timed as one fused operation whose two results
leave at its end, because its runtime sends both after the pair (the lowered schedule puts both SEND actions
after it); read that way DualPipeV at p = 4, m = 8, t_b = 2 t_f is 31.0 for both, and our table is PyTorch's,
action for action. (Split into F then B, PyTorch's order gives 29.5; so does ours, written the same way.)
"""

import itertools

import pytest

from core.errors import InputError
from core.pipeline.result import PipelineParams, simulate
from core.pipeline.schedules import build
from core.pipeline.trace_export import pytorch_actions_csv
from core.pipeline.trace_import import simulate_actions
from tests.engine_support import need

COSTS = [(1.0, tb, tw, tc) for tb, tw, tc in itertools.product((1.0, 2.0), (0.0, 1.0), (0.0, 0.25))]


@pytest.fixture(scope="module")
def orders():
    need("torch")
    from tests.engines import torch_orders

    return torch_orders


def grid(name: str):
    vs = (2, 4) if name in ("interleaved", "looped-bfs") else (2,)
    for p, v in itertools.product((2, 4, 8), vs):
        for m in sorted({p, 2 * p, 3 * p, 4 * p}):
            yield p, m, v


@pytest.mark.parametrize("name", ["gpipe", "interleaved", "looped-bfs", "zbv", "dualpipev"])
def test_ours_is_never_slower_than_pytorchs_order(orders, name):
    compared = 0
    for p, m, v in grid(name):
        try:
            theirs_table = orders.actions_csv(name, p, m, v)
        except ValueError:  # PyTorch refuses this m (interleaved: m a multiple of its rounds)
            continue
        for tf, tb, tw, tc in COSTS:
            ours = simulate(PipelineParams(schedule=name, p=p, m=m, v=v, tf=tf, tb=tb, tw=tw, tcomm=tc))
            theirs = simulate_actions(theirs_table, tf, tb, tw, tc)
            assert ours.timeline.makespan <= theirs.timeline.makespan + 1e-9, (name, p, m, v, (tf, tb, tw, tc))
            compared += 1
    assert compared >= 40


@pytest.mark.parametrize("name,v", [("gpipe", 1), ("interleaved", 2), ("interleaved", 4), ("zbv", 2),
                                    ("dualpipev", 2)])
def test_our_tables_are_pytorchs_action_for_action(orders, name, v):
    """So the PyTorch export may use these native classes and still run exactly the order the row simulated."""
    for p, m in ((2, 8), (4, 8), (4, 16), (8, 16)):
        theirs = "\n".join(",".join(a for a in row.split(",") if not a.endswith("REDUCE_GRAD"))  # bookkeeping
                           for row in orders.actions_csv(name, p, m, v).splitlines()) + "\n"
        assert pytorch_actions_csv(build(name, p, m, v)) == theirs, (name, p, m, v)


def test_looped_bfs_differs_only_in_the_order_of_its_backwards(orders):
    ours = pytorch_actions_csv(build("looped-bfs", 2, 4, 2)).splitlines()[0].split(",")
    theirs = orders.actions_csv("looped-bfs", 2, 4, 2).splitlines()[0].split(",")
    assert ours[:8] == theirs[:8] and ours[8:12] == theirs[8:12][::-1] and ours[12:] == theirs[12:16][::-1]


def test_dualpipev_31_against_29_5_is_the_pair_split(orders):
    table = orders.actions_csv("dualpipev", 4, 8)
    assert simulate_actions(table, 1.0, 2.0, 0.0).timeline.makespan == 31.0
    assert simulate(PipelineParams(schedule="dualpipev", p=4, m=8, tf=1.0, tb=2.0)).timeline.makespan == 31.0
    split = table.replace(")OVERLAP_F_B", "").replace("(", "").replace(";", ",")
    assert simulate_actions(split, 1.0, 2.0, 0.0).timeline.makespan == 29.5


def test_pytorchs_1f1b_order_table_is_refused_with_the_cell(orders):
    """Schedule1F1B's pipeline_order (what _dump_csv writes; its step() runs its own loop) numbers the last rank's
    forwards 1..m in PyTorch 2.13: the import says which micro-batch is wrong instead of timing it."""
    table = orders.actions_csv("1f1b", 4, 8)
    assert table.splitlines()[3].startswith("3F1,3B0,")
    with pytest.raises(InputError, match="stage 3, micro-batch 0 has 0 forward"):
        simulate_actions(table)
