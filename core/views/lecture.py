"""The answers of the Lecture page's questions, each assembled from the engine's own functions.

Nothing here is a new formula: an answer is the closed form from core.pipeline.formulas, core.memory.states
or core.cost.comm evaluated at the question's numbers, set beside what the pipeline simulator measures for the same
numbers. A lecturer who moves a slider gets an answer that is computed, never typed in, and the
simulation checks the closed form in front of the class.

Inputs are checked against core.params.lecture.LECTURE (model sizes arrive in billions of parameters,
idle shares in percent, as a lecture states them); results are small frozen dataclasses of plain numbers
and short arrays, cheap to cache and to pickle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from core.cost import comm
from core.memory import device_activations, fit, per_gpu
from core.memory import states as memory
from core.params.lecture import LECTURE, M_MAX
from core.params.memory import RECOMPUTE_MODES
from core.pipeline import formulas
from core.pipeline.result import PipelineParams, simulate
from core.pipeline.schedules.ir import F

BILLION = 1e9
PERCENT = 100.0
TOLERANCE = 1e-12  # a simulated share equal to the target up to rounding counts as meeting it
CURVE_POINTS = 9  # simulated markers on the bubble-versus-m figure
CURVE_ND_MAX = 1 << 12  # right end of the memory-versus-N_d figure (further if the answer lies beyond)


def _get(key: str, value):
    """`value` checked against the lecture spec `key` (InputError with the spec's message otherwise)."""
    return LECTURE[key].parse(value)


def _gpipe(p: int, m: int):
    return simulate(PipelineParams(schedule="gpipe", p=p, m=m))


def _timeline(schedule: str, p: int, m: int):
    return simulate(PipelineParams(schedule=schedule, p=p, m=m)).timeline


def simulable(m: int) -> bool:
    """Whether the simulator takes this many micro-batches (it refuses more than core.params.pipeline allows)."""
    return 1 <= m <= M_MAX


# --- exercise 1: micro-batches for a bubble of at most X % -----------------------------------------------


@dataclass(frozen=True)
class MicrobatchAnswer:
    p: int
    target: float  # idle share, 0..1
    m: int  # smallest m whose GPipe idle share is at most the target
    m_before: int | None  # m - 1, the last m that misses the target (None when m = 1)
    formula_at_m: float
    formula_before: float | None  # at m - 1 (None when m = 1)
    simulated_at_m: float | None  # None when m is beyond the simulator's range
    simulated_before: float | None
    verified: bool | None  # the simulation agrees: share(m) <= target < share(m-1); None if not simulated
    curve_m: np.ndarray  # m values of the closed-form curve
    curve_share: np.ndarray
    points_m: np.ndarray  # m values that were simulated
    points_share: np.ndarray
    efficiency_at_m: float  # m/(m+p-1): the busy share at the answer
    m_under: int  # smallest m strictly under the target (the module's "under 5 %" wording)
    rule_m: int  # GPipe's rule of thumb, m = 4p
    rule_share: float  # the closed-form idle share there
    rule_simulated: float | None  # and the simulated one (None beyond the simulator's range)


def microbatches_for_idle(p: int, idle_pct: float) -> MicrobatchAnswer:
    """Exercise 1: the smallest m with a GPipe bubble of at most `idle_pct` % (and strictly under it, the
    module's step-2 wording: they differ only where the target is hit exactly), checked by simulation."""
    p, idle = _get("e1_p", p), _get("e1_idle", idle_pct)
    target = idle / PERCENT
    m = formulas.min_microbatches(p, target, strict=False)
    rule = formulas.gpipe_rule_of_thumb(p)
    formula_at = formulas.gpipe_bubble_share(p, m)
    formula_before = formulas.gpipe_bubble_share(p, m - 1) if m > 1 else None
    sim_at = _gpipe(p, m).timeline.bubble_fraction if simulable(m) else None
    sim_before = _gpipe(p, m - 1).timeline.bubble_fraction if m > 1 and simulable(m - 1) else None
    verified = None
    if sim_at is not None:
        verified = sim_at <= target + TOLERANCE and (sim_before is None or sim_before > target + TOLERANCE)
    top = int(min(max(2 * m, 16, 2 * rule), M_MAX)) if simulable(m) else int(max(2 * m, 2 * rule))
    curve_m = np.unique(np.round(np.geomspace(1, top, 200)).astype(np.int64))
    marks = np.unique(np.concatenate([np.round(np.geomspace(1, min(top, M_MAX), CURVE_POINTS)).astype(np.int64),
                                      [m] if simulable(m) else []])).astype(np.int64)
    return MicrobatchAnswer(
        p=p, target=target, m=m, m_before=m - 1 if m > 1 else None, formula_at_m=formula_at,
        formula_before=formula_before,
        simulated_at_m=sim_at, simulated_before=sim_before, verified=verified,
        curve_m=curve_m, curve_share=np.asarray(formulas.gpipe_bubble_share(p, curve_m), dtype=float),
        points_m=marks, points_share=np.array([_gpipe(p, int(k)).timeline.bubble_fraction for k in marks]),
        efficiency_at_m=formulas.gpipe_efficiency(p, m), m_under=formulas.min_microbatches(p, target, strict=True),
        rule_m=rule, rule_share=formulas.gpipe_bubble_share(p, rule),
        rule_simulated=_gpipe(p, rule).timeline.bubble_fraction if simulable(rule) else None,
    )


# --- exercise 2: which ZeRO stage can ever fit ---------------------------------------------------------------


@dataclass(frozen=True)
class FitAnswer:
    psi: float  # parameters
    gpu_mem_gb: float
    usable: float  # bytes
    smallest_nd: dict[int, int | None]  # stage -> smallest N_d that fits (None: never)
    floor: dict[int, float]  # stage -> bytes it can never go below
    states_at: dict[int, float]  # stage -> bytes per GPU at ZeRO-3's smallest N_d (or N_d = 1)
    states_before: float | None  # ZeRO-3 at one rank fewer (shows the boundary)
    nd_before: int | None  # that rank count
    nd_shown: int
    curve: pd.DataFrame  # per-GPU totals of every stage against N_d (core.memory.curve_vs_nd)
    limits: dict[int, float]  # most each stage can save against DP (max_reduction)


def zero_fit(psi_billion: float, gpu_mem_gb: float) -> FitAnswer:
    """Exercise 2: the smallest N_d at which each stage fits the model states, and each stage's floor."""
    psi = _get("e2_psi", psi_billion) * BILLION
    mem = _get("e2_mem", gpu_mem_gb)
    usable = float(fit.usable_bytes(mem))
    smallest = {s: fit.smallest_nd(psi, s, mem) for s in range(4)}
    floors = {s: float(memory.floor_bytes(psi, s)) for s in range(4)}
    nd = smallest[3] or 1
    states = {s: float(memory.model_states(psi, nd, s).total) for s in range(4)}
    before = float(memory.model_states(psi, nd - 1, 3).total) if nd > 1 else None
    curve = memory.curve_vs_nd(psi, max(CURVE_ND_MAX, 4 * nd), 64)
    return FitAnswer(psi, mem, usable, smallest, floors, states, before, nd - 1 if nd > 1 else None, nd, curve,
                     memory.max_reduction())


# --- exercise 3 and quiz 3: what 1F1B changes ---------------------------------------------------------------


@dataclass(frozen=True)
class ScheduleMemory:
    schedule: str
    held_stage0: float  # micro-batches whose activations stage 0 holds at its peak
    held_max: float  # the most any stage holds
    held_gb: float  # stage 0's peak in GB, at the given GB per micro-batch
    bubble: float  # idle share of the timeline
    makespan: float
    curve_time: np.ndarray  # stage 0: held micro-batches after each event
    curve_held: np.ndarray


@dataclass(frozen=True)
class OneFOneBAnswer:
    p: int
    m: int
    gb_per_microbatch: float
    gpipe: ScheduleMemory
    one_f_one_b: ScheduleMemory
    saving_gb: float


def _memory_of(schedule: str, p: int, m: int, gb: float) -> ScheduleMemory:
    tl = _timeline(schedule, p, m)
    curve = tl.memory_curve()
    first = curve["device"] == 0
    time, held = curve["time"][first], curve["held"][first]
    # Several events at one instant (a backward frees, the next forward takes): keep the last state only.
    last = np.r_[time[1:] != time[:-1], True]
    held0 = float(tl.peak_inflight[0])
    return ScheduleMemory(schedule, held0, float(tl.peak_inflight.max()), held0 * gb, tl.bubble_fraction,
                          tl.makespan, np.r_[0.0, time[last]], np.r_[0.0, held[last]])


def price_1f1b(p: int, m: int, gb_per_microbatch: float = 1.0) -> OneFOneBAnswer:
    """Exercise 3: stage 0's peak activations under GPipe and 1F1B (simulated), and both bubbles."""
    p, m, gb = _get("e3_p", p), _get("e3_m", m), _get("e3_gb", gb_per_microbatch)
    return _compare(p, m, gb)


def _compare(p: int, m: int, gb: float) -> OneFOneBAnswer:
    g, o = _memory_of("gpipe", p, m, gb), _memory_of("1f1b", p, m, gb)
    return OneFOneBAnswer(p, m, gb, g, o, g.held_gb - o.held_gb)


# --- exercise 4: converting between bubble conventions ---------------------------------------------------------


@dataclass(frozen=True)
class ConventionAnswer:
    p: int
    m: int
    relative: float  # (p-1)/m: bubble relative to ideal time
    share: float  # the same bubble as an idle share of the timeline, x / (1 + x)
    formula_share: float  # (p-1)/(m+p-1) written directly
    simulated_share: float
    simulated_relative: float
    overstatement: float  # (p-1)/m over the idle share, minus one (seed 002: 37.5 % at p = 4, m = 8)
    simulated_overstatement: float
    efficiency: float  # m/(m+p-1)


def convert_conventions(p: int, m: int) -> ConventionAnswer:
    """Exercise 4: (p-1)/m turned into an idle share, beside the closed form and the simulation, and how much
    the quoted number overstates the idle share."""
    p, m = _get("e4_p", p), _get("e4_m", m)
    f, _ = formulas.bubble_formula("gpipe", p, m)
    tl = _gpipe(p, m).timeline
    return ConventionAnswer(p, m, f.relative, formulas.share_from_relative(f.relative), f.fraction,
                            tl.bubble_fraction, tl.bubble_vs_ideal, formulas.overstatement(f.fraction),
                            formulas.overstatement(tl.bubble_fraction), formulas.gpipe_efficiency(p, m))


# --- checkpoint quiz ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForwardSlots:
    p: int
    m: int
    slots: float  # time until the last forward leaves the pipeline, in forward times
    makespan_slots: float  # makespan in (t_f + t_b) units: the backward phase takes as many slots
    first_exit: float  # when micro-batch 0 leaves the last stage, in forward times


def forward_slots(p: int, m: int) -> ForwardSlots:
    """Quiz 1: the GPipe forward phase measured on the simulated timeline (t_f = 1)."""
    p, m = _get("q_p", p), _get("q_m", m)
    prm = PipelineParams(schedule="gpipe", p=p, m=m)
    tl = simulate(prm).timeline
    fwd = tl.kind == F
    last_stage_first = fwd & (tl.stage == tl.stage.max()) & (tl.micro == 0)
    return ForwardSlots(p, m, float(tl.end[fwd].max()) / prm.tf, tl.makespan / (prm.tf + prm.tb),
                        float(tl.end[last_stage_first].max()) / prm.tf)


@dataclass(frozen=True)
class MoreMicrobatches:
    p: int
    m_before: int
    m_after: int
    bubble_before: float
    bubble_after: float
    held_before: float  # GPipe, stage 0
    held_after: float
    rule_m: int  # GPipe's rule of thumb m = 4p
    rule_share: float  # the closed-form idle share there


def more_microbatches(p: int, m_before: int, m_after: int) -> MoreMicrobatches:
    """Quiz 2 / recall 6: what raising m does to the GPipe bubble and to stage 0's held activations."""
    p = _get("r6_p", p)
    m0, m1 = _get("r6_m0", m_before), _get("r6_m1", m_after)
    a, b = _gpipe(p, m0).timeline, _gpipe(p, m1).timeline
    rule = formulas.gpipe_rule_of_thumb(p)
    return MoreMicrobatches(p, m0, m1, a.bubble_fraction, b.bubble_fraction,
                            float(a.peak_inflight[0]), float(b.peak_inflight[0]), rule,
                            formulas.gpipe_bubble_share(p, rule))


def quiz_microbatches(p: int, m: int) -> MoreMicrobatches:
    """Quiz 2 at the quiz's (p, m): m against 2m micro-batches."""
    p, m = _get("q_p", p), _get("q_m", m)
    return more_microbatches(p, m, 2 * m)


def quiz_1f1b(p: int, m: int) -> OneFOneBAnswer:
    """Quiz 3 at the quiz's (p, m), activations counted in micro-batches (1 unit each)."""
    return _compare(_get("q_p", p), _get("q_m", m), 1.0)


@dataclass(frozen=True)
class StageContents:
    psi: float
    nd: int
    rows: list[dict]  # per stage: label, bytes of each component, which are sharded, total
    volumes: list[dict]  # per stage: collectives, volume in Psi, bytes sent per rank
    stage3_over_dp: float  # ZeRO-3's volume relative to plain data parallelism (1.5)
    units_note: str  # Psi counts values here; the chapter writes "2 Psi bytes"


def zero_stages(psi_billion: float, nd: int, key_psi: str = "q_psi", key_nd: str = "q_nd") -> StageContents:
    """Quiz 4 and 5: what each stage shards (bytes per GPU) and what it communicates per step."""
    psi, nd = _get(key_psi, psi_billion) * BILLION, _get(key_nd, nd)
    rows = []
    for s in range(4):
        st = memory.model_states(psi, nd, s)
        sharded = [c for c in memory.COMPONENTS if s >= memory.SHARDED_FROM[c]]
        rows.append({"stage": s, "label": memory.STAGE_LABELS[s], "title": memory.stage_title(s), "sharded": sharded,
                     **{c: float(getattr(st, c)) for c in memory.COMPONENTS}, "total": float(st.total)})
    table = comm.zero_comm_table(psi, nd)
    volumes = table[["stage_label", "collectives", "volume [x Psi]", "sent per rank [bytes]"]].to_dict("records")
    ratio = float(comm.zero_volume_multiple(3) / comm.zero_volume_multiple(0))
    return StageContents(psi, nd, rows, volumes, ratio, comm.volume_units_note())


# --- active recall (seed 002) ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeeperPipeline:
    m: int
    p_before: int
    p_after: int
    bubble_before: float
    bubble_after: float
    boundaries_before: int  # stage-to-stage hand-offs per micro-batch and direction
    boundaries_after: int


def deeper_pipeline(p_before: int, p_after: int, m: int) -> DeeperPipeline:
    """Recall 2: the same m on a deeper pipeline, simulated, and how many stage boundaries each has."""
    p0, p1, m = _get("r2_p0", p_before), _get("r2_p1", p_after), _get("r2_m", m)
    a, b = _gpipe(p0, m), _gpipe(p1, m)
    return DeeperPipeline(m, p0, p1, a.timeline.bubble_fraction, b.timeline.bubble_fraction,
                          a.schedule.num_stages - 1, b.schedule.num_stages - 1)


@dataclass(frozen=True)
class StatesWithActivations:
    psi: float
    n: int
    usable: float  # bytes of one GPU
    heads: int  # h / 128
    states: dict[int, float]  # stage -> model-state bytes per GPU
    activations: dict[str, float]  # recompute mode -> bytes of one micro-batch through all L layers (no pipeline)
    totals: dict[int, dict[str, float]]  # stage -> mode -> states + activations
    fits: dict[int, dict[str, bool]]


HEAD_SIZE = 128  # the head size the recall question assumes (heads = h / 128)


def states_with_activations(psi_billion: float, n: int, mem_gb: float, hidden: int, layers: int, seq: int,
                            micro_batch_size: int) -> StatesWithActivations:
    """Recall 1 with activations on: ZeRO-1 and ZeRO-3 model states per GPU plus the activations of one
    micro-batch (Korthikanti et al., no pipeline, no tensor parallelism) in each recompute mode, against the GPU."""
    psi, n = _get("r1_psi", psi_billion) * BILLION, _get("r1_n", n)
    mem, h, L = _get("r1_mem", mem_gb), _get("r1_hidden", hidden), _get("r1_layers", layers)
    s, b = _get("r1_seq", seq), _get("r1_mb", micro_batch_size)
    heads = max(1, h // HEAD_SIZE)
    usable = float(fit.usable_bytes(mem))
    # the one memory function (core.memory.per_gpu), as the ZeRO page and the planner ask it: one stage, one
    # micro-batch, no vocabulary; model states on the GPU and the activations (the course's two terms)
    model = per_gpu.ModelMemory(dense_params=psi, layers=L, hidden=h, heads=heads, seq=s)
    stages = per_gpu.Layout(d=n, zero=np.array([1, 3]))
    states = dict(zip((1, 3), per_gpu.model_state_parts(per_gpu.MemoryConfig(model, stages)).states_on_gpu.tolist(),
                      strict=True))
    acts = {mode: float(device_activations.activation_bytes(per_gpu.MemoryConfig(
        model, per_gpu.Layout(), per_gpu.Training(micro_batch_size=b, recompute=mode)))[0]) for mode in RECOMPUTE_MODES}
    totals = {st: {mode: states[st] + a for mode, a in acts.items()} for st in states}
    fits = {st: {mode: bool(fit.fits(x, usable)) for mode, x in row.items()} for st, row in totals.items()}
    return StatesWithActivations(psi, n, usable, heads, states, acts, totals, fits)


# --- ZeRO's ceilings (quiz 4, and the floors on the ZeRO page) ---------------------------------------------
