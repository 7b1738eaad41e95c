"""What each training framework can run, at a pinned version, with where each rule is written.

One table serves both the planner (a `--framework` search holds only what that framework runs, and with `any`
every row lists the frameworks that run it) and the exporters (an export reproduces its row exactly, or refuses
with these reasons). A rule either comes from the framework's own source or docs (named in `sources`) or is a
conservative choice where support is not documented (said so in the source text).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.params.planner import FRAMEWORK_NAMES

MEGATRON_RELEASE = "core_v0.19.0"
MEGATRON_COMMIT = "5be9626709af2722333bf54797c954c09edeada3"
DEEPSPEED_VERSION = "0.19.8"
TORCH_VERSION = "2.13.0"


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
    switches: tuple[str, ...] = ()  # tuning switches the planner searches (core.planner.grid): "tp_comm_overlap"
    #                                 (TP collectives inside their GEMMs), "no_reshard" (ZeRO-3 keeps the gathered
    #                                 parameters from forward to backward); each with its entry in `sources`

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

        if s.replicate > 1 and zero not in self.hybrid:
            say(f"{self.label} shards ZeRO-{zero} over the whole data-parallel group (no hybrid sharding"
                + (f"; it has it for ZeRO {_names(self.hybrid)})" if self.hybrid else ")"), "hybrid")
        if p > 1 and schedule not in self.schedules:
            say(f"{self.label} has no {schedule} schedule (it runs {_names(self.schedules)})", "schedules")
        stages = self.zero_with_pipeline if p > 1 else self.zero
        if zero not in stages:
            where = " with pipeline parallelism" if p > 1 else ""
            say(f"{self.label} takes ZeRO {_names(stages)}{where}, not ZeRO-{zero}",
                "zero_with_pipeline" if p > 1 else "zero")
        elif t > 1 and zero not in self.zero_with_tp:
            say(f"{self.label} takes ZeRO {_names(self.zero_with_tp)} with tensor parallelism, not ZeRO-{zero}",
                "zero_with_tp")
        if s.sp and t > 1 and not self.sequence_parallel:
            say(f"{self.label} has no Megatron-style sequence parallelism", "sequence_parallel")
        if recompute not in self.recompute:
            say(f"{self.label} has no {recompute} recompute switch", "recompute")
        if offload not in self.offload:
            say(f"{self.label} cannot offload {offload} (it offloads {_names(self.offload)})", "offload")
        if s.kv_heads is not None and not self.kv_replication and s.kv_heads % t:
            say(f"{self.label}: t = {t} does not divide the {s.kv_heads} key/value heads", "kv_replication")
        for ex in self.exclusions:
            if p > 1 and zero in ex.zero and schedule in ex.schedules:
                text = ex.text.format(zero=zero, schedule=schedule)
                out.append(f"{text} [{ex.source}]" if cite else text)
        return out

    def summary(self) -> str:
        """What a --framework search keeps, in one sentence."""
        zero = ("ZeRO " + _names(self.zero) + (f" (ZeRO {_names(self.zero_with_pipeline)} with p > 1)"
                                              if self.zero_with_pipeline != self.zero else "")
                + (f" (ZeRO {_names(self.zero_with_tp)} with t > 1)" if self.zero_with_tp != self.zero else ""))
        return (f"Framework {self.label} ({self.version}): only layouts it runs are ranked: schedules "
                f"{_names(self.schedules)} when p > 1; {zero}; sequence parallelism "
                f"{'yes' if self.sequence_parallel else 'no'}; recompute {_names(self.recompute)}; offload "
                f"{_names(self.offload)}. Sources in core/planner/frameworks.py.")

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
        ok &= np.where(p > 1, np.isin(zero, self.zero_with_pipeline), np.isin(zero, self.zero))
        ok &= (t == 1) | np.isin(zero, self.zero_with_tp)
        if not self.sequence_parallel:
            ok &= ~(np.asarray(s.sp, dtype=bool) & (t > 1))
        ok &= np.isin(s.recompute, self.recompute)
        ok &= np.isin(s.offload, self.offload)
        for ex in self.exclusions:
            ok &= ~((p > 1) & np.isin(zero, ex.zero) & np.isin(schedule, ex.schedules))
        return ok & ok_kv & extra


def _names(values) -> str:
    values = [str(v) for v in values]
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]


_MEGATRON_ARGS = f"NVIDIA/Megatron-LM megatron/training/arguments.py at {MEGATRON_RELEASE} ({MEGATRON_COMMIT[:12]})"
_DS = f"DeepSpeed {DEEPSPEED_VERSION}"
_TORCH = f"PyTorch {TORCH_VERSION}"

TABLE: dict[str, Framework] = {
    "megatron": Framework(
        "megatron", "Megatron-LM", MEGATRON_RELEASE,
        schedules=("1f1b", "interleaved"),
        zero=(0, 1, 2, 3), zero_with_pipeline=(0, 1), zero_with_tp=(0, 1, 2, 3),
        sequence_parallel=True, recompute=("none", "selective", "full"), offload=("none", "optimizer"),
        kv_replication=True,
        sources={
            "schedules": f"{_MEGATRON_ARGS}: --pipeline-model-parallel-size runs 1F1B, "
                         "--num-virtual-stages-per-pipeline-rank the interleaved schedule; no flag selects GPipe, "
                         "zero-bubble or V schedules (assets/megatron_flags.json lists every flag)",
            "zero": f"{_MEGATRON_ARGS}: 0 = plain DDP, 1 = --use-distributed-optimizer, 2/3 = --use-megatron-fsdp "
                    "with --data-parallel-sharding-strategy optim_grads / optim_grads_params",
            "zero_with_pipeline": "Megatron-FSDP together with pipeline parallelism is neither asserted against in "
                                  f"validate_args nor documented as supported at {MEGATRON_RELEASE}; the planner "
                                  "keeps to the distributed optimizer (ZeRO 0/1) there",
            "sequence_parallel": f"{_MEGATRON_ARGS}: --sequence-parallel (switched off by validate_args at t = 1)",
            "recompute": f"{_MEGATRON_ARGS}: --recompute-granularity selective | full",
            "offload": f"{_MEGATRON_ARGS}: --optimizer-cpu-offload (needs --use-precision-aware-optimizer and the "
                       "distributed optimizer); no flag offloads parameters",
            "zero_with_tp": "the distributed optimizer and Megatron-FSDP shard over the data-parallel group of each "
                            "tensor-parallel rank",
            "kv_replication": f"Megatron-LM {MEGATRON_RELEASE} transformer_config.py: num_query_groups must be a "
                              "multiple or a divisor of the tensor-parallel size",
            "context_parallel": f"{_MEGATRON_ARGS}: --context-parallel-size, --cp-comm-type p2p (ring attention in "
                                "Transformer Engine); docs/source/api-guide/context_parallel.rst",
            "expert_parallel": f"{_MEGATRON_ARGS}: --expert-model-parallel-size, --expert-tensor-parallel-size "
                               "(MoE parallel folding)",
            "fp8": f"{_MEGATRON_ARGS}: --fp8-format, --fp8-recipe, --fp8-param-gather (Transformer Engine)",
            "moe_blocks": f"{_MEGATRON_ARGS}: --num-experts, --moe-router-topk, --moe-ffn-hidden-size, "
                          "--moe-layer-freq, --moe-shared-expert-intermediate-size, --multi-latent-attention",
            "tp_comm_overlap": f"{_MEGATRON_ARGS}: --tp-comm-overlap (Transformer Engine userbuffers; needs "
                               "--sequence-parallel; TE overlaps TP communication only inside one server, "
                               "NVIDIA/TransformerEngine issue 1071)",
            "deepep": f"{_MEGATRON_ARGS}: --moe-token-dispatcher-type flex --moe-enable-deepep (DeepEP installed; "
                      "megatron/core/transformer/moe/fused_a2a.py)",
            "moe_a2a_overlap": f"{_MEGATRON_ARGS}: --overlap-moe-expert-parallel-comm --delay-wgrad-compute "
                               "(Megatron-Core >= 0.14; transformer_config.py asserts ep > 1, no full recompute, the "
                               "interleaved schedule when p > 1)",
            "hybrid": f"{_MEGATRON_ARGS}: --num-distributed-optimizer-instances R (the distributed optimizer "
                      "sharded within d x cp / R ranks, its gradients all-reduced across the R instances; "
                      "megatron/core/distributed/distributed_data_parallel.py, intra and inter distributed-optimizer "
                      "groups); ZeRO-1 only",
        }, context_parallel=True, expert_parallel=True, fp8=True, moe_blocks=True, switches=("tp_comm_overlap",),
        hybrid=(1,),
        moe_switches=("deepep", "moe_a2a_overlap")),
    "deepspeed": Framework(
        "deepspeed", "DeepSpeed", DEEPSPEED_VERSION,
        schedules=("1f1b",),
        zero=(0, 1, 2, 3), zero_with_pipeline=(0, 1), zero_with_tp=(0, 1, 2, 3),
        sequence_parallel=False, recompute=("none", "full"), offload=("none", "optimizer", "optimizer+params"),
        kv_replication=True,
        sources={
            "schedules": f"{_DS} deepspeed/runtime/pipe/schedule.py: PipelineEngine runs TrainSchedule, a 1F1B "
                         "order; its DualPipeVSchedule keeps each weight gradient inside the backward (no deferred "
                         "W), so it is not the dualpipev order simulated here",
            "zero": f"{_DS} deepspeed/runtime/zero/config.py: zero_optimization.stage 0-3",
            "zero_with_pipeline": f"{_DS} deepspeed/runtime/pipe/engine.py asserts 'ZeRO-2 and ZeRO-3 are "
                                  "incompatible with pipeline parallelism'",
            "sequence_parallel": f"{_DS} has no Megatron-style sequence parallelism (its sequence_parallel_size is "
                                 "Ulysses: the sequence split over ranks with all-to-alls around attention)",
            "recompute": f"{_DS}: activation_checkpointing / PipelineModule(activation_checkpoint_interval=...) "
                         "checkpoint whole layers; selective recompute is model code, not a DeepSpeed switch",
            "offload": f"{_DS} deepspeed/runtime/zero/config.py: offload_optimizer (stages 1-3), offload_param "
                       "(stage 3)",
            "zero_with_tp": f"{_DS} runtime/engine.py: AutoTP composes with ZeRO stages 0-3",
            "kv_replication": f"{_DS} runtime/engine.py: AutoTP beyond the key/value head count only warns",
            "context_parallel": f"{_DS} has no ring-attention context parallelism; its sequence_parallel_size is "
                                "Ulysses (all-to-alls around attention, heads divided by the degree), a different "
                                "scheme from the planner's cp",
            "expert_parallel": f"{_DS}: expert parallelism is set in model code (deepspeed.moe.layer.MoE(ep_size=...)"
                               "), not in the JSON config this export writes",
            "fp8": f"{_DS}: the JSON config has no FP8 training switch (FP8 comes from Transformer Engine layers in "
                   "model code)",
            "moe_blocks": f"{_DS}: the JSON config describes no model; MoE layers (deepspeed.moe.layer.MoE) live in "
                          "your model code",
            "hybrid": f"{_DS} deepspeed/runtime/config.py _REMOVED_ZERO_CONFIG_KEYS: 'MiCS ZeRO-3 sharding has been "
                      "removed' (mics_shard_size is rejected); ZeRO++'s zero_hpz_partition_size keeps a secondary "
                      "copy of the parameters only, the optimizer state stays sharded over all data-parallel ranks",
        }, moe_blocks=True),
    "torch": Framework(
        "torch", "PyTorch (FSDP2, torch.distributed.pipelining)", TORCH_VERSION,
        schedules=("gpipe", "1f1b", "interleaved", "looped-bfs", "zb-h1", "zb-h2", "zbv", "dualpipev"),
        zero=(0, 1, 2, 3), zero_with_pipeline=(0, 1, 2, 3), zero_with_tp=(2, 3),
        sequence_parallel=True, recompute=("none", "selective", "full"), offload=("none", "optimizer+params"),
        kv_replication=False,
        sources={
            "schedules": f"{_TORCH} torch/distributed/pipelining/schedules.py: ScheduleGPipe, Schedule1F1B, "
                         "ScheduleInterleaved1F1B, ScheduleLoopedBFS, ScheduleZBVZeroBubble, ScheduleDualPipeV; any "
                         "other order runs from its action CSV in _PipelineScheduleRuntime (tests/engines run every "
                         "one of ours there)",
            "zero": f"{_TORCH}: 0 = DistributedDataParallel, 1 = ZeroRedundancyOptimizer, 2/3 = fully_shard with "
                    "reshard_after_forward False/True",
            "zero_with_pipeline": f"{_TORCH}: the data-parallel wrappers apply to each pipeline stage's module",
            "sequence_parallel": f"{_TORCH} torch/distributed/tensor/parallel: SequenceParallel style",
            "recompute": f"{_TORCH} torch.utils.checkpoint (whole block, or the attention core only)",
            "offload": f"{_TORCH} CPUOffloadPolicy offloads parameters, gradients and optimizer state together "
                       "(ZeRO-3); there is no optimizer-only offload",
            "zero_with_tp": f"{_TORCH}: DistributedDataParallel and ZeroRedundancyOptimizer take plain tensors, "
                            "not tensor-parallel DTensors (torchtitan: 'DDP has not supported > 1D parallelism'); "
                            "FSDP2 composes with tensor parallelism",
            "kv_replication": "the exported script shards the key/value projections column-wise over t, so t must "
                              "divide the key/value heads (replicating them is not generated)",
            "context_parallel": f"{_TORCH} torch.distributed.tensor.experimental.context_parallel: ring attention "
                                "for scaled_dot_product_attention over a 'cp' mesh dimension (experimental API)",
            "expert_parallel": "torchtitan (the PyTorch-native trainer on FSDP2) spreads routed experts over "
                               "parallelism.expert_parallel_degree ranks borrowed from the data-parallel x context-"
                               "parallel mesh, with expert_tensor_parallel_degree (torchtitan/distributed/"
                               "expert_parallel.py, parallel_dims.py); core PyTorch has no expert-parallel API",
            "fp8": f"{_TORCH} with torchao: float8 linears by torchao.float8.convert_to_float8_training, the output "
                   "layer left in 16-bit (torchtitan's float8 converter, filter_fqns ['output']); the script converts "
                   "the model when the row is FP8",
            "moe_blocks": "torchtitan's deepseek_v3 (latent attention, routed and shared experts on grouped GEMMs) "
                          "and qwen3 MoE models (torchtitan/models/moe)",
            "no_reshard": f"{_TORCH} fully_shard(reshard_after_forward=False): parameters stay gathered from "
                          "forward to backward (torchtitan's default with pipeline parallelism, "
                          "torchtitan/distributed/fsdp.py)",
            "hybrid": f"{_TORCH} fully_shard(mesh=<2-D mesh (replicate, shard)>): HSDP, parameters sharded within "
                      "the shard dimension and gradients all-reduced across the replicate one (torchtitan's "
                      "parallelism.data_parallel_replicate_degree); ZeroRedundancyOptimizer and DDP do not",
        },
        context_parallel=True, expert_parallel=True, fp8=True, moe_blocks=True, switches=("no_reshard",),
        hybrid=(2, 3),
        export_lacks={
            "expert_parallel": "the planner's torch script builds no expert-parallel group (torchtitan runs FSDP2 "
                               "with expert parallelism: parallelism.expert_parallel_degree in its TOML)",
            "moe_blocks": "the planner's torch script builds a dense decoder (torchtitan's deepseek_v3 and qwen3 "
                          "MoE models have the routed experts and latent attention)"},
        exclusions=(Exclusion(
            (3,), ("zb-h1", "zb-h2", "zbv"),
            "PyTorch's pipelining runtime drops the deferred weight gradients of ZeRO-{zero} (FSDP2 "
            "reshard_after_forward=True) stages under {schedule}",
            f"measured with {_TORCH}: after one step of the exported script the stage whose W runs after a later "
            "micro-batch's work has no gradients (tests/engines/test_torch_script.py keeps checking it)"),)),
}
assert tuple(TABLE) == FRAMEWORK_NAMES


def framework(key: str) -> Framework:
    return TABLE[key]


def with_switch(switch: str) -> frozenset[str]:
    """The frameworks (keys) that have a tuning switch (Framework.switches)."""
    return frozenset(k for k, f in TABLE.items() if switch in f.switches)


def moe_note(asked: tuple[str, ...]) -> str | None:
    """Who runs the MoE software a question assumes (Framework.moe_switches), or None when it asks for none."""
    if not asked:
        return None
    have = [f for f in TABLE.values() if set(asked) <= set(f.moe_switches)]
    return (f"{' and '.join(asked)} assumed: only {_names([f.label for f in have]) or 'no framework'} runs "
            f"{'it' if len(asked) == 1 else 'them'} ({'; '.join(have[0].sources[k] for k in asked) if have else ''}); "
            "the other exports leave the all-to-all to their own dispatcher.")


def which(s: Setting) -> list[tuple[str, ...]]:
    """Per candidate of a setting of arrays, the frameworks (keys) that run it."""
    masks = {k: f.runs(s) for k, f in TABLE.items()}
    shape = np.broadcast(*masks.values()).shape if masks else (0,)
    code = np.zeros(shape, dtype=np.int64)  # bit k: framework k runs it
    for k, name in enumerate(TABLE):
        code |= np.broadcast_to(masks[name], shape).astype(np.int64) << k
    names = tuple(TABLE)
    sets = {c: tuple(n for k, n in enumerate(names) if c >> k & 1) for c in set(code.ravel().tolist())}
    return [sets[c] for c in code.ravel().tolist()]
