"""Shared by the tests that run the real engines (PyTorch, DeepSpeed) on the CPU.

Locally they skip, saying how to install the engines, when torch or deepspeed is missing; CI (.ci/run) sets
REQUIRE_ENGINES=1, which turns that skip into a failure, and runs scripts/install-engines first.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import required

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ROOT / "tests" / "engines"
INSTALL = "scripts/install-engines (requirements-engines.txt, requirements-megatron.txt)"


def need(module: str):
    """Import an engine, or skip (fail under REQUIRE_ENGINES=1) with the command that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        message = f"{module} is not installed ({exc}); engine tests need: {INSTALL}"
        if required("REQUIRE_ENGINES"):
            pytest.fail(message)
        pytest.skip(message)


def torchrun(script: Path, nproc: int, *args: str, cwd: Path | None = None, timeout: int = 600) -> str:
    """Run `script` on `nproc` local gloo processes (torchrun --standalone); its stdout, or the failure's output."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                           str(nproc), str(script), *args], cwd=cwd or ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{script.name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return done.stdout


def reports(stdout: str, prefix: str = "model-state bytes ") -> list[dict]:
    """The JSON reports an exported script prints, one per rank, ordered by rank.

    Every report is read wherever it starts, not only at a line's start: ranks share one stdout, so a
    line from one can land in the middle of another's (the scripts write a line in one call, but torchrun
    or another library may still print between them).
    """
    decoder, rows, at = json.JSONDecoder(), [], stdout.find(prefix)
    while at >= 0:
        row, end = decoder.raw_decode(stdout, at + len(prefix))
        rows.append(row)
        at = stdout.find(prefix, end)
    return sorted(rows, key=lambda r: r["rank"])
