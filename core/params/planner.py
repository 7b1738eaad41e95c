"""Inputs of the t x p x d planner (Planner page, `python -m core plan`): what to plan, where to search, and
every step-time assumption as a named number with a one-line justification.

One source of truth for the cluster: the planner's model and cluster keys are the Spec objects of
core.params.model (MODEL, CLUSTER), reused here, not copied. core.params.memory.ZERO has keys of its own for
the ZeRO page's single-layout question (`gpus` = 0 means "exactly t x p x N_d", `gpus_per_node`, `bw`); their
ranges contain CLUSTER's, so every planner row makes a valid ZeRO-page link (tests/test_planner_params.py
checks the containment). Optimizer and the optional K are ZERO's specs, also reused.

Search dimensions take "all" (search it) or one value (pin it); t, p and d are pinned with a number > 0.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from core.errors import InputError
from core.params import Spec, parse_lenient, parse_strict, table
from core.params.catalog import calibration_families, document
from core.params.memory import ACTIVATIONS, MAX_CP, MAX_TP, RECOMPUTE_MODES, ZERO
from core.params.model import AUTO_HEADS, CLUSTER, MODEL, preset_choices
from core.params.pipeline import DEFAULT_SCHEDULES, PIPELINE, SEARCH_SCHEDULES

# The planner's schedules and those "all" searches are the registry's (core.pipeline.schedules: each entry's
# `search`); by default Megatron's two and the cheapest zero-bubble one, as the schedule's help says.
MAX_SIM_P = int(PIPELINE["p"].hi)  # the pipeline simulator's cap on devices: larger p is not enumerated
# Context parallelism searched by default: powers of two up to MAX_CP_SEARCH that leave each rank at least
# MIN_CP_TOKENS tokens, so it is searched for long sequences only (16K and up), where activations outgrow the GPU:
# Llama 3 405B's 128K stage used 131,072 / 16 = 8,192 tokens per rank, its 8K pre-training no CP. A pinned cp
# still evaluates any value.
MIN_CP_TOKENS = 8192
MAX_CP_SEARCH = 64
MAX_MB_SIZES = 8
FRAMEWORK_NAMES = ("megatron", "deepspeed", "torch")  # as core.frameworks.CAPABILITIES
MAX_HEADROOM_GB = 10_000.0

_CHOICE_ALL = "all"

_custom_model = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "params", "mlp", "tied",
                 "experts", "top_k", "shared_experts", "expert_ffn", "dense_layers", "parallel", "qk_norm",
                 "window", "window_share", "mtp_layers", "kv_lora_rank", "q_lora_rank", "qk_head_dim", "qk_rope_dim",
                 "v_head_dim")
# Model inputs that apply to a preset too (a custom model takes them with the fields above).
_any_model = ("depth", "flash", "dropout")
FLASH = Spec("flash", "choice", "auto", choices=("auto", "true", "false"), label="Flash attention",
             help="Fused attention kernel: no s x s scores in memory or traffic, causal blocks only (changes step "
                  "time and activations). auto = the preset's own (Llama 3, Mixtral, DeepSeek-V3: on), off for a "
                  "custom model; true or false sets it for any model.")
DROPOUT = Spec("dropout", "choice", "auto", choices=("auto", "true", "false"), label="Dropout",
               help="Hidden and attention dropout with p > 0, whose one-byte masks the backward keeps (p = 0 keeps "
                    "none: PyTorch's dropout returns its input). auto = the model's own (GPT-style blocks: on, as "
                    "Megatron-LM's default 0.1; Llama-style and the Llama, Mixtral, Qwen and DeepSeek presets: off).")

DEPTH = Spec("depth", "int", 0, 0, MODEL["layers"].hi, label="Layers of the preset",
             help="0 = the preset's own; a number stacks the preset's block that many times (the few-layer proxies "
                  "frameworks test and benchmark with, e.g. Llama 3 70B at 8 layers; a mixture-of-experts preset "
                  "keeps its first dense layers). Its published parameter count and layouts no longer apply. "
                  "The command line's --layers with a preset sets it.")

# The planner's sequence length serves presets and custom models alike: 0 keeps the preset's own length
# (MODEL["seq"]'s default for a custom model), a number trains either at that length.
SEQ = Spec("seq", "int", 0, 0, MODEL["seq"].hi, label="Sequence length s", unit="tokens",
           help=f"0 = the preset's own length ({MODEL['seq'].default:,} for a custom model); a number trains the "
                "model at that length, e.g. llama3-405b at 131072 for its 128K long-context stage.")
_custom_gpu = ("gpu_mem", "gpu_tflops", "gpu_tflops_fp8", "gpn", "intra_bw", "inter_bw", "gpu_bw", "gpu_sms",
               "calibration")
_PRESET_VALUE = "0 = the chosen GPU preset's value (the H100 SXM's for custom); a number overrides it."


def _gpu_override(spec: Spec) -> Spec:
    """A cluster number as the planner takes it: 0 keeps the GPU preset's, a number overrides any preset's."""
    return replace(spec, default=0 if spec.kind == "int" else 0.0, lo=0, help=f"{spec.help} {_PRESET_VALUE}")


GPU_OVERRIDES = table(
    *(_gpu_override(CLUSTER[k]) for k in ("gpu_mem", "gpu_tflops")),
    Spec("gpu_tflops_fp8", "float", 0.0, 0.0, CLUSTER["gpu_tflops"].hi, label="Dense FP8 peak", unit="TFLOP/s",
         help="Dense FP8 tensor throughput per GPU, from the datasheet (H100 SXM 1,979). 0 = the preset's (none for "
              "custom: a custom GPU trains FP8 only when given this)."),
    *(_gpu_override(CLUSTER[k]) for k in ("gpn", "intra_bw", "inter_bw", "gpu_bw", "gpu_sms")),
    Spec("calibration", "choice", "auto", choices=("auto", *calibration_families()), label="Calibration",
         help="Which GPU family's fitted efficiency record times the GPU (assets/efficiency.json): auto = the "
              "preset's own or the one it borrows (a custom GPU: the H100's)."),
)

FLASH_KERNELS = ("flash-attn-2", "triton")  # fused attention kernels with a calibrated rate (core.cost.calibration)
# Training software whose compute pace is measured: the calibration sets ran Megatron-LM / NeMo; Megatron-DeepSpeed
# (the fork BLOOM and MT-NLG trained with, under DeepSpeed's engine) runs at its own fitted share of those rates.
COMPUTE_STACKS = ("megatron-lm", "megatron-deepspeed")
CP_COMMS = ("p2p", "all-gather")  # how context parallelism exchanges K/V (core.cost.ring_attention)
MOE_DISPATCHERS = ("alltoall", "deepep", "allgather")  # how the expert all-to-all moves tokens (core.cost.expert_comm)
RELEASES = tuple(document("releases.json")["releases"])  # software releases with vendor tables (core.cost.releases)

# The step-time model's assumptions. The help text is the one-line justification shown with every plan.
def _fitted(name: str) -> float:
    """An assumption's default fitted by scripts/fit_efficiency.py (assets/efficiency.json `assumption_fits`)."""
    return float(document("efficiency.json")["assumption_fits"][name]["value"])


ASSUMPTIONS = table(
    CLUSTER["eff"],
    CLUSTER["mem_eff"],
    Spec("flash_kernel", "choice", "flash-attn-2", choices=FLASH_KERNELS, label="Fused attention kernel",
         help="Which flash-attention kernel a flash model runs, each at its own calibrated rate (assets/"
              "efficiency.json): flash-attn-2 = FlashAttention-2 (flash-attn >= 2, PyTorch SDPA's flash backend; "
              "what Megatron-LM and NeMo run); triton = the Triton FlashAttention of flash-attn 1.0.x "
              "(llm-foundry's attn_impl 'triton', the default of its benchmark script through 2023), about 0.4 x "
              "FlashAttention-2's rate on an A100."),
    Spec("compute_stack", "choice", "megatron-lm", choices=COMPUTE_STACKS, label="Training software's compute pace",
         help="Whose kernels and engine the compute rates are for. megatron-lm: the calibration sets' own "
              "(Megatron-LM, Megatron-Core, NeMo). megatron-deepspeed: the Megatron-DeepSpeed fork under DeepSpeed's "
              "engine, as BLOOM (2022) and MT-NLG (2021) ran it, whose every compute rate is "
              "megatron_deepspeed_share of the calibrated one."),
    Spec("release", "choice", RELEASES[-1], choices=RELEASES, label="Software release",
         help="Which release of the Megatron-Core stack the kernels are timed as (assets/releases.json). Each release "
              "with a DGX-H100 vendor table of its own (Megatron-Bridge 25.09 and 26.04) has its FP8 GEMM and fused "
              "attention fractions fitted on it; the others time with the nearest earlier fitted release. The default "
              "is the newest release with a public DGX-H100 row; nemo-24.07 = the base records, fitted on NeMo 24.07's "
              "and Megatron-Core r0.8's tables (mid-2024). Only H100 records have release fits; other GPUs time as "
              "the base records whatever the release."),
    Spec("megatron_deepspeed_share", "float", _fitted("megatron_deepspeed_share"), 0.3, 1.0,
         label="Megatron-DeepSpeed's share of the compute rates",
         help="Under compute_stack megatron-deepspeed, the share of the calibrated GEMM, attention and memory "
              "rates the step runs at. Fitted on BigScience's Jean Zay benchmarks of BLOOM-like models on 384 A100 "
              "(scripts/fit_efficiency.py fit 'megatron_deepspeed', assets/efficiency.json assumption_fits); the "
              "BLOOM run and MT-NLG 530B are held out. Measured on the A100 only; no single cause is sourced."),
    Spec("comm_eff", "float", 0.8, 0.05, 1.0, label="Achievable fraction of link bandwidth",
         help="Collectives rarely run at line rate (protocol overhead, synchronisation, shared links); "
              "0.8 is a round middle for NCCL rings on NVLink and InfiniBand."),
    Spec("tp_overlap", "float", 0.0, 0.0, 1.0, label="Tensor-parallel comm hidden",
         help="Megatron's tensor-parallel all-reduces sit between dependent matmuls, on the critical path, "
              "unless TP communication overlap is configured: none hidden by default."),
    Spec("tp_overlap_eff", "float", 0.35, 0.0, 1.0, label="TP overlap efficiency",
         help="Where TP communication overlap runs (Megatron-LM --tp-comm-overlap, PyTorch async TP), the share of "
              "the collectives' time inside their GEMMs that it actually hides (split GEMMs and shared SMs run "
              "slower). Fitted on torchtitan's async-TP benchmark, Llama 3 70B on 256 H100 (TP 8, FSDP 32, BF16): "
              "597.3 -> 652.4 tokens/s per GPU, +9.2 % (benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md); "
              "its Llama 3 8B row (64 H100, +9.9 %), not fitted, is predicted at +9.6 %."),
    Spec("tp_bwd_overlap", "bool", True, label="TP backward overlap (Megatron-LM)",
         help="Run each column-parallel layer's input-gradient all-reduce (or reduce-scatter) behind its "
              "weight-gradient GEMM, as Megatron-LM has by default since September 2021 "
              "(--no-async-tensor-model-parallel-allreduce turns it off); never with a split backward."),
    Spec("grad_accum_fusion", "bool", True, label="Gradient-accumulation fusion (Megatron-LM)",
         help="Accumulate weight gradients into the fp32 buffer inside the GEMM, as Megatron-LM has by default "
              "since February 2022; off, every micro-batch adds them in a separate pass (10 bytes per parameter)."),
    Spec("dp_overlap", "float", 0.8, 0.0, 1.0, label="Share of the compute window that hides DP/ZeRO comm",
         help="Bucketed gradient collectives run during the backward pass (DeepSpeed overlap_comm, Megatron "
              "overlap_grad_reduce) and parameter gathers during the forward; the last bucket and kernel "
              "contention leave part exposed."),
    Spec("pp_overlap", "bool", True, label="Interleaved pipeline sends overlapped (Megatron-LM)",
         help="Megatron-LM's interleaved schedule sends each chunk's output while the next chunk computes, by default "
              "since commit 4eeff55 (October 2023, --no-overlap-p2p-communication turns it off); its other schedules "
              "and DeepSpeed's pipeline engine wait for every send."),
    Spec("cp_comm", "choice", "p2p", choices=CP_COMMS, label="Context-parallel K/V exchange",
         help="How context parallelism brings each rank the other ranks' keys and values. p2p = a ring of sends, "
              "each hidden behind the attention of the chunk already received (Megatron-LM's default --cp-comm-type "
              "p2p); all-gather = the whole sequence's K/V gathered before the attention (and again in the "
              "backward, with their gradients reduce-scattered after it), on the critical path: Megatron-LM's "
              "--cp-comm-type all_gather ('not async, and cannot be overlapped', megatron/core/transformer/"
              "transformer_config.py at d98e8a6) and Llama 3's context parallelism (arXiv:2407.21783, 3.3.2)."),
    Spec("param_sync_ahead", "bool", True, label="Parameter gathers a model chunk ahead (Megatron-LM)",
         help="Under an interleaved schedule Megatron-Core gathers the first two model chunks' updated parameters "
              "at the start of the step and each later chunk's while the chunk before it runs its first "
              "micro-batches (pipeline_parallel/schedules.py, param_sync_func, core_r0.8.0), so only the first "
              "chunk's gather must wait; off, each chunk's gather hides only behind its own first forward, as "
              "FSDP's gather at first use does under PyTorch's pipelining."),
    ZERO["ends_in_split"],
    Spec("dp_bucket", "float", 0.0, 0.0, 100000.0, label="Gradient bucket size", unit="million parameters",
         help="Gradients are reduced in buckets during the backward, one collective (and its latency) each. 0 = "
              "Megatron-LM's default, max(40, d) million parameters (megatron/core/distributed/"
              "distributed_data_parallel.py); DeepSpeed's reduce_bucket_size is 500 million elements, PyTorch DDP's "
              "bucket_cap_mb 25 MB."),
    Spec("grad_reduce_bytes", "float", 0.0, 0.0, 8.0, label="Gradient bytes in the reduction", unit="bytes",
         help="Bytes per gradient value the data-parallel reduction moves. 0 = the gradient buffer's (grad_dtype): "
              "2 for a bf16 or fp16 buffer (Megatron-LM's --grad-reduce-in-bf16 reduces its bf16 buffer as it is), "
              "4 for fp32; with grad_dtype auto, 4 (fp32) under BF16 and FP8, Megatron-LM's default ('accumulate "
              "and all-reduce gradients in fp32 for bfloat16', megatron/training/arguments.py) and the FSDP2 "
              "export's reduce_dtype=torch.float32, and 2 under FP16, whose gradients Megatron-LM reduces in 16 "
              "bits."),
    Spec("ring_loss", "float", 0.06, 0.0, 0.5, label="Network bandwidth lost per doubling of servers",
         help="Collectives across many servers run below the per-NIC rate: a reduce-scatter's bus bandwidth on H100 "
              "fell from 360 to 260 GB/s between 4 and 128 servers, about 6 % per doubling (NVIDIA/nccl issue "
              "1229). Applied to every collective's network share for each doubling of the servers it spans "
              "beyond two."),
    Spec("straggler", "float", 0.012, 0.0, 0.5, label="Spread of GPU speeds (relative standard deviation)",
         help="Identical GPUs differ in speed: Sinha et al. (SC'22) measured 8 % average variation across each "
              "cluster's GPUs, the range of some thousand GPUs, about 7 standard deviations of a normal spread: "
              "sigma = 0.08 / 6.7 = 0.012. A step waits for its slowest GPU, sigma x sqrt(2 ln G) behind the "
              "median; charged beyond one server (core.cost.scale_loss)."),
    Spec("production_margin", "float", 0.0, 0.0, 1.0, label="Production margin (added to the step)",
         unit="fraction",
         help="A share of the modelled step added on top, for what a production run loses that a vendor benchmark "
              "does not: failures and restarts, checkpointing, data loading, evaluation, jitter at scale. 0 = the "
              "benchmark's step. It is its own part of the breakdown, never folded into the compute rates, and no "
              "validation row sets it. The published runs of 1,000+ GPUs on other software ran up to a fifth "
              "slower than modelled (\"How far to trust the step time\" gives the figure that reproduces them); "
              "the modelled spread of GPU speeds is `straggler`."),
    Spec("p2p_latency_us", "float", 10.0, 0.0, 10000.0, label="Message latency", unit="microseconds",
         help="Per point-to-point message (pipeline send, ring-attention step, all-to-all): a few microseconds of "
              "NCCL launch and network latency, paid on top of the bytes / bandwidth time."),
    Spec("net_latency_us", "float", 14.0, 0.0, 10000.0, label="Network hop latency", unit="microseconds",
         help="Per step of a collective that crosses the network (a ring's inter-server step, a tree level): "
              "NCCL's own tuning constant for the Simple protocol (src/graph/tuning.cc, hwLatencies NET, 14 us); "
              "NVLink steps and each collective's base latency use NCCL's constants too (core.cost.collective)."),
    Spec("reserve_frac", "float", 0.0, 0.0, 0.9, label="Extra memory reserve",
         help="Share of each GPU's memory held back beyond what the memory model counts. A framework's accounting "
              "already counts its buffers, workspaces, loss peak, allocator reserve, CUDA context and NCCL buffers "
              "against the memory the device reports (core.frameworks; checked against measured peaks, "
              "docs/memory.md); under the textbook accounting about 0.1 covers what it leaves out."),
    Spec("pcie_bw", "float", 25.0, 0.1, 10000.0, label="Host link bandwidth", unit="GB/s per direction",
         help="Offload traffic per GPU: PCIe 4.0 x16 is 32 GB/s per direction on paper, about 25 in practice."),
    Spec("cpu_adam", "float", 1.0, 0.001, 1000.0, label="CPU optimizer rate", unit="billion parameters/s per GPU",
         help="With offload the optimizer step runs on the host: DeepSpeed's vectorised CPU-Adam updates on the "
              "order of 1e9 parameters per second per process (an order of magnitude; set your own)."),
    Spec("ep_overlap", "float", 0.0, 0.0, 1.0, label="MoE all-to-all hidden (other overlap)",
         help="Share of the expert all-to-all still exposed that some other overlap hides (a what-if, e.g. "
              "DeepSeek-V3's DualPipe, which hides nearly all of it, arXiv:2412.19437, 3.2.1). Megatron-Core's own "
              "overlap is the switch moe_a2a_overlap, whose hidden share follows from the schedule: none here by "
              "default."),
    Spec("moe_dispatcher", "choice", "alltoall", choices=MOE_DISPATCHERS, label="MoE token dispatcher",
         help="How the expert all-to-all moves tokens. alltoall = Megatron-Core's MoEAlltoAllTokenDispatcher "
              "(--moe-token-dispatcher-type alltoall): an NCCL all-to-all, one copy per routed expert. deepep = the "
              "flex dispatcher with DeepEP (--moe-token-dispatcher-type flex, DeepEP backend): each token crosses "
              "the network once per remote server and is fanned out over NVLink there (deepseek-ai/DeepEP README, "
              "normal kernels), at the rates DeepEP measured (core.cost.expert_comm). allgather = Megatron-Core's "
              "default MoEAllGatherTokenDispatcher: every token's hidden state gathered by all t x ep ranks of its "
              "group and the outputs reduce-scattered back (no EP overlap runs with it)."),
    Spec("moe_a2a_overlap", "bool", False, label="EP all-to-all overlap (Megatron-Core)",
         help="Megatron-Core >= 0.14 --overlap-moe-expert-parallel-comm (with --delay-wgrad-compute): in the 1F1B "
              "steady state one micro-batch's forward runs together with another's backward, each one's "
              "all-to-all behind the other's compute of the same layer (megatron/core/pipeline_parallel/"
              "schedules.py, combined 1F1B). Needs ep > 1, no full recompute and, with pipeline parallelism, the "
              "interleaved schedule (transformer_config.py asserts). Off by default, as in Megatron-Core."),
    Spec("moe_overlap_sync_us", "float", _fitted("moe_overlap_sync_us"), 0.0, 10000.0,
         label="EP overlap's cost per paired layer", unit="microseconds",
         help="Time Megatron-Core's EP overlap (moe_a2a_overlap) loses per MoE layer where a forward and a "
              "backward run paired: the layer is split into ten scheduled nodes that wait on each other across "
              "two streams, and that 'synchronization between different stages ... aggravates the CPU overhead' "
              "(Megatron-LM docs/discussions/deepseek-v3-gb200-optimization/deepseek-v3-gb200-optimization.md, "
              "removed in 3c1b98e). Fitted on the ModelZoo Qwen3-235B DeepEP pair with and without the overlap "
              "(scripts/fit_efficiency.py fit 'moe_overlap', assets/efficiency.json assumption_fits); 0 = the "
              "ideal schedule."),
    Spec("moe_fp8_dispatch", "bool", False, label="FP8 token dispatch",
         help="Send the dispatch in FP8 (1 byte per value) under FP8 training, as DeepSeek-V3 does "
              "(arXiv:2412.19437, 3.3); the combine and the gradients stay BF16. Megatron-Core dispatches the "
              "hidden states in their own BF16 (megatron/core/transformer/moe/fused_a2a.py at core_v0.14.0 hands "
              "DeepEP the BF16 tensor), hence false."),
    Spec("moe_capacity", "float", 1.0, 1.0, 8.0, label="MoE capacity factor",
         help="Expert slots per routed token: 1 = dropless routing (Megatron-LM's default, DeepSeek-V3); GShard and "
              "Switch pad each expert to 1.25-2 x its even share. Scales the all-to-all, the expert GEMMs and the "
              "expert activations. Under dropless routing it is also the load imbalance: the busiest expert rank's "
              "tokens over its even share, which sets the layer's pace (1 = balanced, as vendor benchmarks force "
              "it: Megatron-Bridge's tables 'force-balance the token distribution among experts')."),
)

# Why the defaults are what they are, where the Spec's help (shared with other pages) says only what it means.
WHY = {
    "eff": "0 uses the GPU's calibrated value (assets/efficiency.json, fitted by scripts/fit_efficiency.py on a "
           "named calibration set of published Megatron-LM runs); a number overrides it. Before the per-operation "
           "model this input was one fraction for all compute (0.6); it now applies to matrix multiplications only.",
    "mem_eff": "0 uses the GPU's calibrated value (assets/efficiency.json); a number overrides it.",
}

SEARCH = table(
    Spec("fix_t", "int", 0, 0, CLUSTER["gpus"].hi, label="Pin tensor-parallel t",
         help="0 searches every t that divides the heads and G; a number evaluates only that t."),
    Spec("fix_p", "int", 0, 0, CLUSTER["gpus"].hi, label="Pin pipeline p",
         help=f"0 searches every p that divides G, up to the layers and the simulator's {MAX_SIM_P} devices."),
    Spec("fix_d", "int", 0, 0, CLUSTER["gpus"].hi, label="Pin data-parallel d",
         help="0 searches every d = G / (t p cp); a number keeps only layouts with that d."),
    Spec("fix_cp", "int", 0, 0, MAX_CP, label="Pin context-parallel cp",
         help=f"0 searches cp = 1 and the powers of two up to {MAX_CP_SEARCH} that leave at least "
              f"{MIN_CP_TOKENS:,} tokens per rank; a number evaluates only that cp (each sequence split over cp "
              "ranks)."),
    Spec("fix_ep", "int", 0, 0, CLUSTER["gpus"].hi, label="Pin expert-parallel ep",
         help="0 searches every ep that divides the routed experts (1 for a dense model); a number evaluates "
              "only that ep. Expert parallelism regroups the t x d x cp ranks, it adds no GPUs."),
    Spec("fix_etp", "int", 0, 0, MAX_TP, label="Expert tensor parallelism",
         help="0 = t (Megatron-LM's default: experts split like the dense layers); 1 keeps every expert whole on "
              "one GPU (DeepSeek-V3, Megatron's recommendation for fine-grained experts)."),
    Spec("fix_replicate", "int", 1, 1, CLUSTER["gpus"].hi, label="Hybrid sharding: replicas",
         help="1 shards ZeRO over all d x cp data-parallel ranks. R > 1 is hybrid sharding (HSDP): ZeRO shards "
              "within d x cp / R ranks and keeps R copies, whose gradients are all-reduced once per step (PyTorch "
              "FSDP2 on a (replicate, shard) mesh, torchtitan's data_parallel_replicate_degree; Megatron-LM "
              "--num-distributed-optimizer-instances; DeepSpeed MiCS mics_shard_size). R must divide d x cp; "
              "ZeRO-0 rows are plain data parallelism either way."),
    Spec("zero", "choice", _CHOICE_ALL, choices=(_CHOICE_ALL, "0", "1", "2", "3"), label="ZeRO stage",
         help="ZeRO across the d data-parallel ranks (0 = plain data parallelism); all searches 0-3."),
    Spec("schedule", "choice", _CHOICE_ALL, choices=SEARCH_SCHEDULES.led_by(_CHOICE_ALL), label="Pipeline schedule",
         help="all searches 1f1b, interleaved, zb-h1; p = 1 runs no pipeline (listed as 1f1b)."),
    Spec("v", "int", 0, 0, int(PIPELINE["v"].hi), label="Interleaved chunks v",
         help="Chunks per device for the interleaved schedule (zbv and dualpipev always use 2). 0 searches v = 2 "
              "and every depth whose chunks Megatron-LM builds evenly (L or L + 2 layers divisible by p x v)."),
    Spec("recompute", "choice", _CHOICE_ALL, choices=(_CHOICE_ALL, *RECOMPUTE_MODES), label="Recompute",
         help="Activation recomputation: selective (attention core) or full (whole layers); all searches the three."),
    Spec("recompute_layers", "int", 0, 0, MODEL["layers"].hi, label="Full recompute: layers per stage",
         help="0 recomputes every layer under full recompute; N recomputes the first N layers of each pipeline "
              "stage (model chunk) and keeps the others' activations (Megatron-LM --recompute-method block "
              "--recompute-num-layers N; torchtitan's selective_ac_option K checkpoints every K-th layer, the same "
              "count). Only rows with full recompute read it."),
    Spec("sp", "choice", _CHOICE_ALL, choices=(_CHOICE_ALL, "on", "off"), label="Sequence parallelism",
         help="Shard layer norms and dropouts over the tensor-parallel group (only matters when t > 1)."),
    Spec("reshard", "choice", _CHOICE_ALL, choices=(_CHOICE_ALL, "on", "off"), label="ZeRO-3 reshard after forward",
         help="ZeRO-3 frees the gathered parameters after each layer's forward and gathers them again for its "
              "backward (on; DeepSpeed stage 3, FSDP reshard_after_forward=True), or keeps them gathered until the "
              "backward (off; FSDP2 reshard_after_forward=False: one gather less, the stage's full parameters in "
              "memory); all searches both."),
    Spec("tp_comm_overlap", "choice", _CHOICE_ALL, choices=(_CHOICE_ALL, "on", "off"), label="TP comm overlap",
         help="Run the tensor-parallel all-gathers and reduce-scatters inside their GEMMs (Megatron-LM "
              "--tp-comm-overlap; sequence parallelism, t within a server); all searches both."),
    Spec("offload", "choice", "none", choices=("none", "optimizer", "optimizer+params", _CHOICE_ALL),
         label="Offload", help="Optional ZeRO-Offload (optimizer state to CPU, ZeRO 1-3) or ZeRO-Infinity "
                               "(also parameters, ZeRO 3); all searches the three. NVMe offload is not searched "
                               "(it depends on the node's drives): size it on the ZeRO page."),
)

# What the plan must be runnable by, and how much memory it must leave free (shown next to the model and cluster).
TARGET = table(
    Spec("framework", "choice", "any", choices=("any", *FRAMEWORK_NAMES),
         label="Framework",
         help="Rank only layouts this framework can run (schedules, ZeRO with pipeline parallelism, sequence "
              "parallelism, recompute, offload; core/frameworks/<framework>.py names the source of each rule), so "
              "its export reproduces the row exactly. any ranks everything and says which frameworks run each row."),
    Spec("min_headroom", "float", 0.0, 0.0, MAX_HEADROOM_GB, label="Minimum free memory", unit="GB per GPU",
         help="Keep only layouts that leave at least this much of the usable memory free (GB = 1e9 bytes)."),
    Spec("memory_framework", "choice", "auto", choices=("auto", "textbook", *FRAMEWORK_NAMES),
         label="Memory counted as",
         help="Whose bytes a row's memory counts (core.frameworks). auto = the framework the row runs on: the chosen "
              "one, or under any the first of Megatron-LM, PyTorch, DeepSpeed that runs it. A framework's name counts "
              "every row as that framework stores it (a fork that runs layouts its capability table does not list); "
              "textbook = the ZeRO paper's and Korthikanti et al.'s count, without the buffers, loss peak and "
              "allocator reserve a framework adds."),
    ZERO["grad_dtype"],
    ZERO["optimizer_dtype"],
    ACTIVATIONS["loss"],
    ACTIVATIONS["compile"],
    ACTIVATIONS["repeat_kv"],
    ACTIVATIONS["sac_attention"],
    ACTIVATIONS["grouped_gemm"],
    ACTIVATIONS["recompute_modules"],
)

PLAN = table(
    *preset_choices().values(),
    CLUSTER["gpus"],
    CLUSTER["batch"],
    SEQ,
    Spec("mb_sizes", "floats", (1.0, 2.0), 1, CLUSTER["mbs"].hi, max_items=MAX_MB_SIZES, min_items=1,
         label="Micro-batch sizes to consider", unit="sequences",
         help="Whole numbers, comma-separated; each is tried with every layout."),
    Spec("precision", "choice", "auto", choices=("auto", "bf16", "fp16", "fp8"), label="Precision",
         help="16-bit mixed precision; auto is bf16 where the GPU has it, else fp16. Both keep 2-byte weights "
              "and gradients plus K bytes of optimizer state. fp8: BF16 training with FP8 GEMMs at the FP8 peak and "
              "1-byte GEMM weights and GEMM inputs (core.memory.fp8); master weights and optimizer state unchanged."),
    ZERO["optimizer"],
    ZERO["k"],
    *(AUTO_HEADS.get(k, MODEL[k]) for k in _custom_model),
    DEPTH,
    FLASH,
    DROPOUT,
    *GPU_OVERRIDES.values(),
    *SEARCH.values(),
    *TARGET.values(),
    *ASSUMPTIONS.values(),
)

# How the page shows a plan (not planner inputs: changing them never re-plans).
VIEW = table(
    Spec("feasible_only", "bool", True, label="Feasible only",
         help="Hide candidates that do not fit, cannot split the batch, or break a rule (their reasons stay in "
              "the CSV)."),
    Spec("rows", "int", 50, 5, 1000, label="Rows shown", help="Top-ranked candidates in the table."),
    Spec("y", "choice", "time", choices=("time", "mfu"), label="Chart",
         help="Step time (s) or MFU against memory per GPU."),
    Spec("pick", "int", 1, 1, 1000, label="Candidate to export (rank)",
         help="Rank of the feasible candidate whose DeepSpeed, Megatron-LM and FSDP2 configs are shown "
              "(1 = the recommendation)."),
)

# The work one plan may do (core.planner.budget): not a page input (a shared link must not lift it), the command
# line's --budget. Measured by bench/bench_budget.py on a 2-core container (other jobs running): a cold plan of
# 100,000-520,000 candidates costs 5-6 us and 1,500-2,100 bytes of peak memory per candidate, on top of the
# simulations (at most core.planner.simulation.SIM_BUDGET operations, ~0.9 GB at the largest questions). 400,000
# candidates: ~2.5 s and ~0.8 GB for the candidates, ~1.5 GB peak with the largest simulations
# (docs/hardening.md, "Work per request").
BUDGET = Spec("budget", "int", 400_000, 0, 50_000_000, label="Work budget", unit="candidates per plan",
              help="Candidates one plan may evaluate; above it the search is narrowed (offload only where the states "
                   "do not fit, coarser micro-batch sizes, fewer ep and cp values) and says so, or refused with what "
                   "to pin. 0 = no limit (a full search of millions of layouts takes minutes and gigabytes).")
LIMITS = table(BUDGET)

MODEL_KEYS = _custom_model
ANY_MODEL_KEYS = _any_model
GPU_KEYS = _custom_gpu  # every one applies to a preset too (0 / auto = the preset's)


@dataclass(frozen=True)
class PlannerParams:
    """One planning question: a cache key and the URL's contents, every field checked against PLAN."""

    model: str = PLAN["model"].default
    gpu: str = PLAN["gpu"].default
    gpus: int = PLAN["gpus"].default
    batch: int = PLAN["batch"].default
    mb_sizes: tuple[float, ...] = PLAN["mb_sizes"].default
    precision: str = PLAN["precision"].default
    optimizer: str = PLAN["optimizer"].default
    k: float | None = PLAN["k"].default
    layers: int = PLAN["layers"].default
    hidden: int = PLAN["hidden"].default
    heads: int = PLAN["heads"].default
    kv_heads: int = PLAN["kv_heads"].default
    head_dim: int = PLAN["head_dim"].default
    mtp_layers: int = PLAN["mtp_layers"].default
    ffn: int = PLAN["ffn"].default
    vocab: int = PLAN["vocab"].default
    seq: int = PLAN["seq"].default
    experts: int = PLAN["experts"].default
    top_k: int = PLAN["top_k"].default
    shared_experts: int = PLAN["shared_experts"].default
    expert_ffn: int = PLAN["expert_ffn"].default
    dense_layers: int = PLAN["dense_layers"].default
    kv_lora_rank: int = PLAN["kv_lora_rank"].default
    q_lora_rank: int = PLAN["q_lora_rank"].default
    qk_head_dim: int = PLAN["qk_head_dim"].default
    qk_rope_dim: int = PLAN["qk_rope_dim"].default
    v_head_dim: int = PLAN["v_head_dim"].default
    params: float = PLAN["params"].default
    mlp: str = PLAN["mlp"].default
    tied: bool = PLAN["tied"].default
    parallel: bool = PLAN["parallel"].default
    qk_norm: bool = PLAN["qk_norm"].default
    window: int = PLAN["window"].default
    window_share: float = PLAN["window_share"].default
    depth: int = PLAN["depth"].default
    flash: str = PLAN["flash"].default
    dropout: str = PLAN["dropout"].default
    gpu_mem: float = PLAN["gpu_mem"].default
    gpu_tflops: float = PLAN["gpu_tflops"].default
    gpu_tflops_fp8: float = PLAN["gpu_tflops_fp8"].default
    gpn: int = PLAN["gpn"].default
    intra_bw: float = PLAN["intra_bw"].default
    inter_bw: float = PLAN["inter_bw"].default
    gpu_bw: float = PLAN["gpu_bw"].default
    gpu_sms: int = PLAN["gpu_sms"].default
    calibration: str = PLAN["calibration"].default
    fix_t: int = 0
    fix_p: int = 0
    fix_d: int = 0
    fix_cp: int = 0
    fix_ep: int = 0
    fix_etp: int = 0
    fix_replicate: int = 1
    zero: str = _CHOICE_ALL
    schedule: str = _CHOICE_ALL
    v: int = PLAN["v"].default
    recompute: str = _CHOICE_ALL
    recompute_layers: int = 0
    sp: str = _CHOICE_ALL
    reshard: str = _CHOICE_ALL
    tp_comm_overlap: str = _CHOICE_ALL
    offload: str = PLAN["offload"].default
    framework: str = PLAN["framework"].default
    min_headroom: float = PLAN["min_headroom"].default
    memory_framework: str = PLAN["memory_framework"].default
    grad_dtype: str = PLAN["grad_dtype"].default
    optimizer_dtype: str = PLAN["optimizer_dtype"].default
    loss: str = PLAN["loss"].default
    compile: bool = PLAN["compile"].default
    repeat_kv: bool = PLAN["repeat_kv"].default
    sac_attention: bool = PLAN["sac_attention"].default
    grouped_gemm: bool = PLAN["grouped_gemm"].default
    recompute_modules: tuple[str, ...] = PLAN["recompute_modules"].default
    eff: float = PLAN["eff"].default
    mem_eff: float = PLAN["mem_eff"].default
    flash_kernel: str = PLAN["flash_kernel"].default
    compute_stack: str = PLAN["compute_stack"].default
    release: str = PLAN["release"].default
    megatron_deepspeed_share: float = PLAN["megatron_deepspeed_share"].default
    comm_eff: float = PLAN["comm_eff"].default
    tp_overlap: float = PLAN["tp_overlap"].default
    tp_overlap_eff: float = PLAN["tp_overlap_eff"].default
    tp_bwd_overlap: bool = PLAN["tp_bwd_overlap"].default
    grad_accum_fusion: bool = PLAN["grad_accum_fusion"].default
    dp_overlap: float = PLAN["dp_overlap"].default
    pp_overlap: bool = PLAN["pp_overlap"].default
    param_sync_ahead: bool = PLAN["param_sync_ahead"].default
    ends_in_split: bool = PLAN["ends_in_split"].default
    cp_comm: str = PLAN["cp_comm"].default
    dp_bucket: float = PLAN["dp_bucket"].default
    grad_reduce_bytes: float = PLAN["grad_reduce_bytes"].default
    ring_loss: float = PLAN["ring_loss"].default
    straggler: float = PLAN["straggler"].default
    production_margin: float = PLAN["production_margin"].default
    p2p_latency_us: float = PLAN["p2p_latency_us"].default
    net_latency_us: float = PLAN["net_latency_us"].default
    reserve_frac: float = PLAN["reserve_frac"].default
    pcie_bw: float = PLAN["pcie_bw"].default
    cpu_adam: float = PLAN["cpu_adam"].default
    ep_overlap: float = PLAN["ep_overlap"].default
    moe_dispatcher: str = PLAN["moe_dispatcher"].default
    moe_a2a_overlap: bool = PLAN["moe_a2a_overlap"].default
    moe_overlap_sync_us: float = PLAN["moe_overlap_sync_us"].default
    moe_fp8_dispatch: bool = PLAN["moe_fp8_dispatch"].default
    moe_capacity: float = PLAN["moe_capacity"].default

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            spec = PLAN[f.name]
            if value is None and spec.default is None:
                continue
            parsed = spec.parse(value)
            if spec.kind == "floats":  # at least one value: the spec's min_items
                if any(not float(x).is_integer() for x in parsed):
                    raise InputError(f"mb_sizes: micro-batch sizes must be whole numbers, got {value!r}")
                parsed = tuple(sorted({float(x) for x in parsed}))
            object.__setattr__(self, f.name, parsed)

    @classmethod
    def from_strings(cls, raw: dict[str, Any]) -> PlannerParams:
        """Strict (CLI): any bad value raises InputError."""
        return cls(**parse_strict(PLAN, raw))

    @classmethod
    def from_url(cls, raw: dict[str, Any]) -> tuple[PlannerParams, list[str]]:
        """Lenient (URL): bad values fall back to defaults, with one notice each."""
        values, notices = parse_lenient(PLAN, raw)
        try:
            return cls(**values), notices
        except InputError as exc:
            values["mb_sizes"] = PLAN["mb_sizes"].default
            return cls(**values), [*notices, f"{exc} - using the default micro-batch sizes."]

    @property
    def micro_batch_sizes(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self.mb_sizes)

    def searched(self, key: str) -> tuple:
        """The values a search dimension takes: everything when it is "all", else the pinned one."""
        value = getattr(self, key)
        if key == "zero":
            return (0, 1, 2, 3) if value == _CHOICE_ALL else (int(value),)
        if key == "schedule":
            return tuple(DEFAULT_SCHEDULES) if value == _CHOICE_ALL else (value,)
        if key == "recompute":
            return RECOMPUTE_MODES if value == _CHOICE_ALL else (value,)
        if key == "sp":
            return (False, True) if value == _CHOICE_ALL else (value == "on",)
        if key == "reshard":
            return (True, False) if value == _CHOICE_ALL else (value == "on",)
        if key == "tp_comm_overlap":
            return (False, True) if value == _CHOICE_ALL else (value == "on",)
        if key == "offload":
            return ("none", "optimizer", "optimizer+params") if value == _CHOICE_ALL else (value,)
        raise KeyError(key)

    def assumptions(self) -> dict[str, float | bool]:
        return {k: getattr(self, k) for k in ASSUMPTIONS}


# The command line's spelling of the model and GPU inputs (core.cli.plan; core.configs prints `plan` commands).
ARCH_FLAGS = {"layers": "--layers", "hidden": "--hidden", "heads": "--heads", "kv_heads": "--kv-heads",
              "head_dim": "--head-dim", "ffn": "--ffn", "vocab": "--vocab", "params": "--params", "mlp": "--mlp",
              "experts": "--experts", "top_k": "--top-k", "shared_experts": "--shared-experts",
              "expert_ffn": "--expert-ffn", "dense_layers": "--dense-layers", "parallel": "--parallel",
              "qk_norm": "--qk-norm", "window": "--window", "window_share": "--window-share",
              "mtp_layers": "--mtp-layers", "kv_lora_rank": "--kv-lora-rank",
              "q_lora_rank": "--q-lora-rank",
              "qk_head_dim": "--qk-head-dim", "qk_rope_dim": "--qk-rope-dim", "v_head_dim": "--v-head-dim"}
ANY_MODEL_FLAGS = {"depth": "--depth", "flash": "--flash", "dropout": "--dropout"}  # a preset takes these too
GPU_FLAGS = {"gpu_mem": "--gpu-mem", "gpu_tflops": "--gpu-tflops", "gpu_tflops_fp8": "--gpu-tflops-fp8",
             "gpn": "--gpus-per-node", "intra_bw": "--intra-bw", "inter_bw": "--inter-bw", "gpu_bw": "--gpu-bw",
             "gpu_sms": "--gpu-sms", "calibration": "--calibration"}
TRAIN_FLAGS = {"batch": "--global-batch", "mb_sizes": "--micro-batch-sizes"}
# plan --fix KEY=VALUE: the key as typed -> the planner input it pins
FIX_KEYS = {"t": "fix_t", "p": "fix_p", "d": "fix_d", "cp": "fix_cp", "ep": "fix_ep", "etp": "fix_etp",
            "replicate": "fix_replicate", "zero": "zero", "schedule": "schedule", "v": "v", "mbs": "mb_sizes",
            "recompute": "recompute", "recompute_layers": "recompute_layers", "sp": "sp", "offload": "offload",
            "reshard": "reshard", "tp_overlap": "tp_comm_overlap"}
