"""Schedule generators by name. Each is one small function returning a Schedule (data only).

    build("1f1b", p=4, m=8)            -> Schedule with each device's ordered ops
    REGISTRY["zb-h1"].summary          -> one line for menus and help
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.errors import InputError
from core.params.pipeline import MAX_OPS, SCHEDULE_NAMES
from core.pipeline.schedules.bidirectional import dualpipe as two_way_dualpipe  # the name `dualpipe` is a module
from core.pipeline.schedules.controllable import v_half, v_min
from core.pipeline.schedules.dualpipe import dualpipev
from core.pipeline.schedules.flush import gpipe, one_f_one_b
from core.pipeline.schedules.interleaved import interleaved, looped_bfs
from core.pipeline.schedules.ir import Schedule, repeat_iterations, with_recompute
from core.pipeline.schedules.pipedream import pipedream
from core.pipeline.schedules.zero_bubble import zb_h1, zb_h2, zbv


@dataclass(frozen=True)
class Entry:
    make: Callable[..., Schedule]
    summary: str
    chunks: str  # how many chunks per device: "1", "v" or "2"
    split_backward: bool = False  # uses I/W (so t_w matters separately)
    min_m: Callable[[int], int] = lambda p: 1
    bidirectional: bool = False  # two copies of the model, one per direction: its two chunks share stage numbers

    def stages(self, p: int, v: int) -> int:
        """Stages on a micro-batch's path (what per-stage costs and layer splits are given for)."""
        return p if self.bidirectional else p * {"1": 1, "v": v, "2": 2}[self.chunks]


REGISTRY: dict[str, Entry] = {
    "gpipe": Entry(gpipe, "all forwards, then all backwards (GPipe); holds m micro-batches", "1"),
    "1f1b": Entry(one_f_one_b, "one forward, one backward (PipeDream-Flush); same bubble, holds p", "1"),
    "interleaved": Entry(interleaved, "Megatron interleaved 1F1B: v chunks per device, bubble / v", "v",
                         min_m=lambda p: p),
    "looped-bfs": Entry(looped_bfs, "GPipe chunk by chunk over v looped chunks (PyTorch LoopedBFS)", "v"),
    "zb-h1": Entry(zb_h1, "Zero Bubble H1: W's fill the drain; 1F1B's memory", "1", True),
    "zb-h2": Entry(zb_h2, "Zero Bubble H2: extra warm-up too; zero bubble at 2p-1 held", "1", True,
                   min_m=lambda p: 1),
    "zbv": Entry(zbv, "Zero Bubble V: two chunks in a V shape; 1F1B's memory", "2", True),
    "v-half": Entry(v_half, "V-Half (controllable memory): V shape holding about half of 1F1B's activations", "2",
                    True),
    "v-min": Entry(v_min, "V-Min (controllable memory): V shape holding about a third of 1F1B's activations", "2",
                   True),
    "dualpipev": Entry(dualpipev, "DeepSeek DualPipeV: V shape, overlapped F&B pairs", "2", True,
                       min_m=lambda p: 2 * p),
    "dualpipe": Entry(two_way_dualpipe, "DeepSeek DualPipe: both directions at once, two parameter copies, overlapped "
                      "F&B pairs (PyTorch cannot run it: its stages form one chain)", "2", True,
                      min_m=lambda p: 2 * p, bidirectional=True),
    "pipedream": Entry(pipedream, "asynchronous 1F1B, no flush: bubble once, stale weights", "1"),
}
assert tuple(REGISTRY) == SCHEDULE_NAMES


def chunks_per_device(name: str, v: int) -> int:
    return {"1": 1, "v": v, "2": 2}[REGISTRY[name].chunks]


def stages_of(name: str, p: int, v: int) -> int:
    """Stages on one micro-batch's path: p x chunks, except DualPipe's two directions share p stages."""
    return REGISTRY[name].stages(p, v)


def estimated_ops(name: str, p: int, m: int, v: int, iterations: int = 1, recompute: bool = False) -> int:
    """Operation count before building anything, to refuse oversized requests up front."""
    per_mb_stage = 3 if REGISTRY[name].split_backward else 2
    return stages_of(name, p, v) * m * iterations * (per_mb_stage + int(recompute))


def build(name: str, p: int, m: int, v: int = 2, iterations: int = 1, recompute: bool = False) -> Schedule:
    """The named schedule for p devices and m micro-batches (per iteration), checked and capped."""
    if name not in REGISTRY:
        raise InputError(f"unknown schedule {name[:40]!r}; choose one of {', '.join(REGISTRY)}")
    for label, value in (("p", p), ("m", m), ("v", v), ("iterations", iterations)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"{label} must be a whole number >= 1, got {value!r}")
    entry = REGISTRY[name]
    if m < entry.min_m(p):
        raise InputError(f"{name} needs m >= {entry.min_m(p)} for p = {p}; got m = {m}")
    n = estimated_ops(name, p, m, v, iterations, recompute)
    if n > MAX_OPS:
        raise InputError(f"{name} with p={p}, m={m}, v={v}, iterations={iterations} is {n:,} operations; "
                         f"the limit is {MAX_OPS:,} (lower m, v or iterations)")
    if name == "pipedream":
        s = pipedream(p, m, iterations=iterations)
    else:
        s = repeat_iterations(entry.make(p, m, v), iterations)
    return with_recompute(s) if recompute else s
