"""One upload limit, every export imports again, and crafted tables are refused cheaply (issue 24, item 3).

- core.params.upload.UPLOAD_MB is the only statement of the limit: .streamlit/config.toml's server.maxUploadSize
  repeats it (Streamlit reads that file before app code runs) and must agree.
- Every action table the app exports (each schedule at its largest p, m, v) fits under it and reads back through
  the CLI (`simulate --from-csv --json`) and the Pipeline page's upload with the original makespan and bubble.
- A crafted table is refused with one line naming the row and the limit, before any array is sized by it: the
  issue's 0.97 MB table (one rank, 120,000 stages, micro-batch 1023) took 4-34 s and 6 GB; here it must take
  under 10 s and 600 MB in the CLI, and stay small on the page.
"""

import json
import subprocess
import sys
import time
import tomllib
import tracemalloc

import pytest

from core.errors import InputError
from core.params.pipeline import PIPELINE, SCHEDULE_NAMES
from core.params.upload import LIMITS, UPLOAD_BYTES, UPLOAD_MB
from core.pipeline.action_table import read_table
from core.pipeline.result import PipelineParams, simulate
from core.pipeline.trace_export import pytorch_actions_csv
from core.pipeline.trace_import import simulate_actions
from tests.conftest import ROOT
from tests.test_page_pipeline import run

LARGEST = {"p": int(PIPELINE["p"].hi), "m": int(PIPELINE["m"].hi), "v": 8}  # p x m x v x 2 = the 1,048,576-op limit
NO_TABLE = ("pipedream", "dualpipe")  # asynchronous, or every stage on two ranks: PyTorch has no table for them


def test_one_upload_limit_in_core_and_in_streamlit_config():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == UPLOAD_MB == 16
    assert UPLOAD_BYTES == LIMITS.bytes == 16 * 1024 * 1024  # Streamlit counts maxUploadSize x 1024 x 1024
    hardening = (ROOT / "docs" / "hardening.md").read_text()  # the README's "Hardening and scaling", moved
    assert f"{UPLOAD_MB} MiB" in hardening and "server.maxUploadSize" in hardening


@pytest.fixture(scope="module")
def exports():
    """Each exporting schedule at its largest p, m, v: (its table's bytes, makespan, bubble). ~10 s in all."""
    out = {}
    for name in SCHEDULE_NAMES:
        if name in NO_TABLE:
            continue
        result = simulate(PipelineParams(schedule=name, **LARGEST))
        tl = result.timeline
        out[name] = (pytorch_actions_csv(result.schedule).encode(), tl.makespan, tl.bubble_fraction)
    return out


def test_the_schedules_without_a_table_say_why():
    for name in NO_TABLE:
        with pytest.raises(InputError, match="torch.distributed.pipelining"):
            pytorch_actions_csv(simulate(PipelineParams(schedule=name, p=4, m=8)).schedule)


@pytest.mark.parametrize("name", [n for n in SCHEDULE_NAMES if n not in NO_TABLE])
def test_every_export_at_its_largest_size_imports_again_through_the_cli(name, exports, tmp_path):
    data, makespan, bubble = exports[name]
    assert len(data) <= UPLOAD_BYTES
    path = tmp_path / f"{name}.csv"
    path.write_bytes(data)
    out = subprocess.run([sys.executable, "-m", "core", "simulate", "--from-csv", str(path), "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["makespan"] == pytest.approx(makespan, rel=1e-12)
    assert got["bubble_fraction"] == pytest.approx(bubble, rel=1e-12)
    assert (got["params"]["p"], got["params"]["m"]) == (LARGEST["p"], LARGEST["m"])


@pytest.mark.parametrize("name", [n for n in SCHEDULE_NAMES if n not in NO_TABLE])
def test_every_export_at_its_largest_size_imports_again_through_the_page(name, exports):
    data, makespan, bubble = exports[name]
    at = run()
    at.file_uploader(key="actions_csv").upload(f"{name}.csv", data, "text/csv").run()
    assert not at.exception and not at.error
    shown = [m.value for m in at.metric]
    assert f"{makespan:,.4g}" in shown and f"{100 * bubble:.2f} %" in shown
    assert any(f"{name}.csv: p = {LARGEST['p']} ranks, m = {LARGEST['m']} micro-batches" in c.value
               for c in at.caption)


def test_the_largest_export_is_the_interleaved_table_at_8_08_mb(exports):
    sizes = {name: len(data) for name, (data, _, _) in exports.items()}
    assert max(sizes, key=sizes.get) in ("interleaved", "looped-bfs")
    assert max(sizes.values()) == 8_075_264 < UPLOAD_BYTES


ISSUE_TABLE = ",".join([f"{s}F0" for s in range(119_999)] + ["119999F1023"])[:970_000] + "\n"


@pytest.mark.parametrize("table,needle", [
    (ISSUE_TABLE, "row 1 (rank 0), column 4097: stage 4,096 is beyond the simulator's stages 0..4095"),
    (",".join(f"{s}F0" for s in range(65)), "row 1 (rank 0), column 65: stage 64 is stage number 65 of this rank; "
                                            "the simulator runs at most 64 stages per rank"),
    ("0F0,0B0\n" * 100_000, "row 65 (rank 64), column 1: rank 64 is one too many: the simulator runs at most 64"),
    ("99999999999999999999F0,0B0\n", "column 1: stage 99999999... (20 digits) is beyond"),
    ("0F0,0B1024\n", "column 2: micro-batch 1,024 is beyond the simulator's micro-batches 0..1023"),
    ("0F" + "9" * 100_000 + "\n", "micro-batch 99999999... (100,000 digits) is beyond"),
    ("x" * 2_000_000, "row 1 (rank 0), column 1: 'xxxxxxxx"),
    ("0F0," * 4_200_000, "the upload limit is 16 MiB (16,777,216 bytes)"),
    (b"0F0,\xff\xfe\x00junk\n", "row 1: byte 0xff is not UTF-8 text"),
    (b"0F0,0B0\n\x80", "row 2: byte 0x80 is not UTF-8 text"),
    ("0F0,\x00,0B0\n", r"column 2: '\x00' is not an action"),
    ("", "no actions"),
    ("\n" * 1_000_000, "no actions"),
    ("rank,actions\n", "row 1 (rank 0), column 1: 'rank' is not an action"),
    ("0F0,0F0,0B0\n", "stage 0, micro-batch 0 has 2 forward"),
    ("0F0,0B0,0B0\n", "stage 0, micro-batch 0 has 1 forward(s), 2 backward(s)"),
    ("0F0,0B0,0F1023\n", "stage 0, micro-batch 1023 has 1 forward(s), 0 backward(s)"),
    ("0F-1,0B0\n", "'0F-1' is not an action such as 0F1, 3B0, 2I5, 2W5 or (0F7;7B3)OVERLAP_F_B (indices are whole "),
    ("nanFinf,0B0\n", "'nanFinf' is not an action"),
    ("0F0,0Binf\n", "'0Binf' is not an action"),
    ("\uff10F\uff10,0B0\n", "only ASCII digits"),
    ("0F0,0B0\n\n1F0,1B0\n", "row 2 (rank 1): no actions, though a later row has some"),
    ("(0B0;0F1)OVERLAP_F_B\n", "an OVERLAP_F_B pair is one forward and then one backward"),
    ("0F0,0B0\n0F0,0B0\n", "stages 0, 0 are not 0..1, each on one rank"),
    ("0F0,0B0,0F1,0B1\n1F0,1B0\n", "stage 1, micro-batch 1 has 0 forward(s), 0 backward(s)"),
])
def test_a_crafted_table_is_refused_naming_the_row_and_the_limit(table, needle):
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(InputError) as err:
            simulate_actions(table)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert needle in str(err.value) and "\n" not in str(err.value) and len(str(err.value)) < 300
    assert time.perf_counter() - start < 10
    assert peak < 12 * len(table) + 20e6  # a few copies of the text at most, never stages x micro-batches


def test_empty_cells_spaces_quotes_bookkeeping_bom_and_crlf_are_read_like_the_plain_table():
    plain = "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n"
    base = simulate_actions(plain, 1.0, 2.0, 0.0).timeline.makespan
    for variant in ("\ufeff" + plain.replace("\n", "\r\n"),
                    '"0F0", 0F1 ,,0B0,0B1,\r\n1UNSHARD,1F0,None,1RECV_B0,1B0,1F1,1SEND_B1 ,1B1\r\n\r\n',
                    ",,0F0,0F1,0B0,0B1\n  1F0 ,  1B0,1F1,1B1,,,\n\n\n"):
        assert simulate_actions(variant.encode("utf-8"), 1.0, 2.0, 0.0).timeline.makespan == base == 9.0
    assert read_table(b"\xef\xbb\xbf0F0,0B0\r\n").owned == ((0,),)


def cli(path):
    """`simulate --from-csv PATH --json`: (exit code, stderr lines, peak resident MB, seconds). A small parent runs it
    and reads its children's peak, as /usr/bin/time -v does: a child started straight from this process would
    count this process's own memory (Linux carries the high-water mark across exec)."""
    code = ("import resource, subprocess, sys\n"
            "out = subprocess.run([sys.executable, '-m', 'core', 'simulate', '--from-csv', sys.argv[1], '--json'], "
            "capture_output=True, text=True)\n"
            "sys.stderr.write(out.stderr)\n"
            "print('maxrss', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
            "sys.exit(out.returncode)\n")
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, str(path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    lines = out.stderr.strip().splitlines()
    return out.returncode, lines[:-1], int(lines[-1].split()[1]) / 1024, time.perf_counter() - start


@pytest.mark.parametrize("table,needle", [
    (ISSUE_TABLE.encode(), "stage 4,096 is beyond"),
    (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4000, "is not UTF-8 text"),
    (("0F0," * 4_200_000).encode(), "the upload limit is 16 MiB"),
    (b"", "no actions"),
])
def test_the_cli_refuses_a_crafted_table_in_one_line_quickly_and_small(table, needle, tmp_path):
    path = tmp_path / "crafted.csv"
    path.write_bytes(table)
    rc, err, peak_mb, seconds = cli(path)
    assert rc == 2 and len(err) == 1 and needle in err[0] and err[0].startswith("error: action table")
    assert seconds < 10 and peak_mb < 600


def test_the_page_refuses_the_issue_table_with_its_message():
    at = run()
    tracemalloc.start()
    try:
        at.file_uploader(key="actions_csv").upload("crafted.csv", ISSUE_TABLE.encode(), "text/csv").run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not at.exception
    assert any("This table cannot be timed: action table, row 1 (rank 0), column 4097: stage 4,096 is beyond" in e.value
               for e in at.error)
    assert peak < 100e6


def test_the_page_reads_a_bom_and_windows_line_ends():
    at = run()
    table = "\ufeff0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n".encode()
    at.file_uploader(key="actions_csv").upload("excel.csv", table, "text/csv").run()
    assert not at.exception and not at.error
    assert "9" in [m.value for m in at.metric]
