"""A torchtitan train config (TOML), section by section, into planner inputs (torchtitan's JobConfig names:
torchtitan/config/job_config.py; its model flavors: core.configs.torchtitan_flavors).

torchtitan runs FSDP2 over the data-parallel shard group (ZeRO-3; parameters kept gathered between forward and
backward under pipeline parallelism by default), tensor parallelism with sequence-parallel norms, pipelining from
torch.distributed.pipelining, and its own per-op selective recompute.
"""

from __future__ import annotations

import re
import tomllib

from core.configs.account import Reading
from core.configs.model import settle
from core.configs.torchtitan_flavors import flavor
from core.errors import InputError

SCHEDULES = {"1F1B": "1f1b", "GPipe": "gpipe", "Interleaved1F1B": "interleaved", "LoopedBFS": "looped-bfs",
             "ZBVZeroBubble": "zbv", "DualPipeV": "dualpipev", "InterleavedZeroBubble": "interleaved"}
DEGREES = {"tensor": "fix_t", "pipeline": "fix_p", "context": "fix_cp", "expert": "fix_ep"}
MULTI_STAGE = ("Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV")
NO_EFFECT_SECTIONS = {"job": "names and folders", "profiling": "profiler switches", "metrics": "logging",
                      "lr_scheduler": "the learning-rate schedule", "checkpoint": "checkpoint saving",
                      "validation": "validation runs", "comm": "timeouts and tracing",
                      "memory_estimation": "torchtitan's own estimator", "fault_tolerance": "fault tolerance",
                      "experimental": "custom modules"}
GPU_COMMENT = re.compile(r"#.*?(\d+)\s*x?\s*(H100|H200|A100|B200|GB200)s?\b[^\n]*?GPU", re.I)
GPUS = {"h100": "h100-80gb", "a100": "a100-80gb", "h200": "h200-141gb", "b200": "b200", "gb200": "b200"}


def read(text: str, source: str = "train.toml", gpus: int = 0) -> Reading:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{source}: not valid TOML ({exc})") from None
    r = Reading("torchtitan", "torch", source=source)
    _comment(text, r)
    r.assume("repeat_kv", True, "a TOML config is read by the torchtitan of before 9810191b (2026-02-23, the Python "
             "config registry), whose attention widened K and V to every query head until ff0829c10 (2026-01-27)")
    return read_sections({k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}, r, gpus)


def read_sections(sections: dict, r: Reading, gpus: int = 0) -> Reading:
    """A train config's sections (the TOML's tables, or the sections of a Python registry entry:
    core.configs.torchtitan_registry) into planner inputs, every field accounted for in `r`; `gpus` (given by
    the user) is what a data-parallel degree of -1 divides."""
    if gpus:
        r.raw["gpus"] = str(gpus)
    for name in ("model", "parallelism", "training", "activation_checkpoint", "compile", "optimizer"):
        if name in sections and not isinstance(sections[name], dict):
            raise InputError(f"{r.source}: [{name}] must be a table, not {type(sections[name]).__name__}")
    layers = _model(sections.pop("model", {}) or {}, r)
    par = sections.pop("parallelism", {}) or {}
    compiled = sections.get("compile") or {}
    if "enable_async_tensor_parallel" in compiled:  # under [compile] since torchtitan's 2026 configs
        par["enable_async_tensor_parallel"] = compiled.pop("enable_async_tensor_parallel")
    train = sections.pop("training", {}) or {}
    _layout(par, train, layers, r)
    _recompute(sections.pop("activation_checkpoint", {}) or {}, r, layers)
    _compile(sections.pop("compile", {}) or {}, train, r)
    _loss(sections.pop("loss", None), r)
    _float8(sections, r)
    optimizer = sections.pop("optimizer", {}) or {}
    if "name" in optimizer:
        name = str(optimizer.pop("name"))
        r.read("optimizer.name", name, {"optimizer": "adam"})
        if "adam" not in name.lower():
            r.unsupported("optimizer.name", name, "counted as Adam's state (two fp32 moments)")
    for key, value in optimizer.items():
        r.no_effect(f"optimizer.{key}", value, "optimizer hyperparameters")
    for key, value in train.items():
        r.no_effect(f"training.{key}", value, "run length, data and clipping: no bytes, no time") \
            if key in ("steps", "max_norm", "dataset", "dataset_path", "seed", "deterministic", "gc_freq",
                       "warmup_steps", "gc_debug", "mixed_precision_reduce", "disable_cuda_graphs") \
            else r.unsupported(f"training.{key}", value, "not a key the importer knows")
    for key, value in par.items():
        if key in ("spmd_backend", "enable_fsdp_symm_mem", "context_parallel_load_balancer",
                   "context_parallel_ptrr_mask_key"):
            r.no_effect(f"parallelism.{key}", value, "how the collectives are issued, not what they move or keep")
        else:
            r.unsupported(f"parallelism.{key}", value, "not modelled; its effect is not counted")
    for name, body in sections.items():
        if name in NO_EFFECT_SECTIONS:
            for key, value in (body.items() if isinstance(body, dict) else [("", body)]):
                r.no_effect(f"{name}.{key}".rstrip("."), value, f"{NO_EFFECT_SECTIONS[name]}: no bytes, no time")
        else:
            r.unsupported(name, body, "a section the importer does not know")
    return r


def _comment(text: str, r: Reading) -> None:
    """The GPUs a file's opening comments name ("preset for 128 H100 GPUs"): only the first 50 comment lines, each
    cut to 300 characters, are searched (a bounded look, whatever the file)."""
    comments = [ln[:300] for ln in text.splitlines()[:200] if ln.lstrip().startswith("#")][:50]
    m = GPU_COMMENT.search("\n".join(comments))
    if m:
        r.read("(comment)", m.group(0).strip("# ")[:60], {"gpus": int(m.group(1)), "gpu": GPUS[m.group(2).lower()]},
               f"gpus = {m.group(1)}, gpu = {GPUS[m.group(2).lower()]} (as the file's own comment says)")


def _model(model: dict, r: Reading) -> int:
    name, size = model.pop("name", "llama3"), model.pop("flavor", "debugmodel")
    arch, source = flavor(str(name), str(size))
    r.read("model.name / model.flavor", f"{name} {size}", {}, f"torchtitan's {name} {size} ({source})")
    settle(r, arch)
    converters = model.pop("converters", [])
    if "float8" in converters:
        r.read("model.converters", converters, {"precision": "fp8"}, "precision = fp8 (torchao float8 linears)")
    elif converters:
        r.unsupported("model.converters", converters, "only float8 is modelled (MXFP8 and NVFP4 recipes are "
                      "counted as bf16)")
    for key, value in model.items():
        r.no_effect(f"model.{key}", value, "tokenizer and checkpoint paths")
    return int(arch["layers"])


def _int(section: dict, key: str, default: int, rest: bool = False) -> int:
    """A whole number of at least 1; `rest`: or -1, torchtitan's "whatever is left"."""
    value = section.pop(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not (value >= 1 or (rest and value == -1)):
        raise InputError(f"{key}: {str(value)[:20]!r} is not a whole number of at least 1" + (" or -1" if rest else ""))
    return value


def _layout(par: dict, train: dict, layers: int, r: Reading) -> None:
    t, p, cp, ep = (_int(par, k, 1) for k in ("tensor_parallel_degree", "pipeline_parallel_degree",
                                              "context_parallel_degree", "expert_parallel_degree"))
    rep, shard = _int(par, "data_parallel_replicate_degree", 1), _int(par, "data_parallel_shard_degree", -1, rest=True)
    for key, value in (("tensor_parallel_degree", t), ("pipeline_parallel_degree", p),
                       ("context_parallel_degree", cp), ("expert_parallel_degree", ep)):
        r.read(f"parallelism.{key}", value, {DEGREES[key.split("_")[0]]: value})
    etp = par.pop("expert_tensor_parallel_degree", None)
    if etp is not None:
        r.read("parallelism.expert_tensor_parallel_degree", etp, {"fix_etp": etp})
    gpus = int(r.raw["gpus"]) if "gpus" in r.raw else 0
    if shard == -1:
        if not gpus:
            gpus = 8 * t * p * cp * rep if 8 % (t * p * cp * rep) else 8
            r.assume("gpus", gpus, "data_parallel_shard_degree -1 takes the rest of the GPUs, and the file does not "
                                   "say how many: torchtitan's run_train.sh default NGPU=8 (give --gpus)")
        shard = gpus // (t * p * cp * rep)
        r.read("parallelism.data_parallel_shard_degree", -1, {}, f"the rest: {shard} shard ranks")
    else:
        r.read("parallelism.data_parallel_shard_degree", shard, {})
        if not gpus:
            r.read("(degrees)", "", {"gpus": rep * shard * t * p * cp}, f"gpus = {rep * shard * t * p * cp}")
    d = rep * shard
    if rep > 1 and shard > 1:  # HSDP: FSDP2 within the shard group, replicated across
        r.read("parallelism.data_parallel_replicate_degree", rep, {"fix_d": d, "fix_replicate": rep},
               f"d = {rep} x {shard} = {d}; hybrid sharding: FSDP within {shard} x cp ranks, {rep} copies")
    else:
        r.read("parallelism.data_parallel_replicate_degree", rep, {"fix_d": d}, f"d = {rep} x {shard} = {d}")
    zero = 3 if shard > 1 else 0
    r.assume("zero", zero, "FSDP2 fully_shard over the shard group (ZeRO-3)" if zero else
             "no shard group: DDP (ZeRO-0)")
    mode = str(par.pop("fsdp_reshard_after_forward", "default"))
    reshard = {"always": True, "never": False}.get(mode, p == 1)
    r.read("parallelism.fsdp_reshard_after_forward", mode, {"reshard": "on" if reshard else "off"},
           f"reshard = {'on' if reshard else 'off'}" + (" (torchtitan's default: kept gathered under pipeline "
                                                         "parallelism)" if mode == "default" else ""))
    tokens = "num_tokens_per_microbatch_per_dp_rank" in train or "max_context_length" in train
    _pipeline(par, p, layers, r, tokens)
    (_token_batch if tokens else _batch)(par, train, p, d, r)
    _tensor(par, train, t, r)


def _pipeline(par: dict, p: int, layers: int, r: Reading, tokens: bool = False) -> None:
    """The schedule, its stages per rank, the micro-batch size (the TOML's; a token-counted config gives it in
    _token_batch) and torchtitan's split, which counts the embedding and the output layer as a layer each."""
    name = str(par.pop("pipeline_parallel_schedule", "1F1B"))
    less = [par.pop(f"pipeline_parallel_{end}_stage_less_layers", 1) for end in ("first", "last")]
    if p > 1:
        if name not in SCHEDULES:
            raise InputError(f"parallelism.pipeline_parallel_schedule: {name[:40]!r} is not a torchtitan schedule")
        schedule = SCHEDULES[name]
        per_stage = par.pop("pipeline_parallel_layers_per_stage", None)
        if name in ("ZBVZeroBubble", "DualPipeV"):
            v = 2
        elif name in MULTI_STAGE:
            v = layers // (p * per_stage) if per_stage else 2
        else:
            v = 1
        r.read("parallelism.pipeline_parallel_schedule", name, {"schedule": schedule, "v": v},
               f"schedule = {schedule}, v = {v}" + ("" if per_stage or name not in MULTI_STAGE[:3] else
                                                    " (torchtitan's default: two stages per rank)"))
        if name == "InterleavedZeroBubble":
            r.unsupported("parallelism.pipeline_parallel_schedule", name, "timed as interleaved 1F1B")
        if not tokens or "pipeline_parallel_microbatch_size" in par:
            mbs = _int(par, "pipeline_parallel_microbatch_size", 1)
            r.read("parallelism.pipeline_parallel_microbatch_size", mbs, {"mb_sizes": mbs})
        r.read("parallelism.pipeline_parallel_first/last_stage_less_layers", f"{less[0]} {less[1]}",
               {"ends_in_split": True}, "ends_in_split = true: the embedding and the output layer count as a layer "
               "each in the split (torchtitan's generate_llm_fqn_per_model_part)")
        if less != [1, 1]:
            r.unsupported("parallelism.pipeline_parallel_first/last_stage_less_layers", f"{less[0]} {less[1]}",
                          "counted as one layer each (the planner's ends_in_split)")
    else:
        r.no_effect("parallelism.pipeline_parallel_schedule", name, "no pipeline (p = 1)")
        if less != [1, 1]:
            r.no_effect("parallelism.pipeline_parallel_first/last_stage_less_layers", f"{less[0]} {less[1]}",
                        "no pipeline (p = 1)")
        r.raw["schedule"], r.raw["v"] = "1f1b", "1"


def _batch(par: dict, train: dict, p: int, d: int, r: Reading) -> None:
    local = _int(train, "local_batch_size", 8) if "local_batch_size" in train else _int(train, "batch_size", 8)
    glob = _int(train, "global_batch_size", -1, rest=True)
    if p == 1:
        r.read("training.local_batch_size", local, {"mb_sizes": local})
    batch = glob if glob > 0 else local * d
    r.read("training.local_batch_size x d" if glob <= 0 else "training.global_batch_size", glob if glob > 0 else
           local, {"batch": batch}, f"batch = {batch}")
    seq = _int(train, "seq_len", 2048)
    r.read("training.seq_len", seq, {"seq": seq})


def _token_batch(par: dict, train: dict, p: int, d: int, r: Reading) -> None:
    """torchtitan since 2026 counts token slots: each data-parallel rank's micro-batch is
    num_tokens_per_microbatch_per_dp_rank tokens packed into rows of max_context_length, a pipeline runs
    num_pp_microbatches of them, and num_tokens_per_train_step (-1: one round) sets the gradient accumulation
    (torchtitan/trainer.py)."""
    tokens = _int(train, "num_tokens_per_microbatch_per_dp_rank", 16384)
    seq = _int(train, "max_context_length", 2048)
    if tokens % seq:
        raise InputError(f"training.num_tokens_per_microbatch_per_dp_rank: {tokens} is not a multiple of "
                         f"max_context_length {seq}; the planner counts whole sequences of {seq} tokens")
    b = tokens // seq
    r.read("training.num_tokens_per_microbatch_per_dp_rank", tokens, {"mb_sizes": b},
           f"micro-batch = {tokens} / {seq} = {b} sequences")
    r.read("training.max_context_length", seq, {"seq": seq})
    m = _int(par, "num_pp_microbatches", 1)
    if p == 1 and m != 1:
        r.no_effect("parallelism.num_pp_microbatches", m, "no pipeline (p = 1): torchtitan ignores it")
        m = 1
    elif p > 1:
        r.read("parallelism.num_pp_microbatches", m, {}, f"{m} micro-batches per pipeline round")
    step = _int(train, "num_tokens_per_train_step", -1, rest=True)
    per_round = tokens * m * d
    if step > 0 and step % per_round:
        raise InputError(f"training.num_tokens_per_train_step: {step} is not a multiple of the {per_round} tokens "
                         f"one round of every data-parallel rank takes ({tokens} x {m} x d = {d})")
    batch = step // seq if step > 0 else b * m * d
    r.read("training.num_tokens_per_train_step", step, {"batch": batch},
           f"batch = {batch} sequences" + ("" if step > 0 else f" (one round: {b} x {m} x d = {d})"))


def _tensor(par: dict, train: dict, t: int, r: Reading) -> None:
    sp = bool(par.pop("enable_sequence_parallel", True))
    if t > 1 and sp:
        r.read("(tensor parallel)", t, {"sp": "on"}, "sp = on (torchtitan shards the norms with SequenceParallel)")
    elif t > 1:
        r.read("parallelism.enable_sequence_parallel", False, {"sp": "off"}, "sp = off: the norms run replicated")
    else:
        r.raw["sp"] = "off"
    overlap = bool(par.pop("enable_async_tensor_parallel", False))
    r.read("parallelism.enable_async_tensor_parallel", overlap, {"tp_comm_overlap": "on" if overlap and t > 1
                                                                 else "off"})
    if par.pop("disable_loss_parallel", False):
        r.unsupported("parallelism.disable_loss_parallel", True, "the loss is counted vocabulary-parallel")
    offload = bool(train.pop("enable_cpu_offload", False))
    r.raw["offload"] = "optimizer+params" if offload else "none"
    if offload:
        r.read("training.enable_cpu_offload", True, {"offload": "optimizer+params"})
    dtype = str(train.pop("mixed_precision_param", "bfloat16"))
    if "precision" not in r.raw:
        r.read("training.mixed_precision_param", dtype, {"precision": "bf16" if dtype == "bfloat16" else "fp16"})
    r.raw["tp_comm_overlap"] = r.raw.get("tp_comm_overlap", "off")


def _recompute(ac: dict, r: Reading, layers: int) -> None:
    mode = str(ac.pop("mode", "selective"))
    given = "selective_ac_option" in ac
    option = str(ac.pop("selective_ac_option", "2"))
    if mode != "selective" and given:
        r.no_effect("activation_checkpoint.selective_ac_option", option, f"applies to selective mode only ({mode})")
    elif mode == "selective" and option == "op":
        r.read("activation_checkpoint.selective_ac_option", option, {}, "torchtitan's per-op policy: the torch "
               "accounting's selective recompute")
    if mode == "selective" and option != "op":
        every = int(option) if option.isdigit() and int(option) > 0 else 0
        if not every:
            raise InputError(f"activation_checkpoint.selective_ac_option: {option[:20]!r} is neither 'op' nor a "
                             "positive whole number")
        stage = -(-layers // (int(r.raw.get("fix_p", "1")) * int(r.raw.get("v", "1"))))  # a stage's layers
        count = -(-stage // every)
        r.read("activation_checkpoint.selective_ac_option", option, {"recompute_layers": count},
               f"every {every}-th block recomputed whole: full recompute on {count} of each stage's {stage} layers "
               "(the same count as the planner's first N)")
        mode = "full"
    r.read("activation_checkpoint.mode", mode, {"recompute": mode},
           f"recompute = {mode}" + (" (torchtitan's per-op policy)" if mode == "selective" else ""))
    for key, value in ac.items():
        r.unsupported(f"activation_checkpoint.{key}", value, "not modelled")


def _loss(loss: object, r: Reading) -> None:
    """The loss a registry entry names (TOML configs have none: torchtitan's loss then followed compile)."""
    if loss is None:
        return
    kind = str(loss)
    if kind == "chunked":
        r.read("loss", "ChunkedLossWrapper", {"loss": "chunked"}, "loss = chunked: the output layer and the "
               "cross-entropy a chunk of the tokens at a time, each chunk's backward at once (8 chunks)")
    elif kind == "cross_entropy":
        r.read("loss", "CrossEntropyLoss", {}, "the whole logits at once (compiled with the model when compile is "
               "on)")
    else:
        r.unsupported("loss", kind, "counted as torchtitan's cross-entropy on the whole logits")


def _compile(block: dict, train: dict, r: Reading) -> None:
    enable = bool(block.pop("enable", train.pop("compile", False)))
    parts = block.pop("components", ["model", "loss"])
    model = enable and "model" in parts
    r.read("compile.enable / components", f"{enable} {parts}", {"compile": model},
           f"compile = {'true' if model else 'false'}")
    if enable and "loss" in parts:
        r.read("compile.components", "loss", {"loss": "compiled"})
    for key, value in block.items():
        r.no_effect(f"compile.{key}", value, "compiler backend options")


def _float8(sections: dict, r: Reading) -> None:
    quant = sections.pop("quantize", None)
    legacy = sections.pop("float8", None)
    blocks = {}
    if isinstance(quant, dict):
        for kind, body in quant.items():
            for fmt, opts in (body.items() if isinstance(body, dict) else []):
                blocks[f"quantize.{kind}.{fmt}"] = opts
    if isinstance(legacy, dict):
        blocks["float8"] = legacy
    for name, opts in blocks.items():
        for key, value in (opts.items() if isinstance(opts, dict) else []):
            r.no_effect(f"{name}.{key}", value, "float8 recipe details (scaling, which layers)")
