"""Reading a PyTorch action table (torch.distributed.pipelining's CSV, one row per rank) into flat arrays, bounded.

An upload is untrusted: every number that would size an array (rows, stages per rank, stage and micro-batch
indices, actions, the text's length) is checked against core.params.upload.LIMITS as the text is read, one cell
at a time, so memory grows with the actions the table holds (five small integers each), never with the largest
index it names. A refusal is an InputError naming the row (1-based line; rank = row - 1) and the limit.

Read: compute actions "{stage}{F|B|I|W}{micro}" and overlapped pairs "({F};{B or I})OVERLAP_F_B" (the forward is
fused with the backward after it, as the simulator times DualPipe's pairs). Skipped: what takes no compute time in
the simulator (SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD), empty cells and "None". A UTF-8
byte-order mark, Windows line ends (CRLF) and quoted cells are accepted, as spreadsheets write them.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass

import numpy as np

from core.errors import InputError
from core.params.upload import LIMITS, TableLimits
from core.pipeline.schedules.ir import B, F, I, W

_KIND = {"F": F, "B": B, "I": I, "W": W}
_TOKEN = re.compile(r"\n|[^,\n]+")  # a line end, or a non-empty cell (empty cells are skipped in C, not Python)
_COMPUTE = re.compile(r"([0-9]+)([FBIW])([0-9]+)")
_OVERLAP = re.compile(r"\((.*)\)OVERLAP_F_B")
_OTHER = re.compile(r"[0-9]+(?:(?:SEND_F|RECV_F|SEND_B|RECV_B)[0-9]+|UNSHARD|RESHARD|REDUCE_GRAD)")
_EXAMPLES = "an action such as 0F1, 3B0, 2I5, 2W5 or (0F7;7B3)OVERLAP_F_B"
_HUGE = 1 << 30  # an index with more digits than any limit (int() of 5,000 digits would raise)


@dataclass(frozen=True, eq=False)
class Actions:
    """A table's compute actions in file order (rank by rank), one entry each; `owned`: each rank's stages."""

    rank: np.ndarray
    stage: np.ndarray
    kind: np.ndarray
    micro: np.ndarray
    fused: np.ndarray  # a forward overlapped with the action after it
    owned: tuple[tuple[int, ...], ...]  # per rank, its stages in increasing order

    @property
    def p(self) -> int:
        return len(self.owned)


def decode(data: str | bytes, limits: TableLimits = LIMITS) -> str:
    """The table's text: at most `limits.bytes` (bytes, or characters when given text), UTF-8, without a BOM."""
    if len(data) > limits.bytes:
        unit = "bytes" if isinstance(data, bytes) else "characters"
        raise InputError(f"action table: {len(data):,} {unit} or more; the upload limit is "
                         f"{limits.bytes // 2**20} MiB ({limits.bytes:,} bytes)")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            row = data.count(b"\n", 0, exc.start) + 1
            raise InputError(f"action table, row {row}: byte 0x{data[exc.start]:02x} is not UTF-8 text (an action "
                             "table is a plain-text CSV)") from None
    return data.removeprefix("\ufeff")


def read_table(data: str | bytes, limits: TableLimits = LIMITS) -> Actions:
    """Every compute action of the table, checked against `limits` before it is stored."""
    text = decode(data, limits)
    flat = array("h")  # rank, stage, kind, micro, fused of each action: 10 bytes an action
    owned: list[set[int]] = []
    row, line_start, n = 0, 0, 0
    for tok in _TOKEN.finditer(text):
        cell = tok.group()
        if cell == "\n":
            row, line_start = row + 1, tok.end()
            continue
        cell = cell.strip()
        if cell.startswith('"') and cell.endswith('"') and len(cell) > 1:
            cell = cell[1:-1].strip()
        if not cell or cell == "None" or _OTHER.fullmatch(cell):
            continue
        where = _Where(text, row, line_start, tok.start())
        if row >= len(owned):
            _new_rank(owned, row, limits, where)
        stages = owned[row]
        for stage, kind, micro, fused in _cell_actions(cell, where, limits):
            if stage not in stages:
                stages.add(stage)
                if len(stages) > limits.stages_per_rank:
                    raise where.error(f"stage {stage} is stage number {len(stages)} of this rank; the simulator "
                                      f"runs at most {limits.stages_per_rank} stages per rank")
            n += 1
            if n > limits.actions:
                raise where.error(f"more than {limits.actions:,} compute actions; the simulator's limit is "
                                  f"{limits.actions:,}")
            flat.extend((row, stage, kind, micro, fused))
    if not owned:
        raise InputError("action table: no actions (expected one CSV row of actions per rank)")
    cols = np.frombuffer(flat, dtype=np.int16).reshape(-1, 5).T.astype(np.int32)
    return Actions(*cols, owned=tuple(tuple(sorted(s)) for s in owned))


@dataclass(frozen=True)
class _Where:
    """Where a cell sits, to name it in a message (the column is counted only then: it costs a scan of the line)."""

    text: str
    row: int
    line_start: int
    at: int

    def error(self, what: str) -> InputError:
        column = self.text.count(",", self.line_start, self.at) + 1
        return InputError(f"action table, row {self.row + 1} (rank {self.row}), column {column}: {what}")


def _new_rank(owned: list[set[int]], row: int, limits: TableLimits, where: _Where) -> None:
    if row >= limits.ranks:
        raise where.error(f"rank {row} is one too many: the simulator runs at most {limits.ranks} ranks (rows "
                          "with actions)")
    if row > len(owned):
        raise InputError(f"action table, row {len(owned) + 1} (rank {len(owned)}): no actions, though a later row "
                         "has some (each rank's row lists its actions)")
    owned.append(set())


def _cell_actions(cell: str, where: _Where, limits: TableLimits) -> list[tuple[int, int, int, int]]:
    """A cell's compute actions (stage, kind, micro, fused-with-next), each index checked against the limits."""
    pair = _OVERLAP.fullmatch(cell)
    parts = [p.strip() for p in pair.group(1).split(";")] if pair else [cell]
    out = []
    for part in parts:
        got = _COMPUTE.fullmatch(part)
        if got is None:
            raise where.error(f"{_show(part)} is not {_EXAMPLES}" + _why(part))
        a, kind, b = got.groups()
        stage, micro = (int(x) if len(x) < 10 else _HUGE for x in (a, b))
        if stage >= limits.stages:
            raise where.error(f"stage {_number(a)} is beyond the simulator's stages 0..{limits.stages - 1} "
                              f"({limits.ranks} ranks x {limits.stages_per_rank} stages each)")
        if micro >= limits.micro_batches:
            raise where.error(f"micro-batch {_number(b)} is beyond the simulator's micro-batches "
                              f"0..{limits.micro_batches - 1}")
        out.append((stage, _KIND[kind], micro, 0))
    if pair and (len(out) != 2 or out[0][1] != F or out[1][1] not in (B, I)):
        raise where.error(f"{_show(cell)}: an OVERLAP_F_B pair is one forward and then one backward (B or I)")
    if pair:
        out[0] = out[0][:3] + (1,)
    return out


def _why(part: str) -> str:
    """Why a cell that looks almost like an action is not one (a sign, a decimal point, a non-ASCII digit)."""
    if part[:1] in ("-", "+") or re.search(r"[FBIW][-+]", part):
        return " (indices are whole numbers from 0, with no sign)"
    if not part.isascii():
        return " (only ASCII digits and the letters F, B, I, W)"
    return ""


def _number(digits: str) -> str:
    return f"{int(digits):,}" if len(digits) < 16 else f"{digits[:8]}... ({len(digits):,} digits)"


def _show(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")
