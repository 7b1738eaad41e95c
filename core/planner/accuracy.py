"""How far to trust a planned step time, in the validation's own numbers (core.planner.validation), so that an
engineer sizing a run reads the margin beside the figure.

Two groups, both held out of every fit: the published runs of the frameworks the step-time model describes, and
the published runs of 1,000 GPUs and more on other software (DeepSpeed's pipeline engine, Meta's Llama 3 stack,
newer Megatron-Bridge releases, MegaScale's baseline), where real runs lose time the model does not see. The
validation takes seconds, so `scripts/validation_table.py --write` stores what `measure` finds in
assets/accuracy.json beside docs/step-time.md's table, and tests/test_validation.py fails when either is stale.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import lru_cache

from core.params.catalog import ASSETS, document

FILE = "accuracy.json"
LARGE_GPUS = 1000  # "large": a run of at least this many GPUs


@dataclass(frozen=True)
class Accuracy:
    held_rows: int  # held-out runs of the modelled frameworks (each timed as the release it ran)
    held_sources: int
    held_mean: float  # mean |error|, fractions; error = predicted / published - 1
    held_max: float
    held_signed: float
    large_rows: int  # held-out runs of LARGE_GPUS or more on other software
    large_software: tuple[str, ...]  # their sources' software, as the validation names it
    large_signed: float
    large_low: float  # the most optimistic (the published run slowest against the prediction)
    large_high: float
    release_rows: int = 0  # fitted releases' own rows, timed with another release's fit (validation.cross_release)
    release_shift: float = 0.0  # the largest |signed mean error| of those: how far the same layouts move between them
    runs: dict = field(default_factory=dict)  # every timed validation row: key -> (published s, predicted s, error)

    def run(self, key: str, fitted: bool = False) -> str:
        """How far the step time was from one published run, timed as it ran (empty when it is not timed); a run
        the compute rates were `fitted` on says so, its error being no test of them."""
        if key not in self.runs:
            return ""
        published, predicted, error = self.runs[key]
        return (f"Timed as it ran, the model gives {predicted:,.2f} s per step against the published "
                f"{published:,.2f} s ({100 * error:+.1f} %" + ("; the compute rates were fitted on this run)."
                                                               if fitted else ")."))

    def words(self) -> tuple[str, ...]:
        """The two margins in plain words (the recommendation's "How far to trust it")."""
        return (
            f"At the default assumptions and held out of every fit, on {self.held_rows} published runs of the "
            "frameworks modelled here, each timed as the software release it ran "
            f"(Megatron-LM, NeMo and Megatron-Bridge, {self.held_sources} sources) the step time was "
            f"{100 * self.held_mean:.1f} % off "
            f"on average and at most {100 * self.held_max:.1f} % (signed mean {100 * self.held_signed:+.1f} %; "
            "negative: the run was slower than predicted).",
            f"On {self.large_rows} published runs of {LARGE_GPUS:,}+ GPUs on other software "
            f"({'; '.join(self.large_software)}) it was {100 * self.large_low:+.1f} % to "
            f"{100 * self.large_high:+.1f} % off (signed mean {100 * self.large_signed:+.1f} %), each timed with what "
            "its source says it ran: a stack's unpublished overheads and speed-ups are not modelled, so budget "
            "that margin for a run of that kind"
            + (f" (production_margin {1.0 / (1.0 + self.large_low) - 1.0:.2f} adds what the slowest of them lost)."
               if self.large_low < 0 else "."),
        ) + ((f"Kernels change between releases: on {self.release_rows} published runs of one release timed with "
              f"another release's fit, the same layouts moved by up to {100 * self.release_shift:.1f} % on average; "
              "set `release` to the software you run.",) if self.release_rows else ())


def measure(result) -> Accuracy:
    """The margins of a core.planner.validation.Validation."""
    from core.planner.validation import MODELLED, cross_release  # here: only the writer needs the validation

    held = result.summary()["held-out"]
    s = result.matched
    other = s["scope"] != MODELLED
    large = s[other & (s["role"] == "held-out") & (s["gpus"] >= LARGE_GPUS) & s["error"].notna()]
    e = large["error"].to_numpy(dtype=float)
    software = tuple(dict.fromkeys(_software(why) for _, why in sorted(set(zip(large["source"], large["scope"],
                                                                                strict=True)))))
    cross = cross_release().values()
    timed = s[s["error"].notna()]
    runs = {k: (float(pub), float(pred), float(err)) for k, pub, pred, err in
            zip(timed["key"], timed["published_s"], timed["predicted_s"], timed["error"], strict=True)}
    return Accuracy(held.rows, held.sources, held.mean_abs_error, held.max_abs_error, held.signed_mean_error,
                    int(e.size), software, float(e.mean()), float(e.min()), float(e.max()),
                    sum(c.rows for c in cross), max((abs(c.signed_mean_error) for c in cross), default=0.0), runs)


def _software(why: str) -> str:
    """A source's software from its scope ("other framework: DeepSpeed's pipeline engine with ..." ->
    "DeepSpeed's pipeline engine")."""
    return why.split(": ", 1)[-1].split(" (")[0].split(" with ")[0]


def write(acc: Accuracy) -> None:
    (ASSETS / FILE).write_text(text(acc), encoding="utf-8")


def text(acc: Accuracy) -> str:
    """assets/accuracy.json's content for `acc` (rounded: the file is compared as text)."""
    plain = {k: (round(v, 6) if isinstance(v, float) else list(v) if isinstance(v, tuple) else v)
             for k, v in asdict(acc).items()}
    plain["runs"] = {k: [round(x, 6) for x in v] for k, v in sorted(acc.runs.items())}
    return json.dumps(plain, indent=1) + "\n"


@lru_cache(maxsize=1)
def load() -> Accuracy:
    """The stored margins (assets/accuracy.json)."""
    d = document(FILE)
    runs = {k: tuple(v) for k, v in d.pop("runs", {}).items()}
    return Accuracy(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}, runs=runs)

