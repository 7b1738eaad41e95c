"""Published runs a planning question matches (the same model shape on the same GPU type and count), from the
validation set (assets/validation.json): what each ran, and the step-time switches its own software needs, so a user
whose run is one of them sees which switches reproduce it, and how far the step time so timed was from the
published one. A production run is not a benchmark (MT-NLG on Megatron-DeepSpeed without overlaps, BLOOM over a
slower network); the defaults time a tuned vendor benchmark.
"""

from __future__ import annotations

from dataclasses import fields

from core.errors import InputError
from core.params.planner import ASSUMPTIONS, GPU_FLAGS, PLAN, PlannerParams
from core.planner import accuracy, candidates, validation

SHAPE = ("layers", "hidden", "heads", "kv_heads", "ffn", "seq", "mlp", "moe", "mla")  # and the vocabulary, padded
FIX = (("fix_t", "t"), ("fix_p", "p"), ("fix_cp", "cp"), ("fix_ep", "ep"), ("fix_d", "d"), ("zero", "zero"),
       ("schedule", "schedule"), ("v", "v"), ("mb_sizes", "mbs"), ("recompute", "recompute"), ("sp", "sp"))


def matching(q: PlannerParams, model) -> list[dict]:
    """The validation rows with q's GPU count, GPU type and a model of the same shape (at most a handful)."""
    out = []
    for row in validation.data()["rows"]:
        if row["layout"]["gpus"] != q.gpus or row["gpu"] != q.gpu:
            continue
        try:
            theirs = candidates.resolve(validation.params_of(row))[0]
        except InputError:
            continue
        padded = abs(theirs.vocab - model.vocab) <= 0.01 * max(theirs.vocab, model.vocab)  # 50,257 vs 50,272
        if padded and all(getattr(theirs, k) == getattr(model, k) for k in SHAPE):
            out.append(row)
    return out


def command(row: dict) -> str:
    """`plan` flags that pin the run's layout and set its software's step-time switches."""
    p = validation.params_of(row)
    skip = {"v": p.schedule != "interleaved", "mb_sizes": len(p.mb_sizes) > 1, "fix_cp": p.fix_cp == 1}
    fix = ",".join(f"{short}={_text(getattr(p, key))}" for key, short in FIX
                   if getattr(p, key) != PLAN[key].default and not skip.get(key, False))
    switches = " ".join(f"{GPU_FLAGS.get(k, '--' + k.replace('_', '-'))} {_text(v)}"
                        for k, v in row.get("software", {}).items() if k in ASSUMPTIONS or k in GPU_FLAGS)
    return (f"--fix {fix}" + (f" {switches}" if switches else "")).strip()


def words(q: PlannerParams, model) -> tuple[str, ...]:
    """One line per matching published run: its label and source, how to time it as it ran, and how far that
    timing was from the published step (assets/accuracy.json, written with the validation)."""
    out = []
    for row in matching(q, model)[:4]:
        label = row.get("label") or row["key"]
        switches = row.get("software", {})
        said = (f" Its software needs {', '.join(f'{k} = {_text(v)}' for k, v in switches.items())} (the defaults "
                "time a tuned vendor benchmark).") if switches else ""
        timed = accuracy.load().run(row["key"], fitted=row["role"] == "calibration")
        out.append(f"{label} ({row['source']}) ran this model on these GPUs.{said} To time it as it ran: "
                   f"`python -m core plan ... {command(row)}`." + (f" {timed}" if timed else ""))
    return tuple(out)


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(_text(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


assert {k for k, _ in FIX} <= {f.name for f in fields(PlannerParams)}
