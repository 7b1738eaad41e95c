"""A layout as one runnable PyTorch training script: the model written out from its ModelConfig, tensor (and
sequence) parallelism, torch.distributed.pipelining with the row's schedule, FSDP2 / DDP / ZeroRedundancyOptimizer
for the row's ZeRO stage, recompute, offload, mock data and one optimizer step.

It runs as written with torchrun: on GPUs with NCCL, or on CPUs with gloo (tests/engines runs shrunk presets that
way and compares the per-rank model-state bytes it prints with core's ZeRO accounting). Nothing is a placeholder:
swap the mock tokens for your data loader to train.
"""

from __future__ import annotations

from core.pipeline.schedules import REGISTRY
from core.planner import export_switches
from core.planner.export_base import Export, launch, refusal
from core.planner.layout import Layout

# context_parallel's K/V rotation for each core.params.planner CP_COMMS value (its default is "allgather")
ROTATE = {"p2p": "alltoall", "all-gather": "allgather"}
ROTATE_WHY = {"p2p": "pass K/V shards round the cp ranks, each step behind the attention",
              "all-gather": "gather all K/V shards (after the local block's attention)"}
# A schedule's torch.distributed.pipelining class is its registry entry's `engines.torch`: one whose order is ours
# action for action (tests/test_engine_torch_orders.py). Any other schedule runs our action table in
# _PipelineScheduleRuntime (ScheduleLoopedBFS, for one, reverses the backwards).
RUNTIME = "_PipelineScheduleRuntime"
FILE = "train_torch.py"

_MODEL = '''
class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = HEAD_DIM  # HIDDEN // HEADS unless the model decouples the head size
        self.wq = nn.Linear(HIDDEN, HEADS * self.head_dim, bias=BIAS)
        self.wk = nn.Linear(HIDDEN, KV_HEADS * self.head_dim, bias=BIAS)
        self.wv = nn.Linear(HIDDEN, KV_HEADS * self.head_dim, bias=BIAS)
        self.wo = nn.Linear(HEADS * self.head_dim, HIDDEN, bias=BIAS)
        # QK normalisation (Qwen3): q and k each through a norm over the head size, before the rotary positions
        self.q_norm, self.k_norm = (Norm(self.head_dim), Norm(self.head_dim)) if QK_NORM else (None, None)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = (w(x).view(b, s, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        mask = None
        if POSITION == "rope":
            q, k = rotate(q), rotate(k)
        elif POSITION == "alibi":
            mask = alibi(q.shape[1], s, q.device).to(q.dtype)
        attend = F.scaled_dot_product_attention
        kw = dict(attn_mask=mask, is_causal=mask is None, enable_gqa=q.shape[1] != k.shape[1])
        if RECOMPUTE == "selective":  # keep only the attention core's inputs; recompute it in the backward
            out = checkpoint(attend, q, k, v, use_reentrant=False, **kw)
        else:
            out = attend(q, k, v, **kw)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


def angles(s, hd, device):
    """Rotary angles of positions 0..s-1, one row per position."""
    inv = 1.0 / (ROPE_THETA ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
    return torch.outer(torch.arange(s, device=device, dtype=torch.float32), inv).repeat(1, 2)


ANGLE = None  # under context parallelism: the rows of this rank's tokens (context_parallel shards it)


def rotate(x):
    """Rotary positions (rotate-half form) over the head dimension."""
    s, hd = x.shape[-2], x.shape[-1]
    angle = angles(s, hd, x.device) if ANGLE is None else ANGLE
    x1, x2 = x.chunk(2, dim=-1)
    return x * angle.cos().to(x.dtype) + torch.cat([-x2, x1], dim=-1) * angle.sin().to(x.dtype)


def alibi(local_heads, s, device):
    """ALiBi biases of this tensor-parallel rank's heads, causal mask included."""
    slopes = 2.0 ** (-8.0 * torch.arange(1, HEADS + 1, device=device) / HEADS)
    slopes = slopes[TP_RANK * local_heads:(TP_RANK + 1) * local_heads]
    pos = torch.arange(s, device=device)
    distance = (pos[None, :] - pos[:, None]).float()
    bias = slopes[:, None, None] * distance[None]
    return bias.masked_fill(distance[None] > 0, float("-inf"))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(HIDDEN, FFN, bias=BIAS)
        self.gate = nn.Linear(HIDDEN, FFN, bias=BIAS) if SWIGLU else None
        self.down = nn.Linear(FFN, HIDDEN, bias=BIAS)

    def forward(self, x):
        h = F.silu(self.gate(x)) * self.up(x) if SWIGLU else F.gelu(self.up(x))
        return self.down(h)


def Norm(width=None):
    width = width or HIDDEN
    return nn.RMSNorm(width) if RMSNORM else nn.LayerNorm(width)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm, self.attention = Norm(), Attention()
        self.mlp_norm, self.mlp = Norm(), MLP()

    def forward(self, x):
        x = x + self.attention(self.attention_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class Stage(nn.Module):
    """Transformer layers [first, last); the embedding on the model's first stage, the head on its last."""

    def __init__(self, first, last, has_embedding, has_head):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, HIDDEN) if has_embedding else None
        self.positions = nn.Embedding(SEQ, HIDDEN) if has_embedding and POSITION == "learned" else None
        self.embedding_norm = Norm() if has_embedding and EMBED_NORM else None
        self.layers = nn.ModuleDict({str(i): Block() for i in range(first, last)})
        self.norm = Norm() if has_head else None
        self.output = nn.Linear(HIDDEN, VOCAB, bias=False) if has_head and not (TIED and has_embedding) else None

    def forward(self, h):
        if self.embedding is not None:
            tokens = h
            h = self.embedding(tokens)
            if self.positions is not None:
                h = h + self.positions(torch.arange(tokens.shape[1], device=tokens.device))
            if self.embedding_norm is not None:
                h = self.embedding_norm(h)
        for i, block in enumerate(self.layers.values()):  # full recompute: every block, or the stage's first N
            full = RECOMPUTE == "full" and (RECOMPUTE_LAYERS == 0 or i < RECOMPUTE_LAYERS)
            h = checkpoint(block, h, use_reentrant=False) if full else block(h)
        if self.norm is not None:
            h = self.norm(h)
            h = self.output(h) if self.output is not None else F.linear(h, self.embedding.weight)
        return h


def loss_fn(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(0, 1))


def bounds(stage, stages):
    """Layers of a pipeline stage: an even split, the remainder spread from the first stage on."""
    return stage * LAYERS // stages, (stage + 1) * LAYERS // stages


def local_bytes(tensors):
    """Bytes this rank holds (a DTensor's local shard)."""
    return sum((t.to_local() if hasattr(t, "to_local") else t).numel() * t.element_size() for t in tensors)
'''


def torch_export(layout: Layout) -> Export:
    return refusal(layout, "torch") or script(layout)


def script(layout: Layout) -> Export:
    """The script whether or not PyTorch runs the layout correctly (tests use it to keep the table's measured
    exclusions honest); users get torch_export."""
    words, notes = launch(layout)
    lines = _header(layout, words) + _imports(layout) + _constants(layout) + [_MODEL.rstrip(), ""]
    lines += _main(layout)
    notes += _notes(layout) + export_switches.script_notes(layout, "torch")
    return Export("\n".join(lines) + "\n", tuple(notes))


def _header(layout: Layout, words: list[str]) -> list[str]:
    sched = f"{layout.schedule} schedule" + (f", v = {layout.v}" if layout.v > 1 else "") if layout.p > 1 else \
        "no pipeline"
    how = {0: "DistributedDataParallel", 1: "DDP + ZeroRedundancyOptimizer",
           2: "FSDP2 fully_shard(reshard_after_forward=False)", 3: "FSDP2 fully_shard(reshard_after_forward=True)"}
    return [
        f'"""{layout.model.name}: t={layout.t} x p={layout.p} x d={layout.d}'
        + (f" x cp={layout.cp}" if layout.cp > 1 else "") + f' on {layout.n_gpus} GPUs, {sched}, '
        f"ZeRO-{layout.zero_stage} = {how[layout.zero_stage]},",
        f"micro-batch {layout.micro_batch_size} x {layout.grad_accum_steps} micro-batches per step, recompute "
        f"{layout.recompute}, sequence parallel {'on' if layout.sequence_parallel and layout.t > 1 else 'off'}, "
        f"offload {layout.offload}, {layout.precision}.",
        "",
        "Launch on every node:",
        "    " + " ".join(words) + f" {FILE}",
        'Mock tokens stand in for data; it prints each rank\'s model-state bytes after one optimizer step."""',
        "",
    ]


def _imports(layout: Layout) -> list[str]:
    z, t, p = layout.zero_stage, layout.t, layout.p
    out = ["import json", "import os", "import sys", "", "import torch", "import torch.distributed as dist",
           "import torch.nn as nn", "import torch.nn.functional as F",
           "from torch.distributed.device_mesh import init_device_mesh"]
    if z >= 2:
        names = ("CPUOffloadPolicy, " if layout.offload != "none" else "") + "MixedPrecisionPolicy, fully_shard"
        out.append(f"from torch.distributed.fsdp import {names}")
    if z == 1:
        out.append("from torch.distributed.optim import ZeroRedundancyOptimizer")
    if p > 1:
        cls = _torch_class(layout.schedule)
        out.append(f"from torch.distributed.pipelining import PipelineStage, {cls}" if cls else
                   "from torch.distributed.pipelining import PipelineStage\n"
                   f"from torch.distributed.pipelining.schedules import {RUNTIME}")
    if layout.cp > 1:
        out.append("from torch.distributed.tensor.experimental import context_parallel")
        out.append("from torch.distributed.tensor.experimental._attention import set_rotate_method")
    if t > 1:
        names = ["ColwiseParallel", "RowwiseParallel", "parallelize_module"]
        if layout.sequence_parallel:
            names += ["PrepareModuleInput", "SequenceParallel"]
        out.append(f"from torch.distributed.tensor import Replicate{', Shard' if layout.sequence_parallel else ''}")
        out.append(f"from torch.distributed.tensor.parallel import {', '.join(sorted(names))}")
    if z <= 1:
        out.append("from torch.nn.parallel import DistributedDataParallel as DDP")
    out += ["from torch.utils.checkpoint import checkpoint", ""]
    return out


def _constants(layout: Layout) -> list[str]:
    m = layout.model
    return [
        "# The model (the planner's ModelConfig)",
        f"LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN = {m.layers}, {m.hidden}, {m.heads}, {m.kv_heads}, "
        f"{m.head_dim}, {m.ffn}",
        f"VOCAB, SEQ, ROPE_THETA = {m.vocab}, {m.seq}, 10000.0",
        f'SWIGLU, RMSNORM, BIAS, TIED, EMBED_NORM, POSITION = {m.swiglu}, {m.norm == "rmsnorm"}, {m.bias}, '
        f'{m.tied}, {m.embed_norm}, "{m.position}"',
        f"QK_NORM = {m.qk_norm and m.mla is None}  # q and k normalised per head (Qwen3)",
        "# The layout (the planner's row)",
        f"T, P, D = {layout.t}, {layout.p}, {layout.d}",
        *([f"REPLICATE = {layout.replicate}  # hybrid sharding: FSDP2 within D / REPLICATE ranks, that many copies"]
          if layout.replicate > 1 else []),
        *([f"CP = {layout.cp}  # context parallelism: each sequence split over CP ranks"] if layout.cp > 1 else []),
        f"MICRO_BATCH, MICROBATCHES = {layout.micro_batch_size}, {layout.grad_accum_steps}  # per data-parallel rank",
        f'ZERO, RECOMPUTE, RECOMPUTE_LAYERS, OFFLOAD = {layout.zero_stage}, "{layout.recompute}", '
        f'{layout.recompute_layers if layout.recompute == "full" else 0}, "{layout.offload}"',
        f'SCHEDULE, V, SEQUENCE_PARALLEL, RESHARD = "{layout.schedule}", {layout.v}, '
        f'{layout.sequence_parallel and layout.t > 1}, {layout.reshard}  # as planned (core check reads them)',
        f"DTYPE, LR = torch.{'bfloat16' if layout.half == 'bf16' else 'float16'}, 1e-4",
        *(["FP8 = True  # torchao's float8 linears (pip install torchao; an FP8 GPU such as the H100)"]
          if layout.precision == "fp8" else []),
        "TP_RANK = 0  # set in main()",
        "",
    ]


def _torch_class(schedule: str) -> str:
    """The torch.distributed.pipelining class that runs `schedule` as ours ("": run our action table)."""
    return REGISTRY[schedule].engines.torch


def _stage_map(layout: Layout) -> list[list[int]]:
    return REGISTRY[layout.schedule].stage_map(layout.p, layout.v).tolist()


def _main(layout: Layout) -> list[str]:
    """main(): the process groups, the model's stages, the optimizer, mock data, one step, the byte report."""
    sp = layout.sequence_parallel and layout.t > 1
    out = _mesh_lines(layout) + _model_lines(layout, sp) + _optimizer_lines(layout) + _data_lines(layout)
    return out + _step_lines(layout) + _report_lines()


def _mesh_lines(layout: Layout) -> list[str]:
    """Process groups on a (pp, dp[, cp], tp) mesh, dp split (dp_replicate, dp_shard) under hybrid sharding, and
    this rank's pipeline stages."""
    t, p, cp, r = layout.t, layout.p, layout.cp, layout.replicate
    dp = ["dp_replicate", "dp_shard"] if r > 1 else ["dp"]
    dims = ["pp", *dp, *(["cp"] if cp > 1 else []), "tp"]
    sizes = [p, *((r, layout.d // r) if r > 1 else (layout.d,)), *([cp] if cp > 1 else []), t]
    shape = ", ".join(str(x) for x in sizes)
    out = [
        "",
        "def main():",
        "    global TP_RANK" + (", ANGLE" if cp > 1 else ""),
        '    device_type, backend = ("cuda", "nccl") if torch.cuda.is_available() else ("cpu", "gloo")',
        '    dist.init_process_group(backend)',
        '    if device_type == "cuda":',
        '        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))',
        "    device = torch.device(device_type, torch.cuda.current_device()) if device_type == \"cuda\" else "
        "torch.device(\"cpu\")",
        f"    mesh = init_device_mesh(device_type, ({shape}), mesh_dim_names={tuple(dims)!r})",
    ]
    if r > 1:  # HSDP: FSDP2 on a 2-D (replicate, shard) mesh, as torchtitan's data_parallel_replicate_degree
        out += ['    pp_rank, TP_RANK = (mesh[k].get_local_rank() for k in ("pp", "tp"))',
                '    dp_rank = mesh["dp_replicate", "dp_shard"]._flatten("dp").get_local_rank()']
        out += (['    mesh["dp_shard", "cp"]._flatten("dp_shard_cp")',
                 '    dp_mesh = mesh["dp_replicate", "dp_shard_cp"]'] if cp > 1 else
                ['    dp_mesh = mesh["dp_replicate", "dp_shard"]'])
        return out + _stage_lines(layout)
    out += ['    pp_rank, dp_rank, TP_RANK = (mesh[k].get_local_rank() for k in ("pp", "dp", "tp"))']
    if cp > 1:  # gradients and ZeRO shards span the data- and context-parallel ranks (Megatron's dp x cp group)
        out += ['    dp_mesh = mesh["dp", "cp"]._flatten("dp_cp")']
    else:
        out += ['    dp_mesh = mesh["dp"]']
    return out + _stage_lines(layout)


def _stage_lines(layout: Layout) -> list[str]:
    p, out = layout.p, []
    if p > 1:
        out += [f"    stage_map = {_stage_map(layout)}  # pipeline rank -> its stages",
                "    stages = stage_map[pp_rank]", f"    n_stages = {p * layout.v}"]
    else:
        out += ["    stages, n_stages = [0], 1"]
    return out


def _model_lines(layout: Layout, sp: bool) -> list[str]:
    """This rank's stages built on the meta device, split over t, sharded or wrapped for ZeRO, then materialised."""
    z = layout.zero_stage
    out = [
        "    torch.manual_seed(0)",
        '    with torch.device("meta"):',
        "        parts = [Stage(*bounds(s, n_stages), s == 0, s == n_stages - 1) for s in stages]",
    ]
    if layout.precision == "fp8":  # before TP and FSDP, as torchtitan converts them; the output layer stays 16-bit
        out += ["    from torchao.float8 import convert_to_float8_training",
                "    for part in parts:",
                '        convert_to_float8_training(part, module_filter_fn=lambda mod, fqn: fqn != "output")']
    if layout.t > 1:
        out += _tp_lines(layout, sp)
    if z >= 2:
        policy = ", offload_policy=CPUOffloadPolicy(pin_memory=device_type == \"cuda\")" \
            if layout.offload != "none" else ""
        reshard = z == 3 and layout.reshard
        out += [
            "    mp = MixedPrecisionPolicy(param_dtype=DTYPE, reduce_dtype=torch.float32)",
            "    for part in parts:",
            "        for block in part.layers.values():  # one all-gather / reduce-scatter group per block",
            f'            fully_shard(block, mesh=dp_mesh, reshard_after_forward={reshard}, mp_policy=mp{policy})',
            f'        fully_shard(part, mesh=dp_mesh, reshard_after_forward={reshard}, mp_policy=mp{policy})',
        ]
    init_device = '"cpu")  # CPUOffloadPolicy keeps the shards on the host' if layout.offload != "none" else "device)"
    out += [
        "    for part in parts:",
        f"        part.to_empty(device={init_device}",
        "        for module in part.modules():",
        '            if hasattr(module, "reset_parameters"):',
        "                module.reset_parameters()",
    ]
    if z <= 1:
        out += ['    parts = [DDP(part, process_group=dp_mesh.get_group()) for part in parts]']
    return out


def _optimizer_lines(layout: Layout) -> list[str]:
    params = "[w for part in parts for w in part.parameters()]"
    if layout.zero_stage == 1:
        return [f"    optimizer = ZeroRedundancyOptimizer({params}, optimizer_class=torch.optim.AdamW,",
                '                                        process_group=dp_mesh.get_group(), lr=LR)']
    return [f"    optimizer = torch.optim.AdamW({params}, lr=LR)"]


def _data_lines(layout: Layout) -> list[str]:
    out = [
        "",
        "    generator = torch.Generator().manual_seed(1 + dp_rank)  # mock data: each replica its own tokens",
        "    tokens = torch.randint(VOCAB, (MICROBATCHES * MICRO_BATCH, SEQ + 1), generator=generator).to(device)",
        "    inputs, targets = tokens[:, :-1], tokens[:, 1:]",
    ]
    if layout.cp > 1:
        out += [
            "    # Context parallelism: inside the context below SDPA runs as ring attention over the cp ranks, and",
            "    # these buffers are cut (in place, load-balanced for the causal mask) to this rank's share of tokens.",
            "    inputs, targets = inputs.contiguous(), targets.contiguous()",
            "    ANGLE = angles(SEQ, HEAD_DIM, device)",
            f"    set_rotate_method({ROTATE[layout.cp_comm]!r})  # {ROTATE_WHY[layout.cp_comm]}",
        ]
    return out


def _step_lines(layout: Layout) -> list[str]:
    """One step: the pipeline schedule, or gradient accumulation over the micro-batches; under cp in its context."""
    z = layout.zero_stage
    # DDP computes under autocast; FSDP2's MixedPrecisionPolicy casts the gathered parameters itself.
    autocast = "torch.autocast(device_type, dtype=DTYPE)" if z <= 1 else ""
    if layout.p > 1:
        body = _pipeline_lines(layout, autocast)
    else:
        body = [
            "    model, losses = parts[0], []",
            "    for i in range(MICROBATCHES):",
            "        batch = slice(i * MICRO_BATCH, (i + 1) * MICRO_BATCH)",
        ]
        step = "loss = loss_fn(model(inputs[batch]), targets[batch]) / MICROBATCHES"
        body += [f"        with {autocast}:", f"            {step}"] if autocast else [f"        {step}"]
        if z <= 1:
            body += ["        if i < MICROBATCHES - 1:",
                     "            with model.no_sync():  # DDP: reduce the gradients once, after the last micro-batch",
                     "                loss.backward()",
                     "        else:",
                     "            loss.backward()"]
        else:
            body += ["        loss.backward()  # FSDP2 reduce-scatters each micro-batch's gradients (sharded)"]
        body += ["        losses.append(loss.detach() * MICROBATCHES)"]
    if layout.cp > 1:
        return ['    with context_parallel(mesh["cp"], buffers=[inputs, targets, ANGLE], buffer_seq_dims=[1, 1, 0]):'] \
            + ["    " + line for line in body]
    return body


def _report_lines() -> list[str]:
    return [
        "    optimizer.step()",
        "    state = optimizer.optim.state if hasattr(optimizer, \"optim\") else optimizer.state",
        "    params = [w for part in parts for w in part.parameters()]",
        "    report = {\"rank\": dist.get_rank(), \"param_bytes\": local_bytes(params),",
        "              \"grad_bytes\": local_bytes([w.grad for w in params if w.grad is not None]),",
        "              \"optimizer_bytes\": local_bytes([s for st in state.values() for s in st.values()",
        "                                               if torch.is_tensor(s) and s.dim() > 0]),",
        "              \"loss\": float(torch.stack(losses).mean()) if losses else None}",
        "    # one write per line: print() writes the text and its newline apart, and ranks share the same stdout",
        "    sys.stdout.write(\"model-state bytes \" + json.dumps(report) + \"\\n\")",
        "    sys.stdout.flush()",
        "    optimizer.zero_grad()",
        "    dist.destroy_process_group()",
        "",
        "",
        'if __name__ == "__main__":',
        "    main()",
    ]


def _tp_lines(layout: Layout, sp: bool) -> list[str]:
    """Megatron's split of every block (column-parallel in, row-parallel out) and, with SP, sequence-sharded norms."""
    rowwise_out = "RowwiseParallel(output_layouts=Shard(1))" if sp else "RowwiseParallel()"
    out = ['    tp_mesh = mesh["tp"]', "    block_plan = {"]
    if sp:
        out += ['        "attention_norm": SequenceParallel(), "mlp_norm": SequenceParallel(),',
                "        **{name: PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))",
                '           for name in ("attention", "mlp")},']
    out += [
        '        "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(),',
        '        "attention.wv": ColwiseParallel(),',
        f'        "attention.wo": {rowwise_out}, "mlp.up": ColwiseParallel(), "mlp.down": {rowwise_out},',
        "    }",
        "    if SWIGLU:",
        '        block_plan["mlp.gate"] = ColwiseParallel()',
        "    for part in parts:",
        "        for block in part.layers.values():",
        "            parallelize_module(block, tp_mesh, block_plan)",
    ]
    if not layout.model.tied:
        emb_out = "Shard(1)" if sp else "Replicate()"
        out += [
            "        ends = {}",
            "        if part.embedding is not None:  # vocabulary-parallel embedding",
            f'            ends["embedding"] = RowwiseParallel(input_layouts=Replicate(), output_layouts={emb_out})',
            "        if part.output is not None:  # vocabulary-parallel output layer, logits gathered for the loss",
            f'            ends["output"] = ColwiseParallel(input_layouts={emb_out}, output_layouts=Replicate())',
        ]
        if sp:
            out += ['        if part.norm is not None:',
                    '            ends["norm"] = SequenceParallel()']
        out += ["        parallelize_module(part, tp_mesh, ends)"]
    return out


def _pipeline_lines(layout: Layout, autocast: str) -> list[str]:
    name = layout.schedule
    out = [
        '    pp_group = mesh["pp"].get_group()',
        "    pipe = [PipelineStage(part, s, n_stages, device, group=pp_group) for part, s in zip(parts, stages)]",
    ]
    if _torch_class(name):
        first = "pipe[0]" if REGISTRY[name].chunks == "1" else "pipe"  # one stage per rank: PipelineScheduleSingle
        out.append(f"    schedule = {_torch_class(name)}({first}, n_microbatches=MICROBATCHES, loss_fn=loss_fn)")
    else:
        csv = f"{name}_p{layout.p}_m{layout.grad_accum_steps}.csv"
        out += [
            f"    # {name} has no class in torch.distributed.pipelining; its runtime runs our action table, written by",
            f"    #   python -m core simulate --schedule {name} -p {layout.p} -m {layout.grad_accum_steps} "
            f"--csv-actions > {csv}",
            f"    schedule = {RUNTIME}(pipe, n_microbatches=MICROBATCHES, loss_fn=loss_fn)",
            f'    schedule._load_csv("{csv}")',
        ]
    out += [
        "    losses = []",
        "    args = (inputs,) if 0 in stages else ()",
        "    kwargs = {\"target\": targets, \"losses\": losses} if n_stages - 1 in stages else {}",
    ]
    # return_outputs=False: the last stage keeps no micro-batch's output (its logits) to the step's end, the memory the
    # plan counts (torch.distributed.pipelining's step returns them by default; torchtitan passes False since e5ef99aab)
    call = "schedule.step(*args, return_outputs=False, **kwargs)"
    out += [f"    with {autocast}:", f"        {call}"] if autocast else [f"    {call}"]
    return out


def _notes(layout: Layout) -> list[str]:
    z = layout.zero_stage
    notes = [{3: "ZeRO-3 = reshard_after_forward=True: each block's parameters are freed after its forward and "
                 "all-gathered again for its backward.",
              2: "ZeRO-2 = reshard_after_forward=False: parameters stay gathered from forward to backward; gradients "
                 "and optimizer state are sharded (between steps FSDP2 keeps parameters sharded too).",
              1: "ZeRO-1 = DDP with ZeroRedundancyOptimizer: optimizer state sharded over d (whole parameters per "
                 "rank), parameters and gradients replicated.",
              0: "ZeRO-0 = DistributedDataParallel: everything replicated, gradients all-reduced."}[z]]
    if layout.p > 1 and not _torch_class(layout.schedule):
        notes.append(f"{layout.schedule} runs through torch.distributed.pipelining's _PipelineScheduleRuntime from our "
                     "action table (a private API; tests/engines checks every one of our schedules there).")
    if layout.model.tied and layout.p > 1:
        notes.append("Tied embeddings across pipeline stages: the last stage keeps its own output matrix (Megatron "
                     "all-reduces the two copies' gradients to keep them tied; not generated).")
    if layout.model.tied and layout.t > 1:
        notes.append("Tied embeddings stay replicated over the tensor-parallel group (no vocabulary-parallel split).")
    if layout.half == "fp16":
        notes.append("fp16 without loss scaling can underflow; add torch.amp.GradScaler (bf16 needs none).")
    if layout.cp > 1:
        notes.append(f"Context parallelism cp = {layout.cp}: torch.distributed.tensor.experimental.context_parallel "
                     "(experimental) runs scaled_dot_product_attention over mesh['cp'] (K/V by set_rotate_method: "
                     f"{ROTATE[layout.cp_comm]!r}) and cuts "
                     "the token, target and rotary-angle buffers to each rank's load-balanced share; gradients and "
                     "ZeRO shards span the flattened dp x cp mesh. It needs a CUDA SDPA backend (flash, efficient or "
                     "cuDNN).")
    return notes
