"""Reading a PyTorch action table (torch.distributed.pipelining's CSV, one row per rank) into flat arrays, bounded.

An upload is untrusted: every number that would size an array (the text's length, rows, stages per rank, stage
and micro-batch indices, actions) is checked against core.params.upload.LIMITS while the text is read, before
anything is sized by it, so memory follows the actions the table holds (a few small integers each, and a few
copies of one row's text), never the largest index it names. A row of plain actions ("0F1,3B0,,2W5") is read
as a whole in numpy; any other row (pairs, bookkeeping actions, quotes) cell by cell. Blank lines and empty
cells are skipped inside the regex engine. A refusal is an InputError naming the row (1-based line; rank =
row - 1), the column and the limit.

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
_BLANK = re.compile(r"[\s,]*")  # blank lines and empty cells: skipped inside the regex engine, not by Python
_CELL = re.compile(r"[^,\s][^,]*")  # a cell from its first visible character: a Python step per cell holding one
# A row of simple actions (with spaces and empty cells), read in numpy; anything else is read cell by cell.
# Possessive (*+): blanks are taken once and never handed back, so a long run of spaces costs linear time.
_ACTION = r"[0-9]{1,4}[FBIW][0-9]{1,4}[ \t]*+"
_PLAIN = re.compile(rf"[ \t,]*+{_ACTION}(?:,[ \t,]*+{_ACTION})*+[ \t,]*+")
_UNQUOTE = str.maketrans("", "", '"\r')
_SKIPPED = re.compile(r"(?:(?<=,)|^)[ \t]*+(?:None|[0-9]+(?:(?:SEND_F|RECV_F|SEND_B|RECV_B)[0-9]+|UNSHARD|RESHARD"
                      r"|REDUCE_GRAD))[ \t]*+(?=,|$)")
_COMPUTE = re.compile(r"([0-9]+)([FBIW])([0-9]+)")
_OVERLAP = re.compile(r"\((.*)\)OVERLAP_F_B")
_OTHER = re.compile(r"[0-9]+(?:(?:SEND_F|RECV_F|SEND_B|RECV_B)[0-9]+|UNSHARD|RESHARD|REDUCE_GRAD)")
_EXAMPLES = "an action such as 0F1, 3B0, 2I5, 2W5 or (0F7;7B3)OVERLAP_F_B"
_KIND_CODE = np.zeros(128, dtype=np.int32)  # ASCII letter -> kind, for a plain row read in numpy
for _letter, _code in _KIND.items():
    _KIND_CODE[ord(_letter)] = _code
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
    rows: list[np.ndarray] = []  # per rank: (actions, 4) stage, kind, micro, fused
    owned: list[set[int]] = []
    n = pos = row = 0
    while True:
        skip = _BLANK.match(text, pos).end()  # blank lines and empty cells, in C
        row += text.count("\n", pos, skip)
        if skip >= len(text):
            break
        start, pos = text.rfind("\n", 0, skip) + 1, text.find("\n", skip)
        pos = len(text) if pos < 0 else pos
        line = _Line(row, text[start:pos])
        if row >= limits.ranks:
            raise line.error(1, f"rank {row} is one too many: the simulator runs at most {limits.ranks} ranks "
                                "(one row each)")
        if row > len(owned):
            raise InputError(f"action table, row {len(owned) + 1} (rank {len(owned)}): no actions, though a later "
                             "row has some (each rank's row lists its actions)")
        got, columns = _read_line(line, limits, limits.actions - n)
        n += len(got)
        rows.append(got)
        owned.append(_stages(got, columns, line, limits))
    while owned and not owned[-1]:  # rows of bookkeeping actions only, after the last rank
        owned.pop(), rows.pop()
    if not owned:
        raise InputError("action table: no actions (expected one CSV row of actions per rank)")
    if not all(owned):
        r = owned.index(set())
        raise InputError(f"action table, row {r + 1} (rank {r}): no compute actions, though a later row has some")
    flat = np.concatenate(rows)
    rank = np.repeat(np.arange(len(rows), dtype=np.int32), [len(x) for x in rows])
    return Actions(rank, *flat.T, owned=tuple(tuple(sorted(s)) for s in owned))


@dataclass(frozen=True)
class _Line:
    """One row of the table, to read and to name in a message."""

    row: int
    text: str

    def error(self, column: int, what: str) -> InputError:
        return InputError(f"action table, row {self.row + 1} (rank {self.row}), column {column}: {what}")


def _read_line(line: _Line, limits: TableLimits, room: int) -> tuple[np.ndarray, np.ndarray]:
    """A row's compute actions (stage, kind, micro, fused) and the column of each; at most `room` of them."""
    plain = _SKIPPED.sub("", line.text.translate(_UNQUOTE))  # bookkeeping cells emptied, in C
    if _PLAIN.fullmatch(plain):  # only simple actions ("0F1, 3B0,,2W5"): read as a whole in numpy
        b = np.frombuffer(plain.encode("ascii"), dtype=np.uint8)
        numbers, starts = _digit_runs(b)
        count = numbers.size // 2
        if count > room:
            raise line.error(1, f"more than {limits.actions:,} compute actions; the simulator's limit")
        got = np.stack([numbers[0::2], _KIND_CODE[b[b > 57]], numbers[1::2], np.zeros(count, np.int32)], axis=1)
        columns = _columns(b, starts[0::2])
    else:
        got, columns = _read_cells(line, limits, room)
    _check_indices(got, columns, line, limits)
    return got, columns


def _digit_runs(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The value and start of every run of ASCII digits in `b` (runs of 1-4 digits, as _PLAIN allows), in order."""
    digit = np.zeros(b.size + 2, dtype=np.int8)  # 1 byte per character: a row of 16 MB of commas stays small
    digit[1:-1] = (b >= 48) & (b <= 57)
    edge = np.diff(digit)
    starts, ends = np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)  # [start, end) of each run
    values = np.zeros(starts.size, dtype=np.int32)
    for k in range(1, 5):
        has = ends - starts >= k
        values[has] += (b[ends[has] - k].astype(np.int32) - 48) * 10 ** (k - 1)
    return values, starts


def _columns(b: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The 1-based CSV column of each action starting at `starts`: commas before it, counted segment by segment."""
    if not starts.size:
        return starts
    between = np.add.reduceat((b == 44).view(np.int8), np.concatenate(([0], starts)), dtype=np.int32)[:-1]
    return np.cumsum(between) + 1


def _read_cells(line: _Line, limits: TableLimits, room: int) -> tuple[np.ndarray, np.ndarray]:
    """A row with pairs, bookkeeping actions, spaces or quotes, one cell at a time."""
    flat, columns = array("h"), array("l")
    column, last = 1, 0
    for tok in _CELL.finditer(line.text):
        column += line.text.count(",", last, tok.start())
        last = tok.start()
        cell = tok.group().rstrip()
        if cell.startswith('"') and cell.endswith('"') and len(cell) > 1:
            cell = cell[1:-1].strip()
        if not cell or cell == "None" or _OTHER.fullmatch(cell):
            continue
        for action in _cell_actions(cell, line, column, limits):
            if len(columns) >= room:
                raise line.error(column, f"more than {limits.actions:,} compute actions; the simulator's limit")
            flat.extend(action)
            columns.append(column)
    got = np.frombuffer(flat, dtype=np.int16).reshape(-1, 4).astype(np.int32)
    return got, np.frombuffer(columns, dtype=columns.typecode)


def _check_indices(got: np.ndarray, columns: np.ndarray, line: _Line, limits: TableLimits) -> None:
    """Stage and micro-batch indices within the simulator's limits (a plain row's 4-digit numbers are checked
    here; a cell read one at a time was checked as it was read)."""
    for field, name, top in ((0, "stage", limits.stages), (2, "micro-batch", limits.micro_batches)):
        bad = np.flatnonzero(got[:, field] >= top)
        if bad.size:
            raise line.error(int(columns[bad[0]]), _beyond(name, f"{int(got[bad[0], field]):,}", limits))


def _beyond(name: str, shown: str, limits: TableLimits) -> str:
    if name == "stage":
        return (f"stage {shown} is beyond the simulator's stages 0..{limits.stages - 1} ({limits.ranks} ranks x "
                f"{limits.stages_per_rank} stages each)")
    return f"micro-batch {shown} is beyond the simulator's micro-batches 0..{limits.micro_batches - 1}"


def _stages(got: np.ndarray, columns: np.ndarray, line: _Line, limits: TableLimits) -> set[int]:
    """The row's stages: at most limits.stages_per_rank (the column named is where one too many first appears)."""
    stages, first = np.unique(got[:, 0], return_index=True)
    if stages.size > limits.stages_per_rank:
        at = np.sort(first)[limits.stages_per_rank]
        raise line.error(int(columns[at]), f"stage {int(got[at, 0])} is stage number {limits.stages_per_rank + 1} "
                                           f"of this rank; the simulator runs at most {limits.stages_per_rank} "
                                           "stages per rank")
    return set(stages.tolist())


def _cell_actions(cell: str, line: _Line, column: int, limits: TableLimits) -> list[tuple[int, int, int, int]]:
    """A cell's compute actions (stage, kind, micro, fused-with-next), each index checked against the limits."""
    pair = _OVERLAP.fullmatch(cell)
    parts = [p.strip() for p in pair.group(1).split(";")] if pair else [cell]
    out = []
    for part in parts:
        got = _COMPUTE.fullmatch(part)
        if got is None:
            raise line.error(column, f"{_show(part)} is not {_EXAMPLES}" + _why(part))
        a, kind, b = got.groups()
        stage, micro = (int(x) if len(x) < 10 else _HUGE for x in (a, b))
        if stage >= limits.stages:
            raise line.error(column, _beyond("stage", _number(a), limits))
        if micro >= limits.micro_batches:
            raise line.error(column, _beyond("micro-batch", _number(b), limits))
        out.append((stage, _KIND[kind], micro, 0))
    if pair and (len(out) != 2 or out[0][1] != F or out[1][1] not in (B, I)):
        raise line.error(column, f"{_show(cell)}: an OVERLAP_F_B pair is one forward and then one backward (B or I)")
    if pair:
        out[0] = out[0][:3] + (1,)
    return out


def _why(part: str) -> str:
    """Why a cell that looks almost like an action is not one (a sign, a decimal point, a non-ASCII digit)."""
    if part[:1] in ("-", "+") or re.search(r"[FBIW][-+]|[0-9]\.[0-9]", part):
        return " (indices are whole numbers from 0, with no sign or decimal point)"
    if not part.isascii():
        return " (only ASCII digits and the letters F, B, I, W)"
    return ""


def _number(digits: str) -> str:
    return f"{int(digits):,}" if len(digits) < 16 else f"{digits[:8]}... ({len(digits):,} digits)"


def _show(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")
