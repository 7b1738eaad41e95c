"""Per-stage reality: the layers each pipeline stage holds, and what the embedding (first stage) and the
output layer + loss (last stage) add, as the simulator's per-stage time factors and activation weights.

Stages are the S stages on a micro-batch's path (p for 1F1B, p*v interleaved, 2p for V shapes, p for
DualPipe). Time factors are relative to an equal stage (L/S layers, what t_f and t_b are given for,
scaled by the schedule's chunk size); activation weights are in micro-batches of one device's share of
layers (L/p), the unit of `peak_activation`. The embedding and the output layer are given in layer
equivalents (e.g. the output layer's forward is about V/(12h) layers of time for vocabulary V and hidden
size h; its fp32 logits can weigh several layers of activations): the cost model decides the numbers,
these functions only place them. The planner uses the same functions, so both sides cost stages alike.
"""

from __future__ import annotations

from core.errors import InputError


def split_layers(layers: int, stages: int, first: int = 0, last: int = 0) -> tuple[int, ...]:
    """Layers per stage, Megatron-LM style: `first` / `last` layers on the first / last stage (0: not set,
    as --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers), the rest evenly.

    Where the rest does not divide evenly, Megatron-LM refuses; here the extra layers go to the middle
    stages nearest the centre (say so with `split_note`), so a slider never lands on an error.
    """
    if stages < 1 or layers < 0 or first < 0 or last < 0:
        raise InputError("layers, stages and first/last-stage layers must be non-negative (stages >= 1)")
    if stages == 1:
        if (first and first != layers) or (last and last != layers):
            raise InputError(f"one stage holds all {layers} layers; first/last-stage layers cannot differ",
                             keys=("first_stage_layers", "last_stage_layers"))
        return (layers,)
    fixed = [first or None] + [None] * (stages - 2) + [last or None]
    rest = layers - sum(x for x in fixed if x)
    free = [i for i, x in enumerate(fixed) if x is None]
    if rest < 0 or (rest and not free):
        raise InputError(f"first/last-stage layers ({first}, {last}) exceed the {layers} layers"
                         if rest < 0 else f"first + last = {first + last} layers, but there are {layers}",
                         keys=("first_stage_layers", "last_stage_layers"))
    if not free:
        return tuple(fixed)
    base, extra = divmod(rest, len(free))
    centre = (stages - 1) / 2
    nearest = sorted(free, key=lambda i: (abs(i - centre), i))[:extra]
    for i in free:
        fixed[i] = base + (1 if i in nearest else 0)
    return tuple(fixed)


def split_note(layers: int, stages: int, first: int = 0, last: int = 0) -> str:
    """What Megatron-LM would say about this split ("" when it takes it as it is)."""
    free = stages - (first > 0) - (last > 0) if stages > 1 else 0
    rest = layers - first - last
    if stages > 1 and free and rest % free:
        return (f"{rest} layers do not split evenly over {free} stages: the extra layers go to the middle stages "
                "here; Megatron-LM would refuse (set first/last-stage layers, or list every stage)")
    return ""


def check_split(split: tuple[float, ...], stages: int) -> tuple[int, ...]:
    """A listed split (layers per stage) checked against the schedule's number of stages."""
    if len(split) != stages:
        raise InputError(f"layers-per-stage lists {len(split)} stage(s), but this schedule has {stages} stages on "
                         "a micro-batch's path (p x chunks; DualPipe: p)", keys=("layers_per_stage",))
    if any(not float(x).is_integer() or x < 0 for x in split):
        raise InputError("layers-per-stage: every stage holds a whole number of layers (0 or more)",
                         keys=("layers_per_stage",))
    if sum(split) == 0:
        raise InputError("layers-per-stage: at least one layer in total", keys=("layers_per_stage",))
    return tuple(int(x) for x in split)


def time_factors(split: tuple[int, ...], embed: float = 0.0, head: float = 0.0) -> tuple[float, ...]:
    """Each stage's time relative to an equal stage (L/S layers): layers, plus the embedding on the
    first stage and the output layer + loss on the last (layer equivalents)."""
    work = _with_ends(split, embed, head)
    unit = sum(split) / len(split)
    return tuple(w / unit for w in work)


def memory_weights(split: tuple[int, ...], p: int, embed: float = 0.0, head: float = 0.0) -> tuple[float, ...]:
    """One micro-batch's activations on each stage, in micro-batches of one device's share (L/p layers)."""
    work = _with_ends(split, embed, head)
    unit = sum(split) / p
    return tuple(w / unit for w in work)


def balanced_first_last(layers: int, stages: int, embed: float = 0.0, head: float = 0.0) -> tuple[int, int]:
    """First- and last-stage layer counts (each >= 1) that make the slowest stage fastest when the embedding
    and the output layer cost `embed` and `head` layer equivalents, with the middle stages split evenly
    (so Megatron-LM takes it). (0, 0) when there is nothing to choose (fewer than 2 stages or layers)."""
    if stages < 2 or layers < stages:
        return 0, 0
    middle = stages - 2
    targets = sorted({k + e for k in range(1, layers + 1) for e in (0.0, embed, head)})
    for t in targets:  # the smallest slowest-stage time that some split reaches
        f_max, l_max, cap = int(t - embed + 1e-9), int(t - head + 1e-9), int(t + 1e-9)
        if f_max < 1 or l_max < 1:
            continue
        if middle:
            mid = max(0, -(-(layers - f_max - l_max) // middle))  # each middle stage, rounded up
            if mid > cap or layers - mid * middle < 2:
                continue
            ends = layers - mid * middle
        else:
            ends = layers
        if ends > f_max + l_max:
            continue
        first = min(f_max, max(1, ends - l_max, (ends + 1) // 2 if embed <= head else ends // 2))
        return first, ends - first
    return 0, 0


def _with_ends(split: tuple[int, ...], embed: float, head: float) -> list[float]:
    work = [float(x) for x in split]
    work[0] += embed
    work[-1] += head
    return work
