"""Turn a chosen Layout into a DeepSpeed config, a Megatron-LM command line and a torchrun + FSDP2 snippet.

Only option names listed in assets/tool_options.json (each confirmed against the tool's own documentation or
source, cited there) are emitted; where a tool has no switch for a choice (a zero-bubble schedule in Megatron,
parameter offload in Megatron, optimizer-only sharding in FSDP2) the export says so in its notes instead of
inventing one. The exports are starting points: data paths, tokenizer and learning-rate schedule are the user's.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from functools import lru_cache

from core.params.catalog import ASSETS
from core.planner.layout import Layout

BUCKET = 500_000_000          # DeepSpeed's documented default bucket size (elements), written out explicitly
PORT = 29500


@dataclass(frozen=True)
class Export:
    """An artefact to copy (JSON, shell or Python text) and what it does not cover."""

    text: str
    notes: tuple[str, ...]


@lru_cache(maxsize=1)
def confirmed() -> dict:
    """The confirmed option names per tool, with their sources (assets/tool_options.json)."""
    return json.loads((ASSETS / "tool_options.json").read_text(encoding="utf-8"))


def flatten_keys(config: dict, prefix: str = "") -> list[str]:
    """Dotted paths of every key in a nested dict ('zero_optimization.offload_optimizer.device')."""
    out = []
    for key, value in config.items():
        path = f"{prefix}{key}"
        out.append(path)
        if isinstance(value, dict):
            out.extend(flatten_keys(value, path + "."))
    return out


def _launch(layout: Layout) -> tuple[list[str], list[str]]:
    """torchrun arguments: one process per GPU, the same count on every node."""
    n, gpn = layout.n_gpus, layout.gpus_per_node
    notes = []
    if n <= gpn:
        return ["torchrun", "--standalone", "--nproc-per-node", str(n)], notes
    if n % gpn:
        notes.append(f"{n} GPUs is not a multiple of {gpn} per server; torchrun starts the same number of "
                     "processes on every node, so pick G as a multiple of the server size.")
    nodes = -(-n // gpn)
    return ["torchrun", "--nnodes", str(nodes), "--nproc-per-node", str(gpn), "--rdzv-id", "planner",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"$MASTER_ADDR:{PORT}"], notes


def _schedule_notes(layout: Layout, tool: str) -> list[str]:
    s = layout.schedule
    if s == "gpipe":
        return [f"{tool} has no GPipe (fill-drain) schedule; it runs 1F1B, which has the same bubble and holds "
                "fewer micro-batches' activations."]
    if s in ("zb-h1", "zb-h2"):
        return [f"{s} (Qi et al., arXiv:2401.10241) has no switch in {tool}; the authors' implementation is a fork "
                "(sail-sg/zero-bubble-pipeline-parallelism). The export falls back to 1F1B."]
    if s in ("zbv", "dualpipev"):
        return [f"{s} (a V-shaped two-chunk schedule) has no switch in {tool}; DualPipe/DualPipeV live in "
                "deepseek-ai/DualPipe and ZB-V in the zero-bubble fork. The export falls back to 1F1B."]
    return []


# ------------------------------------------------------------------------------------------------ DeepSpeed

def deepspeed_config(layout: Layout) -> tuple[dict, list[str]]:
    """DeepSpeed config dict (batch, precision, ZeRO, activation checkpointing) and notes."""
    z = layout.zero_stage
    cfg: dict = {
        "train_batch_size": layout.global_batch,
        "train_micro_batch_size_per_gpu": layout.micro_batch_size,
        "gradient_accumulation_steps": layout.grad_accum_steps,
        "gradient_clipping": 1.0,
    }
    if layout.half == "bf16":
        cfg["bf16"] = {"enabled": True}
    else:
        cfg["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 1000,
                       "hysteresis": 2, "min_loss_scale": 1}
    zero: dict = {"stage": z}
    if z in (1, 2):
        zero.update(allgather_partitions=True, allgather_bucket_size=BUCKET, reduce_scatter=True,
                    reduce_bucket_size=BUCKET)
    if z == 2:
        zero.update(overlap_comm=True, contiguous_gradients=True)
    if z == 3:
        zero.update(overlap_comm=True, contiguous_gradients=True, reduce_bucket_size=BUCKET,
                    stage3_prefetch_bucket_size=BUCKET, stage3_param_persistence_threshold=100_000,
                    stage3_max_live_parameters=1_000_000_000, stage3_max_reuse_distance=1_000_000_000,
                    stage3_gather_16bit_weights_on_model_save=True)
    if layout.offload in ("optimizer", "optimizer+params"):
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if layout.offload == "optimizer+params":
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    cfg["zero_optimization"] = zero
    if layout.recompute != "none":
        cfg["activation_checkpointing"] = {"partition_activations": layout.t > 1, "cpu_checkpointing": False,
                                           "contiguous_memory_optimization": False,
                                           "synchronize_checkpoint_boundary": False}

    notes = [
        f"train_batch_size {layout.global_batch} = micro-batch {layout.micro_batch_size} x accumulation "
        f"{layout.grad_accum_steps} x data-parallel {layout.d}; DeepSpeed counts data-parallel ranks (world size / "
        f"model-parallel size {layout.t * layout.p}) when the framework hands it a model-parallel unit.",
    ]
    if layout.t > 1 or layout.p > 1:
        notes.append(f"Tensor ({layout.t}) and pipeline ({layout.p}) degrees are not DeepSpeed config keys: they come "
                     "from the training framework (Megatron-DeepSpeed flags, or a deepspeed.pipe.PipelineModule).")
    if layout.p > 1 and z >= 2:
        notes.append("DeepSpeed's pipeline engine has historically accepted ZeRO stage 0/1 only (not re-checked "
                     "this session); use stage 1 with pipeline parallelism.")
    if layout.recompute == "full":
        notes.append("activation_checkpointing only configures deepspeed.checkpointing; the model must wrap its "
                     "layers with deepspeed.checkpointing.checkpoint for the recompute to happen.")
    if layout.recompute == "selective":
        notes.append("Selective recompute (attention core only) has no DeepSpeed switch: it is the model code's "
                     "choice of what to wrap in deepspeed.checkpointing.checkpoint.")
    if layout.offload == "optimizer+params":
        notes.append("offload_param is valid with ZeRO stage 3 only (DeepSpeed docs).")
    notes += _schedule_notes(layout, "DeepSpeed") if layout.p > 1 else []
    return cfg, notes


def deepspeed_export(layout: Layout) -> Export:
    cfg, notes = deepspeed_config(layout)
    return Export(json.dumps(cfg, indent=2), tuple(notes))


# ----------------------------------------------------------------------------------------------- Megatron-LM

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
    if layout.schedule == "interleaved":
        a += ["--num-virtual-stages-per-pipeline-rank", str(layout.v)]
    if m.layers % p and (m.layers + 2) % p == 0:
        a += ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
        notes.append(f"{m.layers} layers over {p} stages: counting the embedding and the loss as one layer each gives "
                     f"{(m.layers + 2) // p} per stage, so the first and last stages hold one transformer layer fewer "
                     "(what Llama 3 405B and BLOOM did).")
    elif m.layers % p:
        split = _uneven_split(m.layers, p)
        if split is None:
            notes.append(f"{m.layers} layers do not split over {p} stages; Megatron needs layers divisible by the "
                         "pipeline size or an explicit first/last stage size.")
        else:
            a += ["--decoder-first-pipeline-num-layers", str(split[0]),
                  "--decoder-last-pipeline-num-layers", str(split[1])]
            notes.append(f"{m.layers} layers over {p} stages: first {split[0]}, last {split[1]}, the others "
                         f"{-(-m.layers // p)} each.")
    if layout.sequence_parallel:
        if t > 1:
            a.append("--sequence-parallel")
        else:
            notes.append("Sequence parallelism needs t > 1; Megatron switches it off at t = 1.")
    a += ["--num-layers", str(m.layers), "--hidden-size", str(m.hidden), "--ffn-hidden-size", str(m.ffn),
          "--num-attention-heads", str(m.heads)]
    if m.kv_heads < m.heads:
        a += ["--group-query-attention", "--num-query-groups", str(m.kv_heads)]
        if m.kv_heads % t:
            notes.append(f"Megatron splits the {m.kv_heads} query groups over t = {t}: it needs t to divide them.")
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
    if m.embed_norm:
        notes.append("The layer norm after the embedding (BLOOM) has no Megatron-LM flag.")
    a += ["--micro-batch-size", str(layout.micro_batch_size), "--global-batch-size", str(layout.global_batch)]
    if layout.recompute == "full":
        a += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    elif layout.recompute == "selective":
        a += ["--recompute-granularity", "selective"]
    a += _megatron_sharding(layout, notes)
    a.append("--bf16" if layout.half == "bf16" else "--fp16")
    a += ["--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", str(m.vocab),
          "--train-iters", "100", "--lr", "1.0e-4"]
    notes.append("--mock-data with NullTokenizer makes this a runnable throughput test; swap in --data-path and your "
                 f"tokenizer to train. Megatron pads the vocabulary to a multiple of 128 x t = {128 * t}.")
    if t > 1 and "--use-megatron-fsdp" not in a:
        notes.append("Megatron asserts CUDA_DEVICE_MAX_CONNECTIONS=1 with tensor parallelism (before Blackwell).")
    return a, notes + _schedule_notes(layout, "Megatron-LM")


def _megatron_sharding(layout: Layout, notes: list[str]) -> list[str]:
    z = layout.zero_stage
    if z == 0:
        out: list[str] = []
    elif z == 1 or layout.p > 1:
        out = ["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]
        if z > 1:
            notes.append(f"ZeRO-{z} with pipeline parallelism: Megatron's distributed optimizer shards optimizer "
                         "state (ZeRO-1 memory; gradients are reduce-scattered). Megatron-FSDP (--use-megatron-fsdp) "
                         "shards more, but its support with pipeline parallelism was not confirmed, so it is not used.")
    else:
        strategy = "optim_grads" if z == 2 else "optim_grads_params"
        out = ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", strategy, "--ckpt-format", "fsdp_dtensor"]
        notes.append(f"ZeRO-{z} maps to Megatron-FSDP's {strategy} strategy; validate_args requires "
                     "--ckpt-format fsdp_dtensor with it.")
    if layout.offload in ("optimizer", "optimizer+params"):
        out += ["--optimizer-cpu-offload", "--use-precision-aware-optimizer"]
        notes.append("--optimizer-cpu-offload requires --use-precision-aware-optimizer (validate_args).")
    if layout.offload == "optimizer+params":
        notes.append("Megatron-LM has no flag to offload parameters to the CPU; only the optimizer is offloaded.")
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
    launch, launch_notes = _launch(layout)
    args, notes = megatron_args(layout)
    env = "CUDA_DEVICE_MAX_CONNECTIONS=1 " if layout.t > 1 and "--use-megatron-fsdp" not in args else ""
    entry = confirmed()["megatron"]["entry"]
    head = f"# Megatron-LM, {layout.model.name}: t={layout.t} p={layout.p} d={layout.d} on {layout.n_gpus} GPUs\n"
    return Export(head + env + _shell(launch + [entry] + args), tuple(launch_notes + notes))


# -------------------------------------------------------------------------------------------- PyTorch FSDP2

def fsdp2_export(layout: Layout) -> Export:
    """torchrun + FSDP2 fully_shard snippet (not executed here: it needs torch and GPUs)."""
    z, t, p, d = layout.zero_stage, layout.t, layout.p, layout.d
    reshard = z == 3
    dtype = "torch.bfloat16" if layout.half == "bf16" else "torch.float16"
    offload = layout.offload != "none"
    launch, notes = _launch(layout)
    dims = [("pp", p)] if p > 1 else []
    dims += [("dp", d)] + ([("tp", t)] if t > 1 else [])
    shape = ", ".join(str(n) for _, n in dims) + ("," if len(dims) == 1 else "")
    names = ", ".join(f'"{k}"' for k, _ in dims) + ("," if len(dims) == 1 else "")
    dp_mesh = 'mesh["dp"]' if len(dims) > 1 else "mesh"
    policy = ", offload_policy=CPUOffloadPolicy(pin_memory=True)" if offload else ""
    fsdp_names = ("CPUOffloadPolicy, " if offload else "") + "MixedPrecisionPolicy, fully_shard"
    where = (f", TP over t={t}" if t > 1 else "") + (f", inside one of p={p} pipeline stages" if p > 1 else "")
    lines = [
        f"# {layout.model.name}: FSDP2 over d={d}{where}. ZeRO-{z} -> reshard_after_forward={reshard}",
        "# Launch on every node:",
        "#   " + " ".join(launch) + " train_fsdp2.py",
        "import os",
        "",
        "import torch",
        "import torch.distributed as dist",
        "from torch.distributed.device_mesh import init_device_mesh",
        f"from torch.distributed.fsdp import {fsdp_names}",
    ]
    if t > 1:
        lines.append("from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,\n"
                     "                                               parallelize_module)")
    lines += [
        "",
        'dist.init_process_group("nccl")',
        'torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))',
        f'mesh = init_device_mesh("cuda", ({shape}), mesh_dim_names=({names}))',
        "model = build_model()  # placeholder: your Transformer, blocks in model.layers" +
        (" (this rank's pipeline stage)" if p > 1 else ""),
    ]
    if t > 1:
        lines += [
            "# Megatron-style split; the module names are placeholders for your block's own.",
            'tp_plan = {"attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(),',
            '           "attention.wv": ColwiseParallel(), "attention.wo": RowwiseParallel(),',
            '           "mlp.up": ColwiseParallel(), "mlp.down": RowwiseParallel()}',
            "for block in model.layers:",
            '    parallelize_module(block, mesh["tp"], tp_plan)',
        ]
    lines += [
        f"mp = MixedPrecisionPolicy(param_dtype={dtype}, reduce_dtype=torch.float32)",
        "for block in model.layers:  # one all-gather / reduce-scatter group per block",
        f"    fully_shard(block, mesh={dp_mesh}, reshard_after_forward={reshard}, mp_policy=mp{policy})",
        f"fully_shard(model, mesh={dp_mesh}, mp_policy=mp{policy})  # the root: embeddings, final norm, output",
        "optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)  # after fully_shard: it sees the shards",
        "",
        f"# One step = {layout.grad_accum_steps} micro-batch(es) of {layout.micro_batch_size} sequence(s) per dp rank.",
        "# FSDP2 reduce-scatters each micro-batch's gradients (sharded gradients); calling",
        "# model.set_requires_gradient_sync(False) on all but the last saves that traffic for more memory.",
    ]
    notes += [{3: "ZeRO-3 ~ reshard_after_forward=True: parameters are freed after each block's forward and "
                   "all-gathered again for its backward.",
               2: "ZeRO-2 ~ reshard_after_forward=False: parameters stay gathered from forward to backward (no second "
                  "all-gather); gradients and optimizer state are sharded. Between steps FSDP2 still keeps parameters "
                  "sharded, so memory at rest is lower than ZeRO-2's.",
               1: "FSDP2 has no optimizer-state-only sharding (ZeRO-1); the snippet uses the ZeRO-2-like "
                  "reshard_after_forward=False, which also shards gradients and parameters at rest.",
               0: "ZeRO-0 is plain data parallelism (DDP in PyTorch); the snippet shows the closest FSDP2 form "
                  "(reshard_after_forward=False)."}[z]]
    if len(dims) > 1:
        notes.append("Mesh order puts tp innermost so a TP group is consecutive ranks (inside a server when "
                     "t <= GPUs per server). For HSDP (shard inside a server, replicate across), give fully_shard a "
                     "2-D (replicate, shard) mesh instead of the dp mesh.")
    if p > 1:
        notes.append("Pipeline parallelism is not generated: build each stage with torch.distributed.pipelining and "
                     "apply this snippet inside the stage (the mesh already has the pp dimension).")
    if layout.sequence_parallel and t > 1:
        notes.append("Sequence parallelism in PyTorch TP needs SequenceParallel styles on the norms and matching "
                     "input/output layouts; not generated.")
    if layout.recompute != "none":
        notes.append(f"{layout.recompute} recompute: wrap blocks with activation checkpointing yourself "
                     "(torch.utils.checkpoint); not generated.")
    if offload:
        notes.append("CPUOffloadPolicy offloads parameters, gradients and optimizer state together; FSDP2 has no "
                     "optimizer-only offload.")
    if layout.half == "fp16":
        notes.append("fp16 needs loss scaling (a gradient scaler); not generated. Prefer bf16 where the GPU has it.")
    notes += _schedule_notes(layout, "this FSDP2 snippet") if p > 1 else []
    return Export("\n".join(lines) + "\n", tuple(notes))


def export_all(layout: Layout) -> dict[str, Export]:
    return {"deepspeed": deepspeed_export(layout), "megatron": megatron_export(layout), "fsdp2": fsdp2_export(layout)}
