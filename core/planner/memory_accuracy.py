"""How far to trust a planned memory per GPU, in the memory validation's own numbers (core.planner.memory_validation),
so that "does it fit?" is read with its margin.

The rows held out of the one memory fit (each framework's allocator reserve share), per framework. The validation
runs the planner on every measured row, so `scripts/memory_table.py --write` stores what `measure` finds in
assets/memory_accuracy.json beside docs/memory.md's table, and tests/test_memory_validation.py fails when either is
stale.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache

from core.params.catalog import ASSETS, document

FILE = "memory_accuracy.json"
NAMES = {"megatron": "Megatron-LM", "torch": "PyTorch (torchtitan, FSDP2)", "deepspeed": "DeepSpeed"}


@dataclass(frozen=True)
class Margin:
    rows: int  # held-out measured runs
    sources: int
    mean: float  # mean |error|, fractions; error = predicted / measured - 1
    worst: float
    signed: float


@dataclass(frozen=True)
class MemoryAccuracy:
    held: Margin
    by_framework: dict[str, Margin]

    def words(self, accounting: str) -> tuple[str, ...]:
        """The margin of the row's accounting in plain words (the recommendation's "How far to trust it")."""
        m = self.by_framework.get(accounting)
        if accounting == "textbook" or m is None:
            return (f"Memory is counted as the textbook does (the ZeRO paper, Korthikanti et al.): no framework's "
                    f"buffers, loss peak or allocator reserve. Counted as the frameworks store it, the planner was "
                    f"{100 * self.held.mean:.1f} % off on average on {self.held.rows} measured peaks held out of its "
                    f"fit, at most {100 * self.held.worst:.1f} %.",)
        return (f"Memory per GPU, counted as {NAMES.get(accounting, accounting)} stores it: on {m.rows} measured "
                f"peaks of that framework held out of the fit ({m.sources} source{'s' if m.sources != 1 else ''}) "
                f"it was {100 * m.mean:.1f} % off on average and at most {100 * m.worst:.1f} % (signed mean "
                f"{100 * m.signed:+.1f} %; negative: the run held more than predicted). Keep that much free when a "
                "layout is near the limit (a minimum free memory asks for it).",)


def measure(result) -> MemoryAccuracy:
    """The margins of a core.planner.memory_validation.MemoryValidation."""
    summary = result.summary()

    def margin(s) -> Margin:
        return Margin(s.rows, s.sources, s.mean_abs_error, s.max_abs_error, s.signed_mean_error)

    frameworks = {k.rsplit(" ", 1)[-1]: margin(s) for k, s in summary.items()
                  if k.startswith("held-out framework ") and s.rows}
    return MemoryAccuracy(margin(summary["held-out"]), frameworks)


def text(acc: MemoryAccuracy) -> str:
    """assets/memory_accuracy.json's content for `acc` (rounded: the file is compared as text)."""
    def plain(m: Margin) -> dict:
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(m).items()}
    return json.dumps({"held": plain(acc.held), "by_framework": {k: plain(v) for k, v in
                                                                  sorted(acc.by_framework.items())}}, indent=1) + "\n"


def write(acc: MemoryAccuracy) -> None:
    (ASSETS / FILE).write_text(text(acc), encoding="utf-8")


@lru_cache(maxsize=1)
def load() -> MemoryAccuracy:
    """The stored margins (assets/memory_accuracy.json)."""
    d = document(FILE)
    return MemoryAccuracy(Margin(**d["held"]), {k: Margin(**v) for k, v in d["by_framework"].items()})
