"""The one upload limit and the bounds of an action table (the Pipeline page's upload, `simulate --from-csv`).

An uploaded PyTorch action table is read only up to what the simulator can run, and every size that would make an
array is checked against these bounds while the text is read, before any array exists: a table cannot make the
server allocate more than its own actions need.

UPLOAD_MB is stated here once. Streamlit reads `.streamlit/config.toml` before any app code runs, so its
`server.maxUploadSize` repeats the number; tests/test_trace_limits.py checks the two agree, and that every table
the app exports (each schedule at its largest p, m, v) fits under it and reads back.
Range: at least the largest table the app writes (8.08 MB: interleaved and looped-bfs at p = 64, m = 1,024,
v = 8, MAX_OPS actions of 7-9 characters), at most what MAX_OPS actions can take in the exporter's longest cells
(16 bytes an action: "(511F1023;511B1023)OVERLAP_F_B," is 31 characters for two), so 16 MiB.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.params.pipeline import MAX_OPS, PIPELINE

BYTES_PER_ACTION = 16  # the exporter's longest cell per action (an overlapped pair, 31 characters for two)
UPLOAD_MB = MAX_OPS * BYTES_PER_ACTION // 2**20  # 16: Streamlit's unit is the MiB (maxUploadSize x 1024 x 1024)
UPLOAD_BYTES = UPLOAD_MB * 2**20


@dataclass(frozen=True)
class TableLimits:
    """What one action table may hold: the simulator's own limits (core.params.pipeline), and the upload limit."""

    bytes: int = UPLOAD_BYTES
    ranks: int = int(PIPELINE["p"].hi)  # rows with actions: one rank each
    stages_per_rank: int = int(PIPELINE["v"].hi)
    micro_batches: int = int(PIPELINE["m"].hi)  # micro-batch indices 0 .. micro_batches - 1
    actions: int = MAX_OPS  # compute actions in the whole table

    @property
    def stages(self) -> int:
        """Stage indices 0 .. stages - 1: every rank holds at most stages_per_rank of them."""
        return self.ranks * self.stages_per_rank

    def describe(self) -> str:
        return (f"up to {self.bytes // 2**20} MiB ({self.bytes:,} bytes) of UTF-8 text, {self.ranks} rows (ranks) "
                f"with actions, {self.stages_per_rank} stages per rank (stage indices 0..{self.stages - 1}), "
                f"micro-batch indices 0..{self.micro_batches - 1} and {self.actions:,} compute actions")


LIMITS = TableLimits()
