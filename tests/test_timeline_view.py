"""Bounded drawing data (core.pipeline.timeline_view): bars and binned shares reproduce the seed's timelines exactly."""

import pickle

import numpy as np
import pytest

from core.pipeline.result import PipelineParams, simulate
from core.pipeline.timeline_view import FB, KIND_LABELS, TimelineView, cursor_time, op_name, step_cursor, timeline_view
from tests.test_pipeline_seed import SEED_1F1B_4_8, SEED_GPIPE_4_8


def timeline(**kw):
    return simulate(PipelineParams(**kw)).timeline


def bars_as_text(view: TimelineView) -> str:
    """Paint every bar over its ticks in the course notation (digit = F, letter = B)."""
    width = int(round(view.makespan))
    rows = [["."] * width for _ in range(view.p)]
    b = view.bars
    for d, k, mb, a, e in zip(b.device, b.kind, b.micro, b.start, b.end, strict=True):
        ch = str(mb % 10) if KIND_LABELS[k] == "F" else chr(ord("a") + mb % 26)
        for t in range(int(round(a)), int(round(e))):
            rows[d][t] = ch
    return "\n".join(f"  stage {d}: {''.join(r)}" for d, r in enumerate(rows))


def shares_as_text(view: TimelineView) -> str:
    """One bin per tick: 'F' where the forward share is 1, 'B' where the backward share is 1, '.' when idle."""
    share = view.heat.share
    rows = []
    for d in range(view.p):
        f, b = share[d, 0], share[d, 1]
        assert np.all((f + b == 0) | (f + b == 1))  # every tick is wholly one thing
        rows.append("".join("F" if x == 1 else "B" if y == 1 else "." for x, y in zip(f, b, strict=True)))
    return "\n".join(rows)


def seed_kinds(seed: str) -> str:
    return "\n".join("".join("F" if c.isdigit() else "B" if c.isalpha() else "." for c in line.split(": ")[1])
                     for line in seed.splitlines())


@pytest.mark.parametrize("schedule,seed", [("1f1b", SEED_1F1B_4_8), ("gpipe", SEED_GPIPE_4_8)])
def test_bars_redraw_the_seed_timeline_character_for_character(schedule, seed):
    view = timeline_view(timeline(schedule=schedule, p=4, m=8))
    assert not view.aggregated and len(view.bars) == view.drawn_ops == 64
    assert bars_as_text(view) == seed
    assert list(view.bars.label[view.bars.device == 0][:4]) == ["0", "1", "2", "3"]
    assert view.bars.label.dtype.kind == "U"


@pytest.mark.parametrize("schedule,seed", [("1f1b", SEED_1F1B_4_8), ("gpipe", SEED_GPIPE_4_8)])
def test_aggregated_shares_with_one_bin_per_tick_are_the_seed_timeline(schedule, seed):
    view = timeline_view(timeline(schedule=schedule, p=4, m=8), max_bars=0, bins=33)
    assert view.aggregated and view.heat.share.shape == (4, 6, 33)
    assert shares_as_text(view) == seed_kinds(seed)


def test_shares_over_uneven_bins_add_up_to_each_devices_busy_time():
    tl = timeline(schedule="interleaved", p=8, m=64, v=4, tf=1.3, tb=2.1, tcomm=0.05, first_stage=1.7)
    view = timeline_view(tl, max_bars=0, bins=97)  # bin edges fall inside ops
    width = np.diff(view.heat.edges)
    busy = (view.heat.share * width).sum(axis=(1, 2))
    np.testing.assert_allclose(busy, tl.busy, rtol=1e-5)
    assert 0 <= view.heat.share.min() and view.heat.busy.max() <= 1.0
    forward, backward = ((view.heat.share[:, k] * width).sum() for k in (0, 1))
    assert backward / forward == pytest.approx(2.1 / 1.3, rel=1e-5)  # every stage runs m forwards and m backwards


def test_fused_pairs_are_one_bar_labelled_with_both_micro_batches():
    tl = timeline(schedule="dualpipev", p=4, m=8, tf=1.0, tb=1.0, tw=0.5)
    view = timeline_view(tl)
    b = view.bars
    fused = int(sum(rows[:, 3].sum() for rows in tl.schedule.devices))
    pairs = np.flatnonzero(b.kind == FB)
    assert fused > 0 and pairs.size == fused
    assert np.all(b.dur > 0)  # the zero-length fused forwards are not drawn
    assert view.drawn_ops == tl.num_ops - fused
    # A pair lasts F + B of one chunk: (t_f + t_b + t_w) / 2 with equal stages.
    np.testing.assert_allclose(b.dur[pairs], (1.0 + 1.0 + 0.5) / 2)
    i = int(pairs[0])
    assert b.label[i] == f"F{b.pair_micro[i]} B{b.micro[i]}" == op_name(b, i)
    assert b.pair_stage[i] != b.stage[i]  # forward and backward of the pair run different chunks
    per_device = np.bincount(b.device, weights=b.dur, minlength=4)
    np.testing.assert_allclose(per_device, tl.busy)


@pytest.mark.parametrize("schedule,m,expected", [("gpipe", 8, [8, 8, 8, 8]), ("1f1b", 8, [4, 3, 2, 1]),
                                                 ("zb-h2", 16, [7, 7, 7, 7])])  # ZB-H2 holds 2p-1
def test_memory_peaks_survive_binning(schedule, m, expected):
    tl = timeline(schedule=schedule, p=4, m=m, tw=0.5)
    exact = timeline_view(tl)
    coarse = timeline_view(tl, max_bars=0, bins=7, max_steps=0)
    assert exact.memory.exact and not coarse.memory.exact
    np.testing.assert_allclose(tl.peak_inflight, expected)
    np.testing.assert_allclose(coarse.memory.peak.max(axis=1), expected)
    np.testing.assert_allclose([held.max() for _, held in exact.memory.steps], expected)
    for time, held in exact.memory.steps:  # step curves start empty at 0 and end empty at the makespan
        assert time[0] == 0 and time[-1] == tl.makespan and held[0] == 0 and held[-1] == 0


def test_state_at_a_moment_of_the_seed_1f1b_timeline():
    view = timeline_view(timeline(schedule="1f1b", p=4, m=8))
    # tick 10 of the seed: stage 0 'a', stage 1 '3', stage 2 'b', stage 3 'c'
    assert view.running_at(10.5) == ["B0", "F3", "B1", "B2"]
    np.testing.assert_allclose(view.held_at(10.5), [4, 3, 2, 1])
    assert view.running_at(5.5) == ["idle", "idle", "idle", "B0"]


def test_cursor_steps_stop_wherever_the_seed_timeline_changes():
    views = [timeline_view(timeline(schedule="1f1b", p=4, m=8))]
    rows = [line.split(": ")[1] for line in SEED_1F1B_4_8.splitlines()]
    changes = sorted({t for r in rows for t in range(1, 33) if r[t] != r[t - 1]} | {33})
    percent, seen = 0.0, []
    for _ in range(40):
        percent = step_cursor(views, percent, +1)
        seen.append(round(cursor_time(views, percent), 4))
        if percent == 100.0:
            break
    assert seen == changes and 5 not in changes  # tick 5 changes nothing: the cursor skips it
    assert step_cursor(views, 100.0, -1) == pytest.approx(100 * changes[-2] / 33, abs=1e-4)  # back to t = 31
    for _ in range(40):
        percent = step_cursor(views, percent, -1)
    assert percent == 0.0


def test_largest_allowed_timeline_gives_a_bounded_view():
    tl = timeline(schedule="interleaved", p=64, m=1024, v=8)
    assert tl.num_ops == 1_048_576
    view = timeline_view(tl)
    assert view.aggregated and view.heat.share.shape == (64, 6, 600)
    assert view.memory.steps is None and view.memory.peak.shape == (64, 600)
    np.testing.assert_allclose(view.memory.peak.max(axis=1), tl.peak_inflight)
    assert len(pickle.dumps(view)) < 2_000_000  # what st.cache_data copies on every hit
