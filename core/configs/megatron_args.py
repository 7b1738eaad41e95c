"""Megatron-LM / Megatron-Core launch scripts and command lines, read flag by flag into planner inputs.

Flag names, meanings and defaults are Megatron-LM's megatron/training/arguments.py at the release the planner pins
(core.frameworks.megatron.RELEASE): what a flag left out means is Megatron's default, said as "assumed".
"""

from __future__ import annotations

import re

from core.configs import megatron_legacy, shell
from core.configs.account import Reading
from core.configs.model import settle
from core.configs.vocab import tokenizer_vocab
from core.params.memory import RECOMPUTE_MODULES

# Flags that change neither memory nor step time, by why.
_NO_EFFECT = {
    "data, tokenizer and outputs (the planner times mock tokens)": (
        "data-path", "train-data-path", "valid-data-path", "test-data-path", "data-cache-path", "split", "mock-data",
        "vocab-file", "merge-file", "tokenizer-model", "data-args-path", "num-workers", "no-create-attention-mask-"
        "in-dataloader", "reset-position-ids", "reset-attention-mask", "eod-mask-loss", "dataloader-type",
        "per-split-data-args-path", "object-storage-cache-path", "legacy-tokenizer", "tiktoken-pattern"),
    "optimizer hyperparameters and schedule (no bytes, no time)": (
        "lr", "min-lr", "lr-decay-style", "lr-decay-iters", "lr-decay-samples", "lr-warmup-iters",
        "lr-warmup-samples", "lr-warmup-fraction", "lr-warmup-init", "weight-decay", "adam-beta1", "adam-beta2",
        "adam-eps", "clip-grad", "init-method-std", "start-weight-decay", "end-weight-decay",
        "weight-decay-incr-style", "loss-scale", "initial-loss-scale", "min-loss-scale", "loss-scale-window",
        "hysteresis", "sgd-momentum", "lr-wsd-decay-style", "lr-wsd-decay-iters", "lr-wsd-decay-samples",
        "override-opt_param-scheduler", "use-checkpoint-opt_param-scheduler"),
    "run length, logging and checkpoints": (
        "train-iters", "train-samples", "eval-iters", "eval-interval", "save", "load", "save-interval",
        "log-interval", "tensorboard-dir", "log-throughput", "log-timers-to-tensorboard", "log-validation-ppl-to-"
        "tensorboard", "log-memory-to-tensorboard", "log-params-norm", "log-num-zeros-in-grad", "timing-log-level",
        "wandb-project", "wandb-exp-name", "wandb-save-dir", "exit-interval", "exit-duration-in-mins",
        "exit-on-missing-checkpoint", "ckpt-format", "ckpt-fully-parallel-save", "ckpt-fully-parallel-load",
        "ckpt-assume-constant-structure", "async-save", "no-load-optim", "no-load-rng", "finetune",
        "use-checkpoint-args", "dist-ckpt-strictness", "tensorboard-log-interval", "log-loss-scale-to-tensorboard",
        "log-world-size-to-tensorboard", "logging-level", "no-save-optim", "no-save-rng", "pretrained-checkpoint",
        "non-persistent-save-interval", "manual-gc", "manual-gc-interval", "profile", "profile-step-start",
        "profile-step-end", "profile-ranks", "use-pytorch-profiler", "record-memory-history", "log-straggler",
        "timing-log-option", "log-progress", "eval-only", "skip-train", "one-logger-run-name", "save-retain-interval",
        "tensorboard-queue-size", "no-check-for-nan-in-loss-and-grad", "check-for-nan-in-loss-and-grad"),
    "numerics that neither add bytes nor change the planner's step time": (
        "seed", "distributed-backend", "distributed-timeout-minutes", "use-mcore-models", "attention-softmax-in-fp32",
        "no-masked-softmax-fusion", "no-bias-gelu-fusion", "no-bias-swiglu-fusion", "no-bias-dropout-fusion",
        "no-rope-fusion", "apply-query-key-layer-scaling", "rotary-base", "rotary-percent", "use-rotary-position-"
        "embeddings", "rotary-seq-len-interpolation-factor", "use-rope-scaling", "rope-scaling-factor",
        "max-position-embeddings", "decoder-seq-length", "norm-epsilon", "layernorm-epsilon",
        "apply-layernorm-1p", "bf16-reduce-in-fp32", "no-persist-layer-norm",
        "make-vocab-size-divisible-by", "use-distributed-optimizer-in-fp32", "untie-embeddings",
        "moe-router-load-balancing-type", "moe-aux-loss-coeff", "moe-z-loss-coeff", "moe-router-score-function",
        "moe-router-enable-expert-bias", "moe-router-bias-update-rate", "moe-router-topk-scaling-factor",
        "moe-router-pre-softmax", "moe-router-dtype", "moe-router-num-groups", "moe-router-group-topk",
        "moe-permute-fusion", "moe-token-drop-policy", "moe-input-jitter-eps",
        "moe-router-fusion", "moe-shared-expert-overlap", "moe-per-layer-logging", "mtp-loss-scaling-factor",
        "fp8-amax-history-len", "fp8-amax-compute-algo", "fp8-margin", "fp8-interval", "fp8-wgrad",
        "first-last-layers-bf16", "num-layers-at-start-in-bf16", "num-layers-at-end-in-bf16", "transformer-impl",
        "use-legacy-models", "ddp-average-in-collective", "ddp-bucket-size", "bucket-size",
        "overlap-param-gather-with-optimizer-step", "no-async-tensor-model-parallel-allreduce", "use-torch-fsdp2",
        "deterministic-mode", "calculate-per-token-loss", "rerun-mode",
        "no-load-main-params-from-ckpt", "async-tensor-model-parallel-allreduce",
        "kv-lora-rank-norm", "rotary-scaling-factor", "mscale", "mscale-all-dim", "beta-fast", "beta-slow",
        "original-max-position-embeddings", "moe-router-topk-limited-devices", "empty-unused-memory-level",
        "enable-cuda-graph", "tp-comm-bootstrap-backend", "use-tp-pp-dp-mapping"),
    "the custom model's block follows its MLP kind (core.model.presets.custom_family): norms, biases and "
    "positions move the count by O(h) per layer": (
        "position-embedding-type", "normalization", "disable-bias-linear", "add-bias-linear", "squared-relu"),
}
NO_EFFECT = {flag: why for why, flags in _NO_EFFECT.items() for flag in flags}


def read(text: str, source: str = "megatron") -> Reading:
    script = shell.read(text)
    r = Reading("megatron", "megatron", source=source)
    flags = _flags(script.args, r)
    _launcher(script, r)
    apply(flags, r)
    used = " ".join(script.args)
    for name in dict.fromkeys(script.unresolved):
        if shell.UNRESOLVED + name in used:
            r.unsupported(f"${name}", "", "the script does not define it (an argument or the environment at "
                          "launch), so the flag it feeds is not read")
        else:
            r.no_effect(f"${name}", "", "defined at launch (rendezvous, paths); no bytes, no time")
    return r


def apply(flags: dict[str, str], r: Reading, preset=None) -> None:
    """Megatron-LM arguments (name without dashes -> value, "true" for a switch) into `r`, every one accounted;
    `preset` (a ModelConfig): the model is that preset, already read (a NeMo 2 recipe names it by class)."""
    megatron_legacy.translate(flags, r)
    arch = {"layers": preset.layers} if preset is not None else _model(flags, r)
    _layout(flags, arch, r)
    _training(flags, r)
    if preset is None and int(arch.get("experts") or 0) > 1 and not r.has("moe_dispatcher"):
        r.assume("moe_dispatcher", "allgather", "no --moe-token-dispatcher-type: Megatron-Core's default, the "
                 "allgather dispatcher (transformer_config.py moe_token_dispatcher_type)")
    _grouped_gemm(flags, r, preset is None and int(arch.get("experts") or 0) > 1)
    for flag, value in flags.items():
        if flag in NO_EFFECT:
            r.no_effect(f"--{flag}", value, NO_EFFECT[flag])
        else:
            r.unsupported(f"--{flag}", value, "not a flag the importer knows; its effect is not counted")


def _flags(args: list[str], r: Reading) -> dict[str, str]:
    """--flag value / --flag=value / --flag (true), in order; a repeated flag keeps its last value, as argparse."""
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if not tok.startswith("--"):
            r.unsupported(tok, "", "a stray argument outside any flag")
            continue
        name, eq, value = tok[2:].partition("=")
        name = name.replace("_", "-")
        if not eq:
            vals = []
            while i < len(args) and not (args[i].startswith("--") or (args[i].startswith("-") and
                                                                       not _number(args[i]))):
                vals.append(args[i])
                i += 1
            value = " ".join(vals) if vals else "true"
        out[name] = value
    return out


def _loss_kernel(flags: dict[str, str], r: Reading) -> None:
    """--cross-entropy-loss-fusion: the native fused kernel (Megatron-LM's impl default), or Transformer Engine's."""
    impl = _pop(flags, "cross-entropy-fusion-impl")
    if _pop(flags, "cross-entropy-loss-fusion") == "true":
        r.read("--cross-entropy-loss-fusion", f"true (--cross-entropy-fusion-impl {impl or 'native'})",
               {"loss": "fused" if impl == "te" else "native"})
    elif impl:
        r.no_effect("--cross-entropy-fusion-impl", impl, "without --cross-entropy-loss-fusion the unfused "
                    "vocab-parallel cross-entropy runs")


def _gradient_buffer(flags: dict[str, str], r: Reading) -> None:
    """The gradient buffer's precision (megatron/training/arguments.py at d98e8a6): under --bf16 fp32 unless
    --grad-reduce-in-bf16, which also reduces in bf16; under --fp16 fp16 unless --accumulate-allreduce-grads-in-fp32
    (param_and_grad_buffer.py: torch.float if grad_reduce_in_fp32 else param.dtype)."""
    if _pop(flags, "grad-reduce-in-bf16") == "true":
        r.read("--grad-reduce-in-bf16", "true", {"grad_dtype": "bf16", "grad_reduce_bytes": 2},
               "grad_dtype = bf16 (the gradient buffer), reduced in 2 bytes")
    if _pop(flags, "accumulate-allreduce-grads-in-fp32") == "true":
        r.read("--accumulate-allreduce-grads-in-fp32", "true", {"grad_dtype": "fp32"},
               "grad_dtype = fp32 (Megatron-LM's own choice under --bf16; under --fp16 it doubles the buffer)")


def _number(tok: str) -> bool:
    return bool(re.fullmatch(r"-?\d+(\.\d*)?(e-?\d+)?", tok))


def _pop(flags: dict[str, str], name: str) -> str | None:
    value = flags.pop(name, None)
    if value is not None and shell.UNRESOLVED in value:
        return None
    return value


def _launcher(script: shell.Script, r: Reading) -> None:
    tokens = script.launcher
    opts: dict[str, str] = {}
    for i, tok in enumerate(tokens):
        if tok.startswith("--"):
            name, eq, value = tok[2:].partition("=")
            opts[name.replace("_", "-")] = value if eq else (tokens[i + 1] if i + 1 < len(tokens) else "")
    deepspeed = any(t.split("/")[-1] == "deepspeed" for t in tokens)  # DeepSpeed's launcher: --num_gpus, --num_nodes
    per_node = opts.get("num-gpus" if deepspeed else "nproc-per-node")
    nodes = opts.get("num-nodes" if deepspeed else "nnodes", "1")
    if per_node and nodes and per_node.isdigit() and nodes.split(":")[-1].isdigit():
        n = int(per_node) * int(nodes.split(":")[-1])
        launcher = "deepspeed --num_gpus x --num_nodes" if deepspeed else "torchrun --nproc-per-node x --nnodes"
        r.read(launcher, f"{per_node} x {nodes}", {"gpus": n})
    for name, value in script.env.items():
        r.no_effect(name, value, "environment for the launch (Megatron asserts CUDA_DEVICE_MAX_CONNECTIONS=1 with "
                    "TP overlap); no bytes, no time")


def _int(flags: dict[str, str], name: str) -> int | None:
    value = _pop(flags, name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _model(flags: dict[str, str], r: Reading) -> dict[str, object]:
    arch: dict[str, object] = {}
    taken: dict[str, str] = {}

    def take(flag: str, key: str, cast=int) -> None:
        value = _pop(flags, flag)
        if value is None:
            return
        try:
            arch[key] = cast(value)
            taken[flag] = value
            r.read(f"--{flag}", value, {}, f"{key} = {arch[key]}")
        except ValueError:
            r.unsupported(f"--{flag}", value, f"not a number; {key} left to its default")

    for flag, key in (("num-layers", "layers"), ("hidden-size", "hidden"), ("num-attention-heads", "heads"),
                      ("ffn-hidden-size", "ffn"), ("kv-channels", "head_dim"), ("vocab-size", "vocab"),
                      ("num-experts", "experts"), ("moe-router-topk", "top_k"), ("moe-ffn-hidden-size", "expert_ffn"),
                      ("mtp-num-layers", "mtp_layers"), ("kv-lora-rank", "kv_lora_rank"),
                      ("q-lora-rank", "q_lora_rank"), ("qk-head-dim", "qk_head_dim"),
                      ("qk-pos-emb-head-dim", "qk_rope_dim"), ("v-head-dim", "v_head_dim")):
        take(flag, key)
    groups = _pop(flags, "num-query-groups")
    gqa = _pop(flags, "group-query-attention") == "true"
    if groups is not None and groups.isdigit():
        if gqa:
            arch["kv_heads"] = int(groups)
            r.read("--num-query-groups", groups, {}, f"kv_heads = {groups} (with --group-query-attention)")
        else:
            r.no_effect("--num-query-groups", groups, "ignored by Megatron without --group-query-attention")
    if "heads" in arch and "kv_heads" not in arch:
        arch["kv_heads"] = arch["heads"]
    if _pop(flags, "swiglu") == "true":
        arch["mlp"] = "swiglu"
        r.read("--swiglu", "true", {}, "mlp = swiglu (three matrices)")
    else:
        arch["mlp"] = "gelu"
    if _pop(flags, "untie-embeddings-and-output-weights") == "true":
        arch["tied"] = False
        r.read("--untie-embeddings-and-output-weights", "true", {}, "tied = false")
    else:
        arch["tied"] = True
    qk_norm = _pop(flags, "qk-layernorm") == "true"
    if "ffn" not in arch and "hidden" in arch:
        arch["ffn"] = 4 * int(arch["hidden"])  # Megatron's default --ffn-hidden-size
    mla = _pop(flags, "multi-latent-attention") == "true"
    if qk_norm and mla:  # multi_latent_attention.py: q_layernorm / kv_layernorm are the latents' norms
        r.no_effect("--qk-layernorm", "true", "with latent attention it norms the latents, which MLA counts already")
    elif qk_norm:
        arch["qk_norm"] = True
        r.read("--qk-layernorm", "true", {}, "qk_norm = true (q and k normalised per head: their norms' inputs kept)")
    _window(flags, arch, r)
    if mla:
        r.read("--multi-latent-attention", "true", {}, "multi-head latent attention (needs --kv-lora-rank)")
        if arch.pop("head_dim", None) is not None:  # MLA's head sizes are --qk-head-dim / --v-head-dim
            r.no_effect("--kv-channels", "", "latent attention sets its own head sizes (--qk-head-dim, --v-head-dim)")
    else:
        for key in ("kv_lora_rank", "q_lora_rank"):
            arch.pop(key, None)
    _moe_layers(flags, arch, r)
    shared = _int(flags, "moe-shared-expert-intermediate-size")
    if shared is not None:
        width = int(arch.get("expert_ffn") or arch.get("ffn") or 0)
        if width and shared % width == 0:
            arch["shared_experts"] = shared // width
            r.read("--moe-shared-expert-intermediate-size", shared, {}, f"shared_experts = {shared // width}")
        else:
            r.unsupported("--moe-shared-expert-intermediate-size", shared,
                          f"not a whole number of experts of width {width}; no shared expert counted")
    _vocab_and_kernels(flags, arch, r)
    settle(r, arch)
    return arch


def _vocab_and_kernels(flags: dict[str, str], arch: dict[str, object], r: Reading) -> None:
    """The vocabulary (--vocab-size or the tokenizer's), the top-k default, dropout and the attention kernel."""
    if arch.get("experts") and "top_k" not in arch:
        arch["top_k"] = 2
        r.assume("top_k", 2, "Megatron-LM's default --moe-router-topk")
    if "vocab" not in arch:
        tok, model_name = flags.get("tokenizer-type"), flags.get("tokenizer-model", "")
        vocab, why = tokenizer_vocab(tok or "GPT2BPETokenizer", model_name)
        if vocab:
            arch["vocab"] = vocab
            r.read("--tokenizer-type", tok or "(default GPT2BPETokenizer)", {}, f"vocab = {vocab:,} ({why})")
            flags.pop("tokenizer-type", None)
            flags.pop("tokenizer-model", None)
        else:
            r.assume("vocab", 50257, f"no --vocab-size and {why}; give --vocab to change it")
            arch["vocab"] = 50257
    if "tokenizer-type" in flags:
        r.no_effect("--tokenizer-type", flags.pop("tokenizer-type"), "the vocabulary is read from --vocab-size")
    missing = [f for f, k in (("num-layers", "layers"), ("hidden-size", "hidden"), ("num-attention-heads", "heads"))
               if k not in arch]
    if missing:
        from core.errors import InputError
        raise InputError("the command does not give the model: missing " + ", ".join("--" + m for m in missing))
    dropout = [_pop(flags, f) for f in ("attention-dropout", "hidden-dropout")]
    keeps = any(d is None or not _number(d) or float(d) > 0 for d in dropout)
    r.raw["dropout"] = "true" if keeps else "false"
    r.read("--attention-dropout / --hidden-dropout", " / ".join(d or "default 0.1" for d in dropout), {},
           f"dropout = {'true' if keeps else 'false'}" + (" (Megatron's default is 0.1)" if None in dropout else ""))
    backend = _pop(flags, "attention-backend")
    flash = _pop(flags, "use-flash-attn") == "true" or backend in (None, "auto", "flash", "fused")
    r.raw["flash"] = "true" if flash else "false"
    r.read("--attention-backend", backend or "default auto", {},
           f"flash = {'true' if flash else 'false'} (Transformer Engine picks a fused kernel under auto)")


def _window(flags: dict, arch: dict, r: Reading) -> None:
    """--window-size "w,0" (Transformer Engine's (left, right) window: w keys back) in every layer, or with
    --window-attn-skip-freq N one full layer after N - 1 windowed ones (a list pattern: its share of 1s)."""
    size = _pop(flags, "window-size")
    if not size:
        return
    left = size.strip("()[] ").split(",")[0].strip()
    if not left.isdigit() or int(left) <= 0:
        r.unsupported("--window-size", size, "not a (left, right) window of whole tokens; full attention counted")
        return
    skip = _pop(flags, "window-attn-skip-freq")
    share = 1.0
    if skip and skip.isdigit() and int(skip) > 0:
        share = (int(skip) - 1) / int(skip)
    elif skip:
        pattern = re.findall(r"[01]", skip.split("*")[0])
        share = pattern.count("1") / len(pattern) if pattern else 1.0
    arch["window"], arch["window_share"] = int(left), round(share, 6)
    r.read("--window-size", size, {}, f"window = {left} tokens in {share:.3g} of the layers"
           + (f" (--window-attn-skip-freq {skip})" if skip else ""))


def _moe_layers(flags: dict[str, str], arch: dict[str, object], r: Reading) -> None:
    freq = _pop(flags, "moe-layer-freq")
    if freq is None:
        return
    m = re.fullmatch(r"\(?\s*\[0\]\s*\*\s*(\d+)\s*\+\s*\[1\]\s*\*\s*(\d+)\s*\)?", freq.strip().strip("'\""))
    if freq.strip() == "1":
        r.read("--moe-layer-freq", freq, {}, "every layer is MoE")
    elif m:
        arch["dense_layers"] = int(m.group(1))
        r.read("--moe-layer-freq", freq, {}, f"dense_layers = {m.group(1)}")
    else:
        r.unsupported("--moe-layer-freq", freq, "only 1 or ([0]*k+[1]*n) is modelled; counted as every layer MoE")


def _layout(flags: dict[str, str], arch: dict[str, object], r: Reading) -> None:
    sizes = {}
    for flag, key, name in (("tensor-model-parallel-size", "fix_t", "t"),
                            ("pipeline-model-parallel-size", "fix_p", "p"),
                            ("context-parallel-size", "fix_cp", "cp"), ("expert-model-parallel-size", "fix_ep", "ep")):
        value = _int(flags, flag)
        sizes[name] = value or 1
        if value is None:
            r.assume(key, 1, f"Megatron-LM's default --{flag} 1")
        else:
            r.read(f"--{flag}", value, {key: value}, f"{name} = {value}")
    etp = _int(flags, "expert-tensor-parallel-size")
    if etp is not None:
        r.read("--expert-tensor-parallel-size", etp, {"fix_etp": etp})
    p, layers = sizes["p"], int(arch.get("layers", 0))
    v = _int(flags, "num-virtual-stages-per-pipeline-rank")
    per_stage = _int(flags, "num-layers-per-virtual-pipeline-stage")
    if v is not None:
        r.read("--num-virtual-stages-per-pipeline-rank", v, {"v": v})
    elif per_stage:
        if layers % (p * per_stage) == 0:
            v = layers // (p * per_stage)
            r.read("--num-layers-per-virtual-pipeline-stage", per_stage, {"v": v},
                   f"v = {layers} layers / (p {p} x {per_stage}) = {v}")
        else:
            r.unsupported("--num-layers-per-virtual-pipeline-stage", per_stage,
                          f"{layers} layers do not split into p {p} x {per_stage}; counted without interleaving")
    for flag in ("decoder-first-pipeline-num-layers", "decoder-last-pipeline-num-layers"):
        value = _pop(flags, flag)
        if value is not None:
            r.unsupported(f"--{flag}", value, "an uneven pipeline split; the planner splits layers evenly")
    schedule = "interleaved" if p > 1 and v and v > 1 else "1f1b"
    r.assume("schedule", schedule, "Megatron runs 1F1B, interleaved when a rank holds several virtual stages")
    if schedule == "1f1b":
        r.raw["v"] = "1"
    sp = _pop(flags, "sequence-parallel") == "true"
    _switch(r, "sp", "--sequence-parallel", sp)
    _switch(r, "tp_comm_overlap", "--tp-comm-overlap", _pop(flags, "tp-comm-overlap") == "true")
    _zero(flags, r)
    r.raw["reshard"] = "on"
    for flag in ("account-for-embedding-in-pipeline-split", "account-for-loss-in-pipeline-split"):
        if _pop(flags, flag) == "true":
            r.read(f"--{flag}", "true", {"ends_in_split": True})


def _switch(r: Reading, key: str, flag: str, on: bool) -> None:
    if on:
        r.read(flag, "true", {key: "on"})
    else:
        r.assume(key, "off", f"no {flag} (Megatron-LM's default: off)")


def _zero(flags: dict[str, str], r: Reading) -> None:
    fsdp = _pop(flags, "use-megatron-fsdp") == "true"
    strategy = _pop(flags, "data-parallel-sharding-strategy")
    if fsdp:
        stage = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}.get(strategy or
                                                                                           "optim_grads_params", 3)
        r.read("--use-megatron-fsdp", f"strategy {strategy or 'default optim_grads_params'}", {"zero": stage},
               f"ZeRO-{stage} (Megatron-FSDP)")
    elif _pop(flags, "use-distributed-optimizer") == "true":
        r.read("--use-distributed-optimizer", "true", {"zero": 1}, "ZeRO-1: the distributed optimizer")
    elif "zero" not in r.raw:  # DeepSpeed's stage (core.configs.megatron_legacy) when it runs the model
        r.assume("zero", 0, "no --use-distributed-optimizer: each data-parallel rank keeps the whole optimizer")
    instances = _int(flags, "num-distributed-optimizer-instances")
    if instances is not None and instances > 1 and int(r.raw.get("zero", "0")) >= 1:
        r.read("--num-distributed-optimizer-instances", instances, {"fix_replicate": instances},
               f"hybrid sharding: ZeRO within d x cp / {instances} ranks, {instances} copies")
    elif instances is not None:
        r.no_effect("--num-distributed-optimizer-instances", instances,
                    "one instance, or no sharded optimizer to replicate")
    if _pop(flags, "optimizer-cpu-offload") == "true":
        fraction = _pop(flags, "optimizer-offload-fraction")
        if fraction is None or (_number(fraction) and float(fraction) >= 1):
            r.read("--optimizer-cpu-offload", "true", {"offload": "optimizer"})
        else:
            r.unsupported("--optimizer-offload-fraction", fraction, "a partial offload; counted as none")
            r.raw["offload"] = "none"
    else:
        r.raw["offload"] = "none"


def _training(flags: dict[str, str], r: Reading) -> None:
    mbs = _int(flags, "micro-batch-size")
    if mbs is None:
        r.assume("mb_sizes", 1, "no --micro-batch-size (Megatron requires it); 1")
        mbs = 1
    else:
        r.read("--micro-batch-size", mbs, {"mb_sizes": mbs})
    gbs = _int(flags, "global-batch-size")
    if gbs is not None:
        r.read("--global-batch-size", gbs, {"batch": gbs})
    seq = _int(flags, "seq-length")
    if seq is not None:
        r.read("--seq-length", seq, {"seq": seq})
    precision = "fp8" if flags.get("fp8-format") else "bf16" if _pop(flags, "bf16") == "true" else \
        "fp16" if _pop(flags, "fp16") == "true" else ""
    fmt = _pop(flags, "fp8-format")
    if fmt:
        gather = _pop(flags, "fp8-param-gather") == "true"
        recipe = _pop(flags, "fp8-recipe") or "delayed"
        flags.pop("bf16", None)
        r.read("--fp8-format", fmt, {"precision": "fp8"},
               f"precision = fp8 ({recipe} scaling)" + ("" if gather else "; the planner counts 1-byte primary "
                                                        "weights as --fp8-param-gather keeps them, Megatron keeps "
                                                        "bf16 weights without it"))
    elif precision:
        r.read(f"--{precision}", "true", {"precision": precision})
    else:
        r.unsupported("(precision)", "fp32", "no --bf16 / --fp16: Megatron trains in fp32, which the planner does "
                      "not model; counted as bf16")
        r.raw["precision"] = "bf16"
    _recompute(flags, r)
    optimizer = _pop(flags, "optimizer")
    if optimizer is not None:
        r.read("--optimizer", optimizer, {"optimizer": "sgd-momentum" if optimizer == "sgd" else "adam"})
    if _pop(flags, "use-precision-aware-optimizer") == "true":
        r.read("--use-precision-aware-optimizer", "true", {}, "dtypes from --main-grads-dtype / --exp-avg-dtype")
        grads = _pop(flags, "main-grads-dtype")
        if grads:
            r.read("--main-grads-dtype", grads, {"grad_dtype": grads})
        for flag in ("exp-avg-dtype", "exp-avg-sq-dtype", "main-params-dtype"):
            value = _pop(flags, flag)
            if value and value != "fp32":
                r.read(f"--{flag}", value, {"optimizer_dtype": "bf16"})
    _gradient_buffer(flags, r)
    _loss_kernel(flags, r)
    overlap = _pop(flags, "overlap-grad-reduce") == "true"
    gather = flags.pop("overlap-param-gather", None)
    if gather is not None:
        r.no_effect("--overlap-param-gather", gather, "the parameter all-gather behind the next forward: timed with "
                    "the gradient reduction's overlap (param_sync_ahead)")
    if overlap:
        r.read("--overlap-grad-reduce", "true", {}, "gradient reduction overlaps the backward (dp_overlap as "
                                                   "calibrated)")
    else:
        r.assume("dp_overlap", 0, "no --overlap-grad-reduce: Megatron reduces gradients after the backward")
    if _pop(flags, "no-gradient-accumulation-fusion") == "true":
        r.read("--no-gradient-accumulation-fusion", "true", {"grad_accum_fusion": False})
    cp_comm = _pop(flags, "cp-comm-type")
    if cp_comm:
        if cp_comm in ("p2p", "allgather"):
            r.read("--cp-comm-type", cp_comm, {"cp_comm": "all-gather" if cp_comm == "allgather" else "p2p"})
        else:
            r.unsupported("--cp-comm-type", cp_comm, "only p2p and allgather are modelled; timed as p2p")
    dispatcher = _pop(flags, "moe-token-dispatcher-type")
    deepep = _pop(flags, "moe-enable-deepep") == "true"
    if dispatcher or deepep:
        kind = "deepep" if deepep or dispatcher == "flex" else "allgather" if dispatcher == "allgather" else "alltoall"
        r.read("--moe-token-dispatcher-type", dispatcher or "", {"moe_dispatcher": kind})
    if _pop(flags, "overlap-moe-expert-parallel-comm") == "true":
        r.read("--overlap-moe-expert-parallel-comm", "true", {"moe_a2a_overlap": True})
    flags.pop("delay-wgrad-compute", None)
    capacity = _pop(flags, "moe-expert-capacity-factor")
    if capacity:
        r.read("--moe-expert-capacity-factor", capacity, {"moe_capacity": capacity})
    if _pop(flags, "rampup-batch-size") is not None:
        r.no_effect("--rampup-batch-size", "", "the planner times the full global batch")


def _recompute_modules(modules: str | None, r: Reading) -> None:
    """--recompute-modules (a list; a NeMo YAML's as its text): the modules selective recompute re-runs; without it
    Megatron-LM's default, core_attn alone."""
    names = re.findall(r"[a-z_]+", modules or "")
    known = [m for m in names if m in RECOMPUTE_MODULES]
    if modules is None:
        r.assume("recompute_modules", "core_attn", "no --recompute-modules: Megatron-LM's default, the core attention")
        return
    r.read("--recompute-modules", modules, {"recompute_modules": ",".join(known)},
           f"recompute_modules = {', '.join(known) or 'none'}")
    if set(names) - set(known):
        r.unsupported("--recompute-modules", " ".join(sorted(set(names) - set(known))),
                      "modules the planner does not model (state-space and hyper-connection layers): not counted")


def _grouped_gemm(flags: dict[str, str], r: Reading, script_experts: bool) -> None:
    """--moe-grouped-gemm: Transformer Engine's grouped GEMM and its per-stream workspaces; without it a script whose
    model has experts (`script_experts`) runs Megatron-LM's default SequentialMLP (a NeMo recipe names a preset and
    keeps the planner's default, as its model configs set the flag)."""
    if _pop(flags, "moe-grouped-gemm") == "true":
        r.read("--moe-grouped-gemm", "true", {"grouped_gemm": True}, "Transformer Engine's grouped GEMM: its "
               "four cuBLAS workspaces counted")
    elif script_experts and not r.has("grouped_gemm"):
        r.assume("grouped_gemm", False, "no --moe-grouped-gemm: Megatron-LM's default SequentialMLP, no grouped "
                 "GEMM workspaces")


def _recompute(flags: dict[str, str], r: Reading) -> None:
    granularity = _pop(flags, "recompute-granularity")
    if _pop(flags, "recompute-activations") == "true":
        granularity = granularity or "selective"
    method, count = _pop(flags, "recompute-method"), _pop(flags, "recompute-num-layers")
    modules = _pop(flags, "recompute-modules")
    if granularity == "full":
        r.read("--recompute-granularity", "full", {"recompute": "full"}, "recompute = full")
        if method == "block" and count is not None and count.isdigit() and int(count) > 0:
            r.read("--recompute-method block --recompute-num-layers", count, {"recompute_layers": int(count)},
                   f"the first {count} layers of each stage (model chunk) recomputed, the others keep everything")
        elif count not in (None, "1") and method == "uniform":
            r.unsupported("--recompute-num-layers", count, f"uniform groups of {count} layers checkpointed whole "
                          "(one input kept per group, a group's activations rebuilt at once): counted as every "
                          "layer checkpointed")
    elif granularity == "selective":
        r.read("--recompute-granularity", "selective", {"recompute": "selective"})
        _recompute_modules(modules, r)
    else:
        r.assume("recompute", "none", "no --recompute-granularity (Megatron-LM's default: none)")
