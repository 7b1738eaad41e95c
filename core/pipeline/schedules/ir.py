"""A pipeline schedule as data: for every device, the ordered list of operations it runs.

An operation is (kind, micro-batch, chunk). Kinds follow PyTorch's pipelining vocabulary:
F forward, B full backward, I input-gradient backward, W weight-gradient backward (I and W together
make a split backward), R recompute-forward (inserted before a backward when full recompute is on).
A forward may be fused with the backward right after it (DualPipe's overlapped F&B pair): the pair
starts when both inputs are there and both results leave at its end.
Which global stage a (device, chunk) pair runs is given by the schedule's stage map, so the simulator
never needs to know which schedule it is running.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

F, B, I, W, R = 0, 1, 2, 3, 4  # noqa: E741  (I is PyTorch's name for the input-gradient backward)
KIND_NAMES = "FBIWR"
# B and I are the same step of a micro-batch (the backward that sends its gradient on): one group.
KIND_GROUP = np.array([0, 1, 1, 2, 3], dtype=np.int64)
ROW = 4  # columns of an op row: kind, micro-batch, chunk, fused-with-next (0/1)


def ops(kind: int, micros, chunk: int = 0) -> np.ndarray:
    """Operations of one kind and chunk for the given micro-batches, as rows (kind, micro, chunk, 0)."""
    if isinstance(micros, range):  # np.asarray(range) iterates in Python; arange does not
        micros = np.arange(micros.start, micros.stop, micros.step, dtype=np.int32)
    micros = np.asarray(micros, dtype=np.int32).reshape(-1)
    out = np.zeros((micros.size, ROW), dtype=np.int32)
    out[:, 0] = kind
    out[:, 1] = micros
    out[:, 2] = chunk
    return out


def chain(*parts: np.ndarray) -> np.ndarray:
    """Run the parts one after another."""
    parts = [p for p in parts if len(p)]
    return np.concatenate(parts) if parts else np.empty((0, ROW), dtype=np.int32)


def alternate(*parts: np.ndarray) -> np.ndarray:
    """Interleave equally long parts row by row: a0 b0 a1 b1 ... (the "1F1B" pattern)."""
    n = len(parts[0])
    if any(len(p) != n for p in parts):
        raise ValueError("alternate() needs parts of equal length")
    return np.stack(parts, axis=1).reshape(-1, ROW) if n else np.empty((0, ROW), dtype=np.int32)


_KIND_CODE = np.full(128, -1, dtype=np.int32)
for _code, _letter in enumerate(KIND_NAMES):
    _KIND_CODE[ord(_letter)] = _code


def pattern(kinds: str, chunks: str | int = 0) -> np.ndarray:
    """Ops from a pattern such as pattern("FFFBFB"), pattern("FFIW", "0111") or pattern("F+B", "01").

    Every device works through the micro-batches of each (kind, chunk) in order, so the pattern only
    says what comes next; micro-batch numbers are counted per (kind, chunk) here (B and I share one
    count: both are "the backward" of a micro-batch, and a W takes the micro-batch of its I).
    "F+B" fuses a forward with the backward after it (the "+" takes no chunk digit).
    """
    fused_at = [i - 1 - n for n, i in enumerate(j for j, ch in enumerate(kinds) if ch == "+")]
    kinds = kinds.replace("+", "")
    kind = _KIND_CODE[np.frombuffer(kinds.encode("ascii"), dtype=np.uint8)]
    if isinstance(chunks, int):
        chunk = np.full(kind.size, chunks, dtype=np.int32)
    else:
        chunk = np.frombuffer(chunks.encode("ascii"), dtype=np.uint8).astype(np.int32) - ord("0")
    if chunk.size != kind.size or (kind < 0).any():
        raise ValueError(f"bad pattern {kinds[:20]!r} / {str(chunks)[:20]!r}")
    group = KIND_GROUP[kind] * 16 + chunk
    order = np.argsort(group, kind="stable")
    sorted_group = group[order]
    first = np.searchsorted(sorted_group, sorted_group)  # start of each op's group in sorted order
    micro = np.empty(kind.size, dtype=np.int32)
    micro[order] = np.arange(kind.size) - first
    for c in np.unique(chunk[kind == W]):  # the n-th W of a chunk finishes that chunk's n-th split I
        w, i = (kind == W) & (chunk == c), (kind == I) & (chunk == c)
        if w.sum() > i.sum():
            raise ValueError(f"pattern has more W than I for chunk {c}")
        micro[w] = micro[i][: int(w.sum())]
    fused = np.zeros(kind.size, dtype=np.int32)
    fused[fused_at] = 1
    return np.column_stack([kind, micro, chunk, fused]).astype(np.int32)


def loop_stage_map(p: int, v: int) -> np.ndarray:
    """Megatron-style looping: chunk c of device d is stage c*p + d."""
    return np.arange(v)[None, :] * p + np.arange(p)[:, None]


def v_stage_map(p: int) -> np.ndarray:
    """V shape (ZB-V, DualPipeV): device d holds stages d and 2p-1-d, so the last stage is on device 0."""
    d = np.arange(p)
    return np.stack([d, 2 * p - 1 - d], axis=1)


@dataclass(frozen=True, eq=False)
class Schedule:
    """Per-device operation orders plus the (device, chunk) -> stage map.

    `devices[d]` is an int32 array of rows (kind, micro, chunk, fused). `m` counts micro-batches per iteration;
    micro-batch indices run over all iterations (iteration k uses k*m .. k*m+m-1).
    """

    name: str
    p: int
    v: int
    m: int
    devices: tuple[np.ndarray, ...]
    stage_map: np.ndarray
    iterations: int = 1
    notes: tuple[str, ...] = field(default_factory=tuple)
    stages: int = 0  # stages on a micro-batch's path; 0: one per (device, chunk). DualPipe: p (two copies)

    @property
    def num_stages(self) -> int:
        return self.stages or int(self.stage_map.size)

    @property
    def stages_per_device(self) -> float:
        """Stages of one path per device: a chunk's cost and activations are 1/this of a device's share
        (1F1B 1, interleaved v, V shapes 2, DualPipe 1: each of its two chunks is a full 1/p of the model)."""
        return self.num_stages / self.p

    @property
    def num_ops(self) -> int:
        return sum(len(d) for d in self.devices)

    @property
    def split_backward(self) -> bool:
        return any(bool((d[:, 0] == I).any()) for d in self.devices)

    def flat(self) -> tuple[np.ndarray, ...]:
        """Device, kind, micro, chunk, fused of every op, device-major (each device's ops in its order)."""
        lengths = [len(d) for d in self.devices]
        cols = chain(*self.devices).T.astype(np.intp)  # one pass; intp is what numpy indexes with fastest
        device = np.repeat(np.arange(self.p), lengths)
        return device, cols[0], cols[1], cols[2], cols[3].astype(bool)

    def first_op_of_each_device(self) -> np.ndarray:
        """Flat index of each device's first op (ops are stored device-major)."""
        return np.cumsum([0] + [len(d) for d in self.devices[:-1]])

    def listing(self, device: int) -> list[str]:
        """Human-readable order of one device, e.g. ['F0', 'F1', 'B0', ...] (chunk shown when v > 1)."""
        rows = self.devices[device]
        show_chunk = self.v > 1
        return [f"{KIND_NAMES[k]}{mb}" + (f".{c}" if show_chunk else "") + ("+" if f else "")
                for k, mb, c, f in rows.tolist()]


def with_recompute(s: Schedule) -> Schedule:
    """Full activation recompute: run an R (forward again) right before every backward (B or I)."""
    new = []
    for rows in s.devices:
        back = (rows[:, 0] == B) | (rows[:, 0] == I)
        out = np.empty((len(rows) + int(back.sum()), ROW), dtype=np.int32)
        pos = np.arange(len(rows)) + np.cumsum(back)  # each backward shifts by the R's before it
        out[pos] = rows
        rpos = pos[back] - 1
        out[rpos] = rows[back]
        out[rpos, 0] = R
        out[rpos, 3] = 0
        fused_before = back & np.roll(rows[:, 3] == 1, 1)  # an F fused with this backward now precedes R:
        out[pos[fused_before] - 2, 3] = 0  # the recompute runs between them, so they are no longer a pair
        new.append(out)
    return Schedule(s.name, s.p, s.v, s.m, tuple(new), s.stage_map, s.iterations,
                    s.notes + ("full recompute: an R (recompute forward) runs before each backward",), s.stages)


def repeat_iterations(s: Schedule, iterations: int) -> Schedule:
    """Run a flushed schedule `iterations` times back to back; each device finishes one before the next."""
    if iterations == 1:
        return s
    devices = []
    for rows in s.devices:
        reps = np.tile(rows, (iterations, 1))
        reps[:, 1] += np.repeat(np.arange(iterations, dtype=np.int32) * s.m, len(rows))
        devices.append(reps)
    return Schedule(s.name, s.p, s.v, s.m, tuple(devices), s.stage_map, iterations, s.notes, s.stages)
