"""The planner's work budget (core.planner.count, core.planner.budget): the count is the enumerated count, a search
above the budget is narrowed and says what it narrowed, the CLI's --budget lifts it, and a search that cannot be
narrowed enough is refused with what to pin."""

import numpy as np
import pytest

from core.cli import main
from core.errors import InputError
from core.params.planner import BUDGET, PlannerParams
from core.planner import candidates, count, grid
from core.planner import plan as planner

SMALL = (
    PlannerParams(),
    PlannerParams(model="llama3-70b", gpus=64, batch=512, mb_sizes=(1, 2, 4)),
    PlannerParams(model="mixtral-8x7b", gpus=256, batch=1024, mb_sizes=(1, 2)),  # ep 1-8, cp 1-4 at 32K
    PlannerParams(model="deepseek-v3", gpus=512, batch=1536, offload="all", framework="megatron"),
    PlannerParams(model="llama3-8b", gpus=48, batch=96, schedule="interleaved", tp_comm_overlap="on", zero="3"),
    PlannerParams(model="gpt3-175b", gpus=96, batch=192, v=4, reshard="off", offload="optimizer", sp="on"),
    PlannerParams(model="llama3-405b", gpus=1024, seq=131072, batch=64, mb_sizes=(1,), precision="fp8"),
)


def _enumerated(q: PlannerParams, where=None) -> tuple[int, int]:
    model, gpu, _ = candidates.resolve(q)
    degrees, _ = candidates.degrees(q, model)
    c, _ = grid.grid(q, degrees, model, gpu.gpus_per_node, where)
    return count.count(q, degrees, model, gpu.gpus_per_node, where), c.size


@pytest.mark.parametrize("q", SMALL, ids=lambda q: f"{q.model}-{q.gpus}")
def test_count_equals_the_enumerated_grid(q):
    counted, enumerated = _enumerated(q)
    assert enumerated > 0 and counted == enumerated


def test_count_with_offload_only_where_needed_equals_the_grid():
    q = PlannerParams(model="deepseek-v3", gpus=512, batch=1536, offload="all")
    model, gpu, _ = candidates.resolve(q)
    degrees, _ = candidates.degrees(q, model)
    where = np.arange(len(degrees)) % 3 == 0  # any mask: the count follows it
    counted, enumerated = _enumerated(q, where)
    assert counted == enumerated
    assert counted < _enumerated(q)[1]


def test_the_plan_evaluates_exactly_the_count():
    q = PlannerParams(model="llama3-70b", gpus=64, batch=512)
    result = planner.plan(q)
    searched = int((result.frame["micro_batch_size"] > 0).sum()) - len(candidates.excluded(
        q, *candidates.resolve(q)[:1], 8, result.usable))
    assert searched == _enumerated(q)[0] and not result.narrowed


def test_narrowing_above_the_budget_says_what_it_narrowed():
    q = PlannerParams(model="deepseek-v3", gpus=2048, batch=4096, mb_sizes=(1, 2, 3, 4, 5, 6), offload="all")
    asked = _enumerated(q)[0]
    result = planner.plan(q, budget=asked // 4)
    assert result.narrowed and result.notes[0].startswith("Search narrowed to stay within the work budget of "
                                                          f"{asked // 4:,} candidates")
    assert f"this question asks for {asked:,}" in result.notes[0]
    said = "; ".join(result.narrowed)
    assert "offload searched only on the" in said and "micro-batch sizes 1, 2, 4, 6 (of 1, 2, 3, 4, 5, 6)" in said
    assert set(result.frame["micro_batch_size"]) <= {1, 2, 4, 6}
    outside = candidates.excluded(q, candidates.resolve(q)[0], 8, result.usable)
    assert len(result.frame) - len(outside) <= asked // 4
    # offload kept only where ZeRO-3 states alone do not fit: every offloaded candidate's layout needs it
    off = result.frame[result.frame["offload"] != "none"]
    f = result.frame
    # rows some framework runs (a row none runs is counted in Megatron-LM's accounting, not the one that decides)
    plain = f[(f["offload"] == "none") & (f["zero_stage"] == 3) & f["reshard"] & (f["frameworks"].map(len) > 0)]
    fixed = plain["states_on_gpu_bytes"] + plain["zero3_working_bytes"]
    key = ["t", "p", "cp", "ep"]
    fits = set(map(tuple, plain.loc[fixed <= result.usable, key].values))
    assert len(off) > 0 and len(fits) > 0
    assert not fits & set(map(tuple, off[key].values))


def test_ep_and_cp_are_thinned_with_the_smallest_and_largest_kept():
    q = PlannerParams(model="deepseek-v3", gpus=4096, seq=131072, batch=512, mb_sizes=(1,))
    asked = _enumerated(q)[0]
    result = planner.plan(q, budget=asked // 3)
    said = "; ".join(result.narrowed)
    assert "ep = 1, 4, 16, 64, 256 (of 1, 2, 4, 8, 16, 32, 64, 128, 256)" in said
    assert set(result.frame.loc[result.frame["micro_batch_size"] > 0, "ep"]) <= {1, 4, 16, 64, 256}


def test_no_budget_searches_everything():
    q = PlannerParams(model="deepseek-v3", gpus=2048, batch=4096, mb_sizes=(1, 2, 3), offload="all")
    asked = _enumerated(q)[0]
    full = planner.plan(q, budget=0)
    assert not full.narrowed and set(full.frame["micro_batch_size"]) >= {1, 2, 3}
    assert planner.plan(q, budget=asked).narrowed == ()  # at the budget: not narrowed


def test_a_search_that_cannot_be_narrowed_enough_is_refused_with_what_to_pin():
    q = PlannerParams(model="llama3-70b", gpus=1024, batch=1024, mb_sizes=(1,))
    with pytest.raises(InputError, match=r"this search has 4,101 candidates, above the work budget of 100 per "
                                         r"plan: pin t \(7 values\), p \(7 values\).*--fix t=8,p=16"):
        planner.plan(q, budget=100)


def test_the_default_budget_is_one_spec_with_its_range():
    assert BUDGET.default == 400_000 and BUDGET.lo == 0 and BUDGET.hi == 50_000_000
    q = PlannerParams(model="deepseek-v3", gpus=2048, batch=4096, mb_sizes=(1, 2, 3), offload="all")
    assert planner.plan(q).narrowed == planner.plan(q, BUDGET.default).narrowed == ()
    assert planner.plan(q, 20_000).narrowed


def test_the_issue_question_is_answered_within_the_budget():
    """DeepSeek-V3 on 61,440 GPUs at 1M tokens, eight micro-batch sizes, every offload: 9.1 million candidates
    asked, narrowed to at most the budget (the CLI answers in ~2 s, 0.5 GB; README, "Work per request")."""
    q = PlannerParams(model="deepseek-v3", gpus=61440, seq=1048576, mb_sizes=(1, 2, 3, 4, 5, 6, 7, 8), offload="all")
    model, gpu, _ = candidates.resolve(q)
    degrees, _ = candidates.degrees(q, model)
    assert count.count(q, degrees, model, gpu.gpus_per_node) == 9_086_256
    result = planner.plan(q)
    assert result.narrowed and len(result.frame) <= BUDGET.default + 10_000
    assert result.best() is not None


def test_cli_budget_flag(capsys):
    args = ["plan", "--model", "deepseek-v3", "--gpus", "2048", "--global-batch", "4096", "--micro-batch-sizes",
            "1,2,3", "--fix", "offload=all", "--top", "1"]
    assert main([*args, "--budget", "20000"]) == 0
    out = capsys.readouterr().out
    assert "note: Search narrowed to stay within the work budget of 20,000 candidates" in out
    assert main([*args, "--budget", "0"]) == 0
    assert "Search narrowed" not in capsys.readouterr().out
    assert main([*args, "--budget", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "budget: '-1' is out of range; allowed 0 to 50,000,000" in err
    assert main([*args, "--budget", "10"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: this search has") and "pin" in err and err.count("\n") == 1
