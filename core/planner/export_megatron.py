"""A layout as a Megatron-LM pretrain_gpt.py command line (torchrun launch included).

Every flag is one Megatron-LM's argument parser has at the pinned release (assets/megatron_flags.json, checked by
tests); a layout Megatron-LM cannot run exactly (a zero-bubble or V schedule, Megatron-FSDP with pipeline
parallelism, parameter offload) is refused with the reason, never rewritten into another layout.
"""

from __future__ import annotations

import shlex

from core.model import stage_split
from core.planner import export_switches
from core.planner.export_base import Export, confirmed, launch, refusal
from core.planner.layout import Layout


def _uneven_split(layers: int, p: int) -> tuple[int, int] | None:
    """First/last stage layer counts when L does not divide by p (middle stages get ceil(L/p))."""
    if layers % p == 0 or p < 3:
        return None
    middle = -(-layers // p)
    rest = layers - middle * (p - 2)
    if rest < 2:
        return None
    return rest // 2, rest - rest // 2


def megatron_args(layout: Layout) -> tuple[list[str], list[str]]:
    """pretrain_gpt.py arguments (flag, value, flag, ...) and notes."""
    m, t, p = layout.model, layout.t, layout.p
    a: list[str] = ["--tensor-model-parallel-size", str(t), "--pipeline-model-parallel-size", str(p)]
    notes: list[str] = []
    if layout.schedule == "interleaved" and p > 1:
        a += ["--num-virtual-stages-per-pipeline-rank", str(layout.v)]
    a += _pipeline_split(layout, notes)
    if layout.sequence_parallel and t > 1:
        a.append("--sequence-parallel")
        if layout.tp_comm_overlap:
            a.append("--tp-comm-overlap")
            notes.append("--tp-comm-overlap runs the TP all-gathers and reduce-scatters inside their GEMMs "
                         "(Transformer Engine userbuffers, TP within one server).")
    a += ["--num-layers", str(m.layers), "--hidden-size", str(m.hidden), "--ffn-hidden-size", str(m.ffn),
          "--num-attention-heads", str(m.heads)]
    if m.kv_heads < m.heads:
        a += ["--group-query-attention", "--num-query-groups", str(m.kv_heads)]
    if m.decoupled_heads and m.mla is None:  # Megatron-LM's default kv_channels is hidden_size // num_attention_heads
        a += ["--kv-channels", str(m.head_dim)]
    a += _latent_attention(layout) + _experts(layout, notes) + _context(layout, notes)
    if m.mtp_layers:
        a += ["--mtp-num-layers", str(m.mtp_layers)]
        notes.append(f"{m.mtp_layers} multi-token prediction depth(s) on the last stage (DeepSeek-V3's MTP)"
                     + ("." if m.position == "rope" else "; Megatron-LM asserts rotary (or no) position embeddings "
                        "for MTP (megatron/training/arguments.py validate_args), so this model needs them."))
    a += ["--seq-length", str(m.seq), "--max-position-embeddings", str(m.seq)]
    if m.position == "rope":
        a += ["--position-embedding-type", "rope"]
    elif m.position == "learned":
        a += ["--position-embedding-type", "learned_absolute"]
    else:
        notes.append("ALiBi has no --position-embedding-type choice in Megatron-LM (BLOOM used the Megatron-DeepSpeed "
                     "fork's alibi option); the command keeps Megatron's default learned positions.")
    if m.swiglu:
        a.append("--swiglu")
    if not m.tied:
        a.append("--untie-embeddings-and-output-weights")
    if m.norm == "rmsnorm":
        a += ["--normalization", "RMSNorm"]
    if not m.bias:
        a.append("--disable-bias-linear")
    if m.qk_norm and m.mla is None:  # per-head q and k norms (Qwen3); with MLA the flag norms the latents instead
        a.append("--qk-layernorm")
    if m.window:
        a += _window_flags(m, notes)
    if m.embed_norm:
        notes.append("The layer norm after the embedding (BLOOM) has no Megatron-LM flag.")
    if not m.dropout:  # Megatron-LM's defaults are 0.1: without these the run keeps masks the row does not count
        a += ["--attention-dropout", "0.0", "--hidden-dropout", "0.0"]
    if not m.flash_attention:  # the default (auto) picks a fused kernel, which the row does not count
        a += ["--attention-backend", "unfused"]
    a += ["--micro-batch-size", str(layout.micro_batch_size), "--global-batch-size", str(layout.global_batch)]
    if layout.recompute == "full" and layout.recompute_layers:  # the first N layers of each stage (chunk)
        a += ["--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers",
              str(layout.recompute_layers)]
    elif layout.recompute == "full":
        a += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    elif layout.recompute == "selective":
        a += _selective(layout, notes)
    a += _sharding(layout, notes)
    a.append("--bf16" if layout.half == "bf16" else "--fp16")
    a += _fp8(layout, notes) + export_switches.megatron_flags(layout, notes)
    a += ["--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", str(m.vocab),
          "--train-iters", "100", "--lr", "1.0e-4"]
    notes.append(f"d = {layout.d} is what Megatron derives: world size {layout.n_gpus} / (t x p x cp = "
                 f"{t * p * layout.cp}); it then runs {layout.grad_accum_steps} micro-batches per step (global batch / "
                 "(micro-batch x d)).")
    notes.append("--mock-data with NullTokenizer makes this a runnable throughput test; swap in --data-path and your "
                 f"tokenizer to train. Megatron pads the vocabulary to a multiple of 128 x t = {128 * t}.")
    if t > 1 and "--use-megatron-fsdp" not in a and "--overlap-moe-expert-parallel-comm" in a:
        notes.append("With tensor parallelism and the EP overlap Megatron only warns (before Blackwell): "
                     "CUDA_DEVICE_MAX_CONNECTIONS=1 (set here) favours the TP overlap, 32 the EP overlap.")
    elif t > 1 and "--use-megatron-fsdp" not in a:
        notes.append("Megatron asserts CUDA_DEVICE_MAX_CONNECTIONS=1 with tensor parallelism (before Blackwell).")
    return a, notes


def _pipeline_split(layout: Layout, notes: list[str]) -> list[str]:
    """How the layers split over the stages: the ends counted in the split where the question says so, else
    Megatron-LM's flags for a count that does not divide by p."""
    m, p = layout.model, layout.p
    out: list[str] = []
    if layout.ends_in_split and p > 1:
        out += _ends_in_split(layout, notes)
    elif m.layers % p and (m.layers + 2) % p == 0:
        out += ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
        notes.append(f"{m.layers} layers over {p} stages: counting the embedding and the loss as one layer each gives "
                     f"{(m.layers + 2) // p} per stage, so the first and last stages hold one transformer layer fewer "
                     "(what Llama 3 405B and BLOOM did).")
    elif m.layers % p:
        split = _uneven_split(m.layers, p)
        if split is None:
            notes.append(f"{m.layers} layers do not split over {p} stages; Megatron needs layers divisible by the "
                         "pipeline size or an explicit first/last stage size.")
        else:
            out += ["--decoder-first-pipeline-num-layers", str(split[0]),
                  "--decoder-last-pipeline-num-layers", str(split[1])]
            notes.append(f"{m.layers} layers over {p} stages: first {split[0]}, last {split[1]}, the others "
                         f"{-(-m.layers // p)} each.")
    return out


def _ends_in_split(layout: Layout, notes: list[str]) -> list[str]:
    """The embedding, the loss and each prediction depth as layer slots of the split (core.model.stage_split):
    Megatron-LM's two account-for flags where they say it exactly (no MTP, equal stages), else the layout string."""
    m, p = layout.model, layout.p
    stages = p * (layout.v if layout.schedule == "interleaved" else 1)
    if not m.mtp_layers and (m.layers + 2) % stages == 0:
        notes.append(f"The embedding and the loss count as one layer each: {(m.layers + 2) // stages} slots per "
                     "stage, the first and last stages one transformer layer fewer.")
        return ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
    plan = stage_split.layout_string(m.layers, stages, m.mtp_layers)
    notes.append(f"Layers per stage as timed: {plan} (E embedding, t layer, m prediction depth, L loss).")
    return ["--pipeline-model-parallel-layout", plan]


def _runs(values: list[int]) -> str:
    """A layer pattern as Megatron's --moe-layer-freq Python list expression, run-length encoded: ([0]*3+[1]*58)."""
    parts, i = [], 0
    while i < len(values):
        j = i
        while j < len(values) and values[j] == values[i]:
            j += 1
        parts.append(f"[{values[i]}]*{j - i}")
        i = j
    return "(" + "+".join(parts) + ")"


def _latent_attention(layout: Layout) -> list[str]:
    mla = layout.model.mla
    if mla is None:
        return []
    out = ["--multi-latent-attention", "--kv-lora-rank", str(mla.kv_lora_rank), "--qk-head-dim", str(mla.qk_head_dim),
           "--qk-pos-emb-head-dim", str(mla.qk_rope_dim), "--v-head-dim", str(mla.v_head_dim)]
    return (["--q-lora-rank", str(mla.q_lora_rank)] if mla.q_lora_rank else []) + out


def _selective(layout: Layout, notes: list[str]) -> list[str]:
    """--recompute-granularity selective with the plan's recompute modules that apply to this model (Megatron-LM's
    default, core_attn alone, needs no list); moe_act needs grouped GEMM (transformer_config.py asserts it)."""
    m = layout.model
    applies = {"core_attn": True, "mla_up_proj": m.mla is not None, "layernorm": m.is_moe or m.mla is not None,
               "moe_act": m.is_moe, "mlp": not m.is_moe or m.moe.first_dense > 0,
               "moe": m.is_moe, "shared_experts": m.is_moe and m.moe.shared > 0}
    modules = [x for x in layout.recompute_modules if applies[x]]
    dropped = [x for x in layout.recompute_modules if not applies[x] and x != "mla_up_proj"]  # default: MLA only
    if dropped:
        notes.append(f"--recompute-modules leaves out {', '.join(dropped)}: no such module in this model, so the "
                     "plan counted nothing for it either.")
    if "moe_act" in modules and not layout.grouped_gemm:
        modules.remove("moe_act")
        notes.append("Megatron-LM refuses moe_act without --moe-grouped-gemm (transformer_config.py): left out, so "
                     "the run keeps the experts' activations the plan dropped; plan with grouped_gemm true.")
    if not modules:
        notes.append("No recompute module applies to this model: the command recomputes nothing, and the row's "
                     "selective recompute keeps everything, as counted.")
        return []
    out = ["--recompute-granularity", "selective"]
    return out if modules == ["core_attn"] else out + ["--recompute-modules", *modules]


def _experts(layout: Layout, notes: list[str]) -> list[str]:
    m = layout.model
    if not m.is_moe:
        return []
    moe, width = m.moe, m.moe.expert_ffn or m.ffn
    out = ["--num-experts", str(moe.experts), "--moe-router-topk", str(moe.top_k), "--moe-ffn-hidden-size", str(width),
           "--expert-model-parallel-size", str(layout.ep), "--expert-tensor-parallel-size", str(layout.etp),
           *DISPATCHER_FLAGS[layout.moe_dispatcher]]
    if layout.grouped_gemm:  # the plan counted its four cuBLAS workspaces; without it Megatron runs SequentialMLP
        out.append("--moe-grouped-gemm")
    if moe.groups > 1:
        out += ["--moe-router-num-groups", str(moe.groups), "--moe-router-group-topk", str(moe.group_topk)]
    out += _a2a_overlap(layout, notes)
    if moe.shared:
        out += ["--moe-shared-expert-intermediate-size", str(moe.shared * width)]
    dense, n_moe = moe.layer_counts(m.layers)
    if dense:
        pattern = [int(i >= moe.first_dense and (i - moe.first_dense) % moe.every == 0) for i in range(m.layers)]
        out += ["--moe-layer-freq", _runs(pattern)]
    notes.append(f"{moe.experts} experts over ep = {layout.ep}: {moe.experts // layout.ep} per GPU in each of the "
                 f"{n_moe} MoE layers; expert tensor parallelism {layout.etp}; dropless routing (no capacity factor), "
                 f"{DISPATCHER_NOTE[layout.moe_dispatcher]}.")
    return out


# The token dispatcher's flags: DeepEP is the flex dispatcher with --moe-enable-deepep, as Megatron-Bridge's 25.09
# recipe and the MoE ModelZoo run it; core_v0.19.0 still takes the flag (deprecated: its flex backend defaults
# to deepep), the older confirmed parser (assets/tool_options.json) has no --moe-flex-dispatcher-backend yet.
DISPATCHER_FLAGS = {"alltoall": ("--moe-token-dispatcher-type", "alltoall"),
                    "allgather": ("--moe-token-dispatcher-type", "allgather"),
                    "deepep": ("--moe-token-dispatcher-type", "flex", "--moe-enable-deepep")}
DISPATCHER_NOTE = {"alltoall": "all-to-all dispatch (NCCL)",
                   "allgather": "all-gather dispatch over the t x ep group (Megatron-Core's default dispatcher)",
                   "deepep": "DeepEP dispatch (flex dispatcher: once per remote server, NVLink fan-out; needs DeepEP "
                             "installed)"}


def _a2a_overlap(layout: Layout, notes: list[str]) -> list[str]:
    """Megatron-Core's batch-level EP overlap where it can run (what core.cost.moe_overlap credits), else a note."""
    if not layout.moe_a2a_overlap:
        return []
    why = ("ep = 1" if layout.ep == 1 else "full recompute" if layout.recompute == "full" else
           "the allgather dispatcher (it needs alltoall or flex)" if layout.moe_dispatcher == "allgather" else
           f"the {layout.schedule} schedule (with p > 1 it needs the interleaved one)"
           if layout.p > 1 and layout.schedule != "interleaved" else "")
    if why:
        notes.append(f"EP all-to-all overlap was asked for but Megatron-Core refuses it with {why} "
                     "(transformer_config.py): not emitted, and the step time does not count on it.")
        return []
    notes.append("--overlap-moe-expert-parallel-comm --delay-wgrad-compute: each micro-batch's all-to-all runs "
                 "behind another's compute in the 1F1B steady state (Megatron-Core >= 0.14).")
    return ["--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"]


def _context(layout: Layout, notes: list[str]) -> list[str]:
    if layout.cp == 1:
        return []
    how = ("K/V passed in a ring (p2p), hidden behind the attention" if layout.cp_comm == "p2p" else
           "the whole sequence's K/V all-gathered before the attention (exposed; what a document mask needs)")
    notes.append(f"Context parallelism: each {layout.model.seq:,}-token sequence over cp = {layout.cp} ranks "
                 f"({layout.model.seq // layout.cp:,} tokens each), {how}; Megatron needs the sequence divisible by "
                 "2 x cp and Transformer Engine attention.")
    return ["--context-parallel-size", str(layout.cp), "--cp-comm-type", layout.cp_comm.replace("-", "_")]


def _fp8(layout: Layout, notes: list[str]) -> list[str]:
    if layout.precision != "fp8":
        return []
    out = ["--fp8-format", "hybrid", "--fp8-recipe", "delayed"]
    if layout.zero_stage >= 1:
        out.append("--fp8-param-gather")
        notes.append("FP8: Transformer Engine GEMMs (E4M3 forward, E5M2 gradients, delayed scaling) with FP8 primary "
                     "weights (--fp8-param-gather), the planner's 1-byte GEMM weights; master weights and Adam "
                     "moments stay FP32. DeepSeek-V3's recipe is --fp8-format e4m3 --fp8-recipe blockwise.")
    else:
        notes.append("FP8 GEMMs with BF16 weights: --fp8-param-gather needs the distributed optimizer, so the "
                     "weights stay 2 bytes here (the planner counts FP8 primary weights at 1 byte).")
    return out


def _sharding(layout: Layout, notes: list[str]) -> list[str]:
    z = layout.zero_stage
    if z == 0:
        out: list[str] = []
    elif z == 1:
        out = ["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]
        if layout.replicate > 1:  # the distributed optimizer sharded within d x cp / R ranks, R instances
            out += ["--num-distributed-optimizer-instances", str(layout.replicate)]
            notes.append(f"--num-distributed-optimizer-instances {layout.replicate}: the optimizer state is sharded "
                         f"within each of {layout.replicate} groups of d x cp / {layout.replicate} ranks and the "
                         "gradients all-reduced across them (hybrid sharding).")
    else:  # p = 1 here: core.planner.frameworks refuses Megatron-FSDP with pipeline parallelism
        strategy = "optim_grads" if z == 2 else "optim_grads_params"
        out = ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", strategy, "--ckpt-format", "fsdp_dtensor"]
        notes.append(f"ZeRO-{z} is Megatron-FSDP's {strategy} strategy; validate_args requires --ckpt-format "
                     "fsdp_dtensor with it.")
    if layout.offload == "optimizer":
        out += ["--optimizer-cpu-offload", "--use-precision-aware-optimizer"]
        notes.append("--optimizer-cpu-offload requires --use-precision-aware-optimizer (validate_args).")
    return out


def _shell(words: list[str], indent: str = "    ") -> str:
    """One flag (with its value) per line, joined with backslashes."""
    lines, i = [], 0
    while i < len(words):
        word = words[i]
        if word.startswith("--") and i + 1 < len(words) and not words[i + 1].startswith("--"):
            lines.append(f"{word} {_quote(words[i + 1])}")
            i += 2
        else:
            lines.append(_quote(word))
            i += 1
    return (" \\\n" + indent).join(lines)


def _quote(word: str) -> str:
    return word if word.startswith("$") else shlex.quote(word)


def megatron_export(layout: Layout) -> Export:
    refused = refusal(layout, "megatron")
    if refused:
        return refused
    words, launch_notes = launch(layout)
    args, notes = megatron_args(layout)
    env = "CUDA_DEVICE_MAX_CONNECTIONS=1 " if layout.t > 1 and "--use-megatron-fsdp" not in args else ""
    entry = confirmed()["megatron"]["entry"]
    extra = (f" cp={layout.cp}" if layout.cp > 1 else "") + (f" ep={layout.ep}" if layout.ep > 1 else "")
    head = (f"# Megatron-LM {layout.model.name}: t={layout.t} p={layout.p} d={layout.d}{extra} on {layout.n_gpus} "
            f"GPUs, {layout.schedule if layout.p > 1 else 'no pipeline'}\n")
    return Export(head + env + _shell(words + [entry] + args), tuple(launch_notes + notes))


def _window_flags(m, notes: list[str]) -> list[str]:
    """--window-size "w,0" and, for a share of windowed layers (N - 1) / N, --window-attn-skip-freq N."""
    share = m.window_share
    if share <= 0:
        return []
    out = ["--window-size", f"{m.window},0"]
    if share < 1:
        every = round(1.0 / (1.0 - share))
        if every > 1 and abs((every - 1) / every - share) < 1e-6:
            out += ["--window-attn-skip-freq", str(every)]
        else:
            notes.append(f"A windowed share of {share:.3g} is not (N - 1) / N: give --window-attn-skip-freq as a "
                         "list pattern of your layers (1 windowed, 0 full).")
    return out
