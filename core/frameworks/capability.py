"""What a training framework can run: the record each framework module fills (core.frameworks.<framework>.CAPABILITY),
and the one reading of it for a layout (refusals, with each reason's source) or for many candidates at once (runs).

A rule either comes from the framework's own source or docs (named in `sources`) or is a conservative choice where
support is not documented (said so in the source text). `export_lacks` keeps apart what the framework runs but the
planner's export for it does not write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Setting:
    """What a layout asks of a framework: one value each for `refusals`, or arrays with one entry per candidate for
    `runs` and `which` (schedule, recompute and offload by name)."""

    t: Any
    p: Any
    zero: Any
    schedule: Any
    sp: Any = False
    recompute: Any = "none"
    offload: Any = "none"
    kv_heads: int | None = None  # None: not checked
    cp: Any = 1
    ep: Any = 1
    fp8: bool = False
    moe: bool = False  # mixture-of-experts or latent-attention blocks
    replicate: Any = 1  # hybrid sharding: ZeRO within d x cp / replicate ranks, replicated across the rest
    recompute_layers: Any = 0  # full recompute on the first N layers of each chunk only (0: every layer)


@dataclass(frozen=True)
class Exclusion:
    """A combination of ZeRO stage and schedule a framework runs wrongly or refuses, found by running it."""

    zero: tuple[int, ...]
    schedules: tuple[str, ...]
    text: str  # with {zero} and {schedule}
    source: str


@dataclass(frozen=True)
class Framework:
    """The switches one framework offers. `schedules` apply when p > 1 (p = 1 runs no pipeline)."""

    key: str
    label: str
    version: str
    schedules: tuple[str, ...]
    zero: tuple[int, ...]  # ZeRO stages without pipeline parallelism
    zero_with_pipeline: tuple[int, ...]
    zero_with_tp: tuple[int, ...]  # ZeRO stages that compose with tensor parallelism (t > 1)
    sequence_parallel: bool
    recompute: tuple[str, ...]
    offload: tuple[str, ...]
    kv_replication: bool  # t may exceed (as a multiple of) the key/value heads, which are then replicated
    sources: Mapping[str, str]  # capability -> where it is written
    exclusions: tuple[Exclusion, ...] = ()
    context_parallel: bool = False  # cp > 1: ring attention over a context-parallel group
    expert_parallel: bool = False  # ep > 1: routed experts spread over an expert-parallel group
    fp8: bool = False  # FP8 GEMMs (and FP8 primary weights) from the exported config itself
    moe_blocks: bool = False  # the export describes mixture-of-experts and latent-attention blocks (or leaves
    #                           the model to the user's code, as a DeepSpeed config does)
    moe_switches: tuple[str, ...] = ()  # MoE software the step time can assume (core.params.planner moe_dispatcher
    #                                     "deepep", moe_a2a_overlap): question-wide, like tp_bwd_overlap, so a note,
    #                                     not a filter, says who has them; each with its entry in `sources`
    export_lacks: Mapping[str, str] = None  # type: ignore[assignment]  # capability -> why the planner's export for
    #    this framework does not write it though the framework runs it: the search ranks such rows (the framework
    #    runs them), `refusals(export=True)` names the gap, a checked config (export=False) does not
    hybrid: tuple[int, ...] = ()  # ZeRO stages it shards within a group and replicates across groups (HSDP)
    partial_recompute: bool = False  # full recompute of the first N layers of each stage only (source: "partial")
    switches: tuple[str, ...] = ()  # tuning switches the planner searches (core.planner.grid): "tp_comm_overlap"
    #                                 (TP collectives inside their GEMMs), "no_reshard" (ZeRO-3 keeps the gathered
    #                                 parameters from forward to backward); each with its entry in `sources`
    home: str = "core.frameworks"  # the module that states this table (its __name__)

    def refusals(self, s: Setting, cite: bool = True, export: bool = True) -> list[str]:
        """Why this framework (export=False) or the planner's export for it (export=True) cannot run one layout
        (empty when it can), each reason with its source."""
        t, p, zero, schedule, recompute, offload = s.t, s.p, s.zero, s.schedule, s.recompute, s.offload
        out = []
        lacks = dict(self.export_lacks or {}) if export else {}

        def say(text: str, source: str) -> None:
            out.append(f"{text} [{self.sources[source]}]" if cite else text)

        if s.cp > 1 and not self.context_parallel:
            say(f"{self.label} has no context parallelism (cp = {s.cp})", "context_parallel")
        if s.ep > 1 and not self.expert_parallel:
            say(f"{self.label}'s export cannot spread experts over ep = {s.ep} ranks", "expert_parallel")
        if s.fp8 and not self.fp8:
            say(f"{self.label}'s export has no FP8 training switch", "fp8")
        if s.moe and not self.moe_blocks:
            say(f"{self.label}'s export has no mixture-of-experts or latent-attention block", "moe_blocks")
        for key, applies in (("expert_parallel", s.ep > 1), ("moe_blocks", s.moe)):
            if applies and key in lacks:
                out.append(lacks[key] if cite else lacks[key].split(" (")[0])

        if recompute == "full" and s.recompute_layers and not self.partial_recompute:
            say(f"{self.label} recomputes every layer or none (no full recompute of {s.recompute_layers} layers "
                "per stage)", "partial")
        if s.replicate > 1 and zero not in self.hybrid:
            say(f"{self.label} shards ZeRO-{zero} over the whole data-parallel group (no hybrid sharding"
                + (f"; it has it for ZeRO {join_names(self.hybrid)})" if self.hybrid else ")"), "hybrid")
        if p > 1 and schedule not in self.schedules:
            say(f"{self.label} has no {schedule} schedule (it runs {join_names(self.schedules)})", "schedules")
        stages = self.zero_with_pipeline if p > 1 else self.zero
        if zero not in stages:
            where = " with pipeline parallelism" if p > 1 else ""
            say(f"{self.label} takes ZeRO {join_names(stages)}{where}, not ZeRO-{zero}",
                "zero_with_pipeline" if p > 1 else "zero")
        elif t > 1 and zero not in self.zero_with_tp:
            say(f"{self.label} takes ZeRO {join_names(self.zero_with_tp)} with tensor parallelism, not ZeRO-{zero}",
                "zero_with_tp")
        if s.sp and t > 1 and not self.sequence_parallel:
            say(f"{self.label} has no Megatron-style sequence parallelism", "sequence_parallel")
        if recompute not in self.recompute:
            say(f"{self.label} has no {recompute} recompute switch", "recompute")
        if offload not in self.offload:
            say(f"{self.label} cannot offload {offload} (it offloads {join_names(self.offload)})", "offload")
        if s.kv_heads is not None and not self.kv_replication and s.kv_heads % t:
            say(f"{self.label}: t = {t} does not divide the {s.kv_heads} key/value heads", "kv_replication")
        for ex in self.exclusions:
            if p > 1 and zero in ex.zero and schedule in ex.schedules:
                text = ex.text.format(zero=zero, schedule=schedule)
                out.append(f"{text} [{ex.source}]" if cite else text)
        return out

    def summary(self) -> str:
        """What a --framework search keeps, in one sentence."""
        zero = ("ZeRO " + join_names(self.zero) + (f" (ZeRO {join_names(self.zero_with_pipeline)} with p > 1)"
                                              if self.zero_with_pipeline != self.zero else "")
                + (f" (ZeRO {join_names(self.zero_with_tp)} with t > 1)" if self.zero_with_tp != self.zero else ""))
        return (f"Framework {self.label} ({self.version}): only layouts it runs are ranked: schedules "
                f"{join_names(self.schedules)} when p > 1; {zero}; sequence parallelism "
                f"{'yes' if self.sequence_parallel else 'no'}; recompute {join_names(self.recompute)}; offload "
                f"{join_names(self.offload)}. Sources in {self.home}.")

    def runs(self, s: Setting) -> np.ndarray:
        """Vectorised `not refusals(...)` over a setting of candidate arrays (names as strings)."""
        t, p, zero, schedule = np.asarray(s.t), np.asarray(s.p), np.asarray(s.zero), s.schedule
        extra = np.ones(np.shape(p), dtype=bool)
        if not self.context_parallel:
            extra &= np.asarray(s.cp) == 1
        if not self.expert_parallel:
            extra &= np.asarray(s.ep) == 1
        if (s.fp8 and not self.fp8) or (s.moe and not self.moe_blocks):
            extra &= False
        if s.kv_heads is not None and not self.kv_replication:
            ok_kv = s.kv_heads % t == 0
        else:
            ok_kv = True
        ok = np.where(p > 1, np.isin(schedule, self.schedules), True)
        ok &= (np.asarray(s.replicate) <= 1) | np.isin(zero, self.hybrid)
        if not self.partial_recompute:
            ok &= ~((np.asarray(s.recompute) == "full") & (np.asarray(s.recompute_layers) > 0))
        ok &= np.where(p > 1, np.isin(zero, self.zero_with_pipeline), np.isin(zero, self.zero))
        ok &= (t == 1) | np.isin(zero, self.zero_with_tp)
        if not self.sequence_parallel:
            ok &= ~(np.asarray(s.sp, dtype=bool) & (t > 1))
        ok &= np.isin(s.recompute, self.recompute)
        ok &= np.isin(s.offload, self.offload)
        for ex in self.exclusions:
            ok &= ~((p > 1) & np.isin(zero, ex.zero) & np.isin(schedule, ex.schedules))
        return ok & ok_kv & extra


def join_names(values) -> str:
    values = [str(v) for v in values]
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]
