"""Inputs of the memory and communication models (ZeRO page, `python -m core zero|activations|equivalence`).

The caps double as the guard rails of the core functions themselves (core.memory's modules import
the MAX_* constants), so a planner that passes arrays meets the same limits as a user typing in the URL.
They are generous (a 100-trillion-parameter model, a million-way data parallelism) but finite: beyond them
the numbers stop meaning anything and float64 byte counts lose integer precision.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from core.params import Spec, table
from core.params.pipeline import PIPELINE, SCHEDULE_NAMES

MAX_PSI = 1e14  # parameters
MAX_ND = 1 << 20  # data-parallel ranks
MAX_TP = 1024  # tensor-parallel degree
MAX_PP = 1 << 14  # pipeline stages (one layer each for the deepest model allowed)
MAX_CP = 1 << 12  # context-parallel degree (each rank keeps at least 256 tokens of a million-token sequence)
MAX_GPUS = 1 << 24  # GPUs in a cluster
MAX_BYTES_PER_PARAM = 64.0  # K, and the 16-bit parameter / gradient byte counts
MAX_GPU_MEM_GB = 100_000.0  # one device's memory, GB = 1e9 bytes
MAX_BANDWIDTH_GBS = 1e6  # GB/s per rank

OPTIMIZER_NAMES = ("adam", "adam-8bit", "sgd-momentum", "sgd")
PRECISIONS = ("mixed", "fp32", "fp8")
SPLITS = ("even", "embedding-on-ends")
OFFLOADS = ("none", "optimizer", "optimizer+params", "nvme")
STAGE_CHOICES = ("all", "0", "1", "2", "3")
RECOMPUTE_MODES = ("none", "selective", "full")
# Megatron-LM's --recompute-modules that change what a layer keeps (megatron/core/transformer/transformer_config.py)
RECOMPUTE_MODULES = ("core_attn", "mla_up_proj", "layernorm", "moe_act", "mlp", "moe", "shared_experts")
# the planner's default: Megatron's own (core_attn) and MLA's up-projections as NVIDIA's MLA recipes recompute them
RECOMPUTE_MODULES_DEFAULT = ("core_attn", "mla_up_proj")
WRAP_POLICIES = ("block", "min-params", "root-only")
DS_ZERO2_FORMULAS = ("code", "docs")  # core.memory.deepspeed_estimate's revisions "current" and "legacy"
ACCOUNTING_NAMES = ("textbook", "megatron", "deepspeed", "torch")  # core.frameworks.KEYS
LOSS_KERNELS = ("auto", "upcast", "compiled", "fused", "native", "chunked", "bf16")  # core.frameworks.loss
LOSS_CHUNKS = 8  # torchtitan ChunkedLossWrapper.Config.num_chunks default (components/loss.py, 2026)
GRAD_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0}  # a gradient buffer's bytes per value, by its precision
GRAD_DTYPES = ("auto", *GRAD_BYTES)  # auto: the framework's own (core.frameworks)
OPTIMIZER_DTYPES = ("fp32", "bf16", "pure-bf16")

ZERO = table(
    Spec("params", "int", 7_500_000_000, 1, MAX_PSI, label="Parameters Psi", unit="parameters",
         help="Total trainable parameters of the model (7.5e9 is the ZeRO paper's example)."),
    Spec("nd", "int", 64, 1, MAX_ND, label="Data-parallel degree N_d",
         help="Ranks that hold replicas (DP) or shards (ZeRO) of the same parameters."),
    Spec("stage", "choice", "all", choices=STAGE_CHOICES, label="ZeRO stage",
         help="0 is plain data parallelism; 'all' shows every stage side by side."),
    Spec("optimizer", "choice", "adam", choices=OPTIMIZER_NAMES, label="Optimizer",
         help="Sets the optimizer-state bytes per parameter together with the precision (see the preset table)."),
    Spec("precision", "choice", "mixed", choices=PRECISIONS, label="Precision",
         help="mixed: 16-bit weights and gradients plus a 32-bit master copy; fp32: 32-bit everything, no copy; "
              "fp8: mixed with FP8 GEMMs (Transformer Engine): one-byte GEMM weights and linear-layer inputs, the "
              "embedding, output layer and norms stay 16-bit (core.memory.fp8)."),
    Spec("k", "float", None, 0.0, MAX_BYTES_PER_PARAM, label="Optimizer bytes per parameter K", unit="bytes",
         help="Overrides the preset's K (12 for mixed-precision Adam). Empty = take it from the preset."),
    Spec("t", "int", 1, 1, MAX_TP, label="Tensor-parallel degree t",
         help="Each tensor-parallel rank holds 1/t of every layer's parameters."),
    Spec("p", "int", 1, 1, MAX_PP, label="Pipeline stages p",
         help="Each stage holds its share of the layers (see the split assumption)."),
    Spec("split", "choice", "even", choices=SPLITS, label="Split over t x p",
         help="even: Psi/(t p) everywhere; embedding-on-ends: the embedding sits on the first stage and its "
              "logits copy on the last, the rest is split evenly (needs the embedding size)."),
    Spec("embedding", "int", 0, 0, MAX_PSI, label="Embedding parameters", unit="parameters",
         help="Parameters of the word-embedding / logits matrix (vocabulary x hidden), for embedding-on-ends."),
    Spec("offload", "choice", "none", choices=OFFLOADS, label="Offload",
         help="ZeRO-Offload moves the optimizer state to CPU memory (and gradient shards from stage 2); "
              "ZeRO-Infinity at stage 3 also moves the parameter shards (optimizer+params), or puts parameter "
              "shards and optimizer state on the node's NVMe drives (nvme; gradients stay in CPU memory)."),
    Spec("gpu_mem", "float", 80.0, 0.001, MAX_GPU_MEM_GB, label="GPU memory", unit="GB (1e9 bytes)",
         help="Memory of one GPU, in GB = 1e9 bytes (an '80 GB' A100 holds 80e9 bytes as sold)."),
    Spec("device_mem", "float", 0.0, 0.0, MAX_GPU_MEM_GB, label="Device memory", unit="GB (1e9 bytes)",
         help="What the GPU reports to PyTorch (torch.cuda.get_device_properties().total_memory: an 'H100 80GB' "
              "reports 79.18 GiB = 85.0 GB); a named GPU sets it. A framework's accounting is compared with it, the "
              "textbook's with the GPU memory above; 0 = the GPU memory above."),
    Spec("reserve", "float", 0.0, 0.0, MAX_GPU_MEM_GB, label="Reserve", unit="GB (1e9 bytes)",
         help="Memory kept free for communication buffers, the CUDA context and fragmentation."),
    Spec("reserve_frac", "float", 0.0, 0.0, 0.9, label="Reserve fraction",
         help="Share of the GPU memory kept free, applied before the fixed reserve."),
    Spec("gpus", "int", 0, 0, MAX_GPUS, label="GPUs available",
         help="Total GPUs; 0 means exactly t x p x N_d. A layout that needs more is rejected."),
    Spec("gpus_per_node", "int", 8, 1, 1024, label="GPUs per node",
         help="Used to report CPU memory per node when offloading."),
    Spec("bw", "float", 100.0, 0.001, MAX_BANDWIDTH_GBS, label="Bandwidth per rank", unit="GB/s (1e9 B/s)",
         help="Per-rank link bandwidth used by the ring collectives of the data-parallel group."),
    Spec("nvme_tb", "float", 15.36, 0.001, 1e4, label="NVMe per node", unit="TB (1e12 bytes)",
         help="Drive capacity per node for the nvme offload (DGX A100: 4 x 3.84 TB U.2 NVMe)."),
    Spec("nvme_bw", "float", 25.0, 0.01, 1e4, label="NVMe bandwidth per node", unit="GB/s (1e9 B/s)",
         help="Sequential read/write of the node's striped drives, shared by its GPUs (about 6 GB/s per PCIe 4 "
              "drive, four drives); sets the nvme offload's time per step."),
    Spec("expert_params", "int", 0, 0, MAX_PSI, label="Routed-expert parameters", unit="parameters",
         help="Mixture of experts: the part of Psi in routed experts (0 = a dense model). Expert parallelism "
              "spreads it over ep ranks; the rest is sharded as before."),
    Spec("ep", "int", 1, 1, MAX_ND, label="Expert-parallel degree ep",
         help="Each GPU holds 1/ep of every MoE layer's routed experts; ep divides N_d (Megatron folds it into "
              "the data-parallel ranks), and ZeRO shards the experts' states over the N_d / ep ranks holding "
              "the same experts."),
    Spec("etp", "int", 0, 0, MAX_TP, label="Expert tensor-parallel degree etp",
         help="Ranks that split each expert (0 = t, Megatron-LM's default; 1 keeps every expert whole on one GPU): "
              "a GPU holds 1/(ep x etp) of a stage's routed experts, sharded by ZeRO over t x N_d / (ep x etp)."),
    Spec("largest_layer", "int", 0, 0, MAX_PSI, label="Largest layer", unit="parameters",
         help="Parameters of the largest single module: DeepSpeed's stage-3 estimate gathers it in full, and "
              "so does ZeRO-Infinity when the parameters are offloaded. 0 on the ZeRO page with a named model: "
              "that model's (its embedding V x h, or one MLP matrix h x f when wider)."),
    Spec("reshard", "bool", True, label="ZeRO-3 reshards after forward",
         help="On: ZeRO-3 frees each block's gathered parameters after its forward and gathers them again for the "
              "backward (DeepSpeed stage 3, FSDP reshard_after_forward=True). Off: the stage's parameters stay "
              "gathered from forward to backward (FSDP2 reshard_after_forward=False: one gather less, more memory)."),
    Spec("ends_in_split", "bool", False, label="Embedding and loss count as layers of the pipeline split",
         help="Megatron-LM --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split (or a "
              "--pipeline-model-parallel-layout that does the same, with one slot per multi-token prediction "
              "depth: Megatron-Bridge's DeepSeek-V3 'Et|(tt|)*30mL'): the first and last pipeline stages give a "
              "layer slot each to the embedding and the loss, so they are not slower or fuller than the others; off, "
              "the layers split evenly and the ends carry the embedding and output layer on top (the default). "
              "Memory: with the embedding-on-ends split, whole layers per stage (core.model.stage_split), a "
              "middle device may then hold the most."),
    Spec("accounting", "choice", "textbook", choices=ACCOUNTING_NAMES, label="Counted as",
         help="Whose bytes (core.frameworks): textbook = the ZeRO paper (2 + 2 + K bytes per parameter) and "
              "Korthikanti et al.'s activations, nothing else; megatron, deepspeed, torch = what that framework's code "
              "stores and keeps (Megatron-LM's fp32 gradient buffer, DeepSpeed's buckets, FSDP2's fp32 shards), its "
              "loss, workspaces, the caching allocator's reserve and the CUDA context, as the planner counts its "
              "rows."),
    Spec("grad_dtype", "choice", "auto", choices=GRAD_DTYPES,
         label="Gradient buffer precision",
         help="auto = the framework's own: Megatron-LM keeps fp32 main gradients under BF16 (its default; "
              "--grad-reduce-in-bf16 or the precision-aware optimizer's --main-grads-dtype bf16 make them bf16) and "
              "fp16 ones under FP16 (it forces fp32 accumulation only for bf16), DeepSpeed's ZeRO keeps them in the "
              "model's 16-bit type, FSDP2 reduces them to fp32 shards. fp16 and bf16 both count 2 bytes; no effect "
              "in the textbook accounting."),
    Spec("optimizer_dtype", "choice", "fp32", choices=OPTIMIZER_DTYPES, label="Optimizer state precision",
         help="fp32: Adam's moments and the master weights in fp32 (every framework's default). bf16: Megatron-LM's "
              "precision-aware optimizer (--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype "
              "bf16): bf16 moments, and the fp32 master kept as the 16-bit remainder beside the bf16 weight "
              "(Transformer Engine FusedAdam store_param_remainders); elsewhere bf16 moments. pure-bf16: the model "
              "is built in bf16 and the optimizer steps those weights, with no fp32 master: 16-bit weights, "
              "gradients and Adam moments (torchtune's full fine-tuning and NeMo Automodel build the model in bf16 "
              "under FSDP2; Megatron-LM and DeepSpeed always keep an fp32 master). No effect in the textbook "
              "accounting."),
    Spec("deepspeed", "bool", False, label="DeepSpeed convention",
         help="Also show what DeepSpeed's estimate_zero2/zero3_model_states_mem_needs compute (GiB printed as GB)."),
    Spec("deepspeed_zero2", "choice", "code", choices=DS_ZERO2_FORMULAS, label="DeepSpeed's ZeRO-2 formula",
         help="code: what DeepSpeed's stage_1_and_2.py computes today, 2 Psi + 18 Psi / GPUs (t5-3b on 8 GPUs: "
              "11.28 GiB); docs: what its memory.rst prints, 4 Psi + 16 Psi / GPUs from the older stage2.py "
              "(15.93 GiB, printed as 'GB'). With optimizer offload both give 2 Psi."),
)

ACTIVATIONS = table(
    Spec("seq", "int", 2048, 1, 1 << 20, label="Sequence length s", unit="tokens"),
    Spec("mb", "int", 1, 1, 1 << 16, label="Micro-batch size b", unit="sequences"),
    Spec("hidden", "int", 12288, 1, 1 << 17, label="Hidden size h"),
    Spec("heads", "int", 96, 1, 1 << 12, label="Attention heads a"),
    Spec("layers", "int", 96, 1, 1 << 14, label="Transformer layers L"),
    Spec("vocab", "int", 0, 0, 1 << 22, label="Vocabulary V",
         help="Adds the output layer and fp32 logits on the last stage; 0 leaves them out."),
    Spec("t", "int", 1, 1, MAX_TP, label="Tensor-parallel degree t"),
    Spec("cp", "int", 1, 1, MAX_CP, label="Context-parallel degree c",
         help="Each rank keeps s / c tokens of every sequence (Megatron-LM CP, ring attention): all activations / c."),
    Spec("flash", "bool", False, label="Flash attention",
         help="Fused attention kernels (FlashAttention, cuDNN, SDPA) keep no a s^2 scores: 34 s b h + 5 a s^2 b -> "
              "34 s b h per layer, as selective recomputation gives."),
    Spec("compile", "bool", False, label="torch.compile (PyTorch)",
         help="PyTorch rows run torch.compile on each transformer block (torchtitan --training.compile): the "
              "compiled block keeps fewer tensors for its backward (core.frameworks.pytorch). No effect on "
              "Megatron-LM or DeepSpeed rows."),
    Spec("repeat_kv", "bool", False, label="K/V repeated per head (PyTorch)",
         help="PyTorch rows' attention widens K and V to every query head before the attention kernel, which keeps "
              "them at that width (torchtitan's repeat_kv until 2026-01-27, ff0829c10; torchtune's expand). false: "
              "the kernel takes them at their own width (SDPA enable_gqa, FlexAttention, Transformer Engine: "
              "torchtitan since, NeMo Automodel, Hugging Face). Grouped-query models only; no effect on Megatron-LM "
              "or DeepSpeed rows."),
    Spec("sac_attention", "bool", True, label="Per-op recompute saves attention (PyTorch)",
         help="PyTorch rows' selective (per-op) recompute keeps the attention kernel's output and log-sum-exp. "
              "false: the kernel is not on the policy's save list and runs again in the backward, as torchtitan "
              "ran on Blackwell from 2025-05-14 (3b85aa31f, cuDNN attention on sm100) until its list named that "
              "kernel on 2025-12-01 (b39377f9f). Memory and step time; no effect on other frameworks."),
    Spec("loss", "choice", "auto", choices=LOSS_KERNELS, label="Cross-entropy kernel",
         help="How the loss meets the logits. auto = the framework's current default: Megatron-LM's vocab-parallel "
              "cross-entropy on an fp32 copy (its Transformer Engine fusion is disabled at core_v0.19.0), PyTorch's "
              "compiled with the model when torch.compile is on (torchtitan since April 2025), else upcast. upcast: "
              "an fp32 copy of the logits and the fp32 log-softmax and its gradients (torchtitan before April 2025, "
              "Hugging Face); compiled: torch.compile's fused log-softmax; fused: a kernel that writes the gradient "
              "into the bf16 logits in place (Transformer Engine's, Liger's); native: Megatron-LM's "
              "--cross-entropy-loss-fusion with its default --cross-entropy-fusion-impl native, whose compiled "
              "pieces keep the fp32 copy and the fp32 softmax side by side (4 bytes per logit above upcast); "
              "chunked: the output layer and the loss run a chunk of the tokens at a time, each chunk's backward "
              "right after its forward (torchtitan's ChunkedLossWrapper, its default loss since 2026, 8 chunks), "
              "so no logits are kept and the peak is one chunk's (the framework's own path, compiled with "
              "torch.compile); bf16: the cross-entropy on the 16-bit logits with no fp32 copy (NeMo Automodel's "
              "MaskedCrossEntropy with fp32_upcast false), log-softmax's 16-bit output kept beside the logits."),
    Spec("recompute_modules", "choices", RECOMPUTE_MODULES_DEFAULT, choices=RECOMPUTE_MODULES,
         label="Selective recompute modules (Megatron-LM)",
         help="What Megatron-LM's selective recompute re-runs (--recompute-modules): core_attn the attention core, "
              "mla_up_proj latent attention's up-projections and RoPE (MLA models), layernorm the norms that are "
              "modules of their own (a MoE layer's pre-MLP norm, MLA's input norm), moe_act the experts' "
              "activation, mlp a dense layer's MLP, moe the whole MoE layer (its input kept), shared_experts the "
              "shared experts. Each drops its tensors from selective rows' activations and adds its forward to "
              "the step time. Default core_attn + mla_up_proj (Megatron's default core_attn; the up-projections "
              "as NVIDIA's MLA recipes run them). Other frameworks' selective recompute is their own."),
    Spec("grouped_gemm", "bool", True, label="Grouped GEMM experts (Megatron-LM)",
         help="Megatron-LM MoE layers run Transformer Engine's grouped GEMM (--moe-grouped-gemm, as NVIDIA's MoE "
              "recipes do), which allocates a cuBLAS workspace per compute stream: 4 x 32 MiB more per GPU on "
              "Hopper. false = Megatron-LM's default SequentialMLP. No effect on dense models or other frameworks."),
    Spec("tp_comm_overlap", "bool", False, label="TP comm overlap (Megatron-LM)",
         help="Megatron-LM --tp-comm-overlap: Transformer Engine's userbuffer GEMMs take three more cuBLAS "
              "workspaces (3 x 32 MiB on Hopper). The planner searches it per row; its links set it."),
    Spec("fp8", "bool", False, label="FP8 activations",
         help="Inputs of the linear layers saved in FP8 (1 byte) for the backward, as Transformer Engine does: "
              "34 -> 27 s b h per layer."),
    Spec("sequence_parallel", "bool", False, label="Sequence parallelism",
         help="Shard layer norms and dropouts along the sequence within the tensor-parallel group."),
    Spec("recompute", "choice", "none", choices=RECOMPUTE_MODES, label="Activation recomputation",
         help="selective: recompute the attention core; full: keep only each layer's input."),
    Spec("p", "int", 1, 1, MAX_PP, label="Pipeline stages p", help="Layers per stage = ceil(L / p)."),
    Spec("inflight", "float", None, 0.0, 1e5, label="Micro-batches in flight",
         help="Micro-batches whose activations a stage holds at its peak (fractional for interleaving). "
              "Empty = ask the pipeline simulator for the chosen schedule."),
    Spec("schedule", "choice", "1f1b", choices=SCHEDULE_NAMES, label="Schedule",
         help="Pipeline schedule whose simulated peak gives the micro-batches in flight."),
    Spec("m", "int", PIPELINE["m"].default, PIPELINE["m"].lo, PIPELINE["m"].hi, label="Micro-batches m"),
    Spec("v", "int", PIPELINE["v"].default, PIPELINE["v"].lo, PIPELINE["v"].hi, label="Chunks per device v",
         help=PIPELINE["v"].help),
    Spec("params", "int", None, 1, MAX_PSI, label="Parameters Psi (optional)", unit="parameters",
         help="Also report the model states (mixed-precision Adam, even t x p split) and the sum with activations."),
    Spec("nd", "int", 1, 1, MAX_ND, label="Data-parallel degree N_d"),
    Spec("zero_stage", "int", 0, 0, 3, label="ZeRO stage", help="0 is plain data parallelism."),
    Spec("gpu_mem", "float", 80.0, 0.001, MAX_GPU_MEM_GB, label="GPU memory", unit="GB (1e9 bytes)"),
)

FSDP = table(
    Spec("layers", "int", 32, 1, 1 << 14, label="Transformer blocks"),
    Spec("block_params", "int", 200_000_000, 1, MAX_PSI, label="Parameters per block", unit="parameters"),
    Spec("policy", "choice", "block", choices=WRAP_POLICIES, label="Wrap policy",
         help="block: one unit per transformer block; min-params: group blocks until a minimum size; "
              "root-only: only the root is wrapped (the whole model is one unit)."),
    Spec("min_params", "int", 100_000_000, 1, MAX_PSI, label="Minimum unit size", unit="parameters"),
    Spec("prefetch", "bool", True, label="Prefetch next unit",
         help="Gather the next unit while the current one computes (FSDP's forward/backward prefetch)."),
)

EQUIVALENCE = table(
    Spec("ranks", "int", 4, 1, 64, label="Data-parallel ranks R"),
    Spec("steps", "int", 50, 1, 1000, label="Adam steps"),
    Spec("size", "int", 1000, 1, 100_000, label="Parameters in the toy problem"),
    Spec("seed", "int", 0, 0, 2**32 - 1, label="Random seed"),
    Spec("clip", "float", 1.0, 1e-6, 1e6, label="Global-norm clip threshold",
         help="Threshold for the clipped run; small values make clipping active on every step."),
)


def _check_optional(obj, specs) -> None:
    """Validate every field that has a spec; None is allowed where the spec's default is None."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        if f.name in specs and not (value is None and specs[f.name].default is None):
            specs[f.name].check(value)


@dataclass(frozen=True)
class ZeroParams:
    """One ZeRO-page parameter set: a cache key and the URL's contents, checked against ZERO."""

    params: int = ZERO["params"].default
    nd: int = ZERO["nd"].default
    stage: str = ZERO["stage"].default
    optimizer: str = ZERO["optimizer"].default
    precision: str = ZERO["precision"].default
    k: float | None = ZERO["k"].default
    t: int = ZERO["t"].default
    p: int = ZERO["p"].default
    split: str = ZERO["split"].default
    embedding: int = ZERO["embedding"].default
    offload: str = ZERO["offload"].default
    gpu_mem: float = ZERO["gpu_mem"].default
    reserve: float = ZERO["reserve"].default
    reserve_frac: float = ZERO["reserve_frac"].default
    device_mem: float = ZERO["device_mem"].default
    gpus: int = ZERO["gpus"].default
    gpus_per_node: int = ZERO["gpus_per_node"].default
    bw: float = ZERO["bw"].default
    nvme_tb: float = ZERO["nvme_tb"].default
    nvme_bw: float = ZERO["nvme_bw"].default
    largest_layer: int = ZERO["largest_layer"].default
    expert_params: int = ZERO["expert_params"].default
    ep: int = ZERO["ep"].default
    etp: int = ZERO["etp"].default
    reshard: bool = ZERO["reshard"].default
    ends_in_split: bool = ZERO["ends_in_split"].default
    accounting: str = ZERO["accounting"].default
    grad_dtype: str = ZERO["grad_dtype"].default
    optimizer_dtype: str = ZERO["optimizer_dtype"].default
    deepspeed: bool = ZERO["deepspeed"].default
    deepspeed_zero2: str = ZERO["deepspeed_zero2"].default

    @property
    def compared_gb(self) -> float:
        """The GPU memory the bytes are compared with: the device's as PyTorch sees it under a framework's
        accounting (which counts the CUDA context, buffers and allocator reserve inside it), the labelled memory
        under the textbook's."""
        return self.device_mem if self.accounting != "textbook" and self.device_mem else self.gpu_mem

    def __post_init__(self) -> None:
        _check_optional(self, ZERO)
