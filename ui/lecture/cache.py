"""Cached core calls of the Lecture page: one wrapper per question (core.views.lecture does the work).

Arguments are the question's plain numbers (what the sliders return), so each question caches on its own
and moving one slider recomputes one answer. Results are small frozen dataclasses (a few short arrays).
"""

from __future__ import annotations

from core.views import lecture
from ui.shared.cache import cached


@cached(max_entries=64)
def microbatches(p: int, idle_pct: float) -> lecture.MicrobatchAnswer:
    return lecture.microbatches_for_idle(p, idle_pct)


@cached(max_entries=64)
def zero_fit(psi_billion: float, gpu_mem_gb: float) -> lecture.FitAnswer:
    return lecture.zero_fit(psi_billion, gpu_mem_gb)


@cached(max_entries=64)
def price_1f1b(p: int, m: int, gb: float) -> lecture.OneFOneBAnswer:
    return lecture.price_1f1b(p, m, gb)


@cached(max_entries=64)
def conventions(p: int, m: int) -> lecture.ConventionAnswer:
    return lecture.convert_conventions(p, m)


@cached(max_entries=64)
def forward_slots(p: int, m: int) -> lecture.ForwardSlots:
    return lecture.forward_slots(p, m)


@cached(max_entries=64)
def quiz_microbatches(p: int, m: int) -> lecture.MoreMicrobatches:
    return lecture.quiz_microbatches(p, m)


@cached(max_entries=64)
def quiz_1f1b(p: int, m: int) -> lecture.OneFOneBAnswer:
    return lecture.quiz_1f1b(p, m)


@cached(max_entries=64)
def zero_stages(psi_billion: float, nd: int, key_psi: str = "q_psi", key_nd: str = "q_nd") -> lecture.StageContents:
    return lecture.zero_stages(psi_billion, nd, key_psi, key_nd)


@cached(max_entries=64)
def deeper_pipeline(p_before: int, p_after: int, m: int) -> lecture.DeeperPipeline:
    return lecture.deeper_pipeline(p_before, p_after, m)


@cached(max_entries=64)
def more_microbatches(p: int, m_before: int, m_after: int) -> lecture.MoreMicrobatches:
    return lecture.more_microbatches(p, m_before, m_after)


@cached(max_entries=64)
def states_with_activations(psi_billion: float, n: int, mem_gb: float, hidden: int, layers: int, seq: int,
                            mb: int) -> lecture.StatesWithActivations:
    return lecture.states_with_activations(psi_billion, n, mem_gb, hidden, layers, seq, mb)
