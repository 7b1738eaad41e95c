"""Inputs of the ZeRO page beyond core.params.memory's tables: the preset pickers, the display switches, the
custom model's shape, the activation inputs, FSDP wrapping and the sharded-Adam demonstration.

Two adjustments are derived from the core specs rather than written anew: a custom model starts from the ZeRO
paper's 7.5B model (assets/models.json), so switching the preset to "custom" keeps the numbers on screen
consistent; and the equivalence demo's ranges are narrowed so one run stays well under a second.
"""

from __future__ import annotations

from dataclasses import replace

from core.params import Spec, catalog, table
from core.params.memory import ACTIVATIONS, EQUIVALENCE, FSDP, MAX_PSI
from core.params.model import MODEL
from core.params.planner import PLAN

PAPER_MODEL_KEY = "zero-7.5b"  # the page opens on the ZeRO paper's 7.5B model ...
DEFAULT_GPU_KEY = "h100-80gb"  # ... on a named 80 GB GPU (the custom GPU's defaults are 80 GB too)
TABS = ("Table 1 and communication", "Activations", "DeepSpeed", "FSDP wrapping", "Equivalence")
UNITS = ("GB", "GiB")


def _paper_model() -> dict:
    return next(e for e in catalog.entries("models.json", "models") if e["key"] == PAPER_MODEL_KEY)


PAGE = table(
    Spec("model", "choice", PAPER_MODEL_KEY, choices=(*catalog.model_keys(), "custom"), label="Model",
         help="A published model sets Psi and the shape used for activations and FSDP units; custom lets you "
              "type them (it starts from the ZeRO paper's 7.5B model)."),
    Spec("gpu", "choice", DEFAULT_GPU_KEY, choices=(*catalog.gpu_keys(), "custom"), label="GPU",
         help="A datasheet GPU sets the memory, GPUs per node and the per-GPU network bandwidth; custom lets "
              "you type them."),
    Spec("act", "bool", False, label="Add activations and working buffers",
         help="Everything else a GPU holds while training, as the planner counts it (core.memory.per_gpu): the "
              "peak activations of the fullest pipeline device (Korthikanti et al. 2022), with the micro-batches in "
              "flight measured by the pipeline simulator, and ZeRO-3's gathered layers (one block and the next, "
              "prefetched). Off: model states only, the ZeRO paper's accounting."),
    Spec("unit", "choice", "GB", choices=UNITS, label="Unit",
         help="GB = 1e9 bytes (papers, vendors); GiB = 2^30 bytes (what DeepSpeed and nvidia-smi print)."),
    Spec("tab", "choice", TABS[0], choices=TABS, label="Section", help="The detail section on screen."),
)


def _paper_default(spec: Spec, key: str) -> Spec:
    return replace(spec, default=spec.parse(_paper_model()[key]))


# The custom model's shape, starting at the ZeRO paper's 7.5B model; the MoE inputs count when expert_params > 0.
CUSTOM = table(
    _paper_default(ACTIVATIONS["hidden"], "hidden"),
    _paper_default(ACTIVATIONS["heads"], "heads"),
    _paper_default(MODEL["kv_heads"], "kv_heads"),
    MODEL["head_dim"],
    _paper_default(ACTIVATIONS["layers"], "layers"),
    _paper_default(MODEL["ffn"], "ffn"),
    MODEL["mlp"],
    _paper_default(ACTIVATIONS["vocab"], "vocab"),
    _paper_default(MODEL["tied"], "tied"),
    ACTIVATIONS["flash"],
    MODEL["parallel"],
    MODEL["qk_norm"],
    FSDP["block_params"],
    MODEL["mtp_layers"],
    Spec("mtp_params", "int", 0, 0, MAX_PSI, label="Multi-token prediction parameters", unit="parameters",
         help="What the prediction depths hold outside routed experts (their layers' attention, norms, shared "
              "experts, router and 2h x h projections, core.model.counts.mtp_params), on the last stage with "
              "mtp_layers > 0; their routed experts are the MoE layers' size. The planner's links fill it in."),
)
MOE = table(*(MODEL[k] for k in ("experts", "top_k", "shared_experts", "expert_ffn", "dense_layers")))
MLA_KEYS = ("kv_lora_rank", "q_lora_rank", "qk_head_dim", "qk_rope_dim", "v_head_dim")
MLA = table(*(MODEL[k] for k in MLA_KEYS))  # multi-head latent attention: kv_lora_rank > 0 turns it on
SEQ = Spec("seq", "int", 0, 0, ACTIVATIONS["seq"].hi, label="Sequence length s", unit="tokens",
           help="0 = the model's own (a named model's; 2,048 for the custom model, the ZeRO paper's 7.5B); a number "
                "trains it at that length, as the planner's `seq` does.")
CUSTOM_SEQ = _paper_model()["seq"]
ACT = table(*(ACTIVATIONS[k] for k in ("mb", "sequence_parallel", "recompute", "schedule", "m", "v", "cp")), SEQ,
            PLAN["moe_capacity"], PLAN["cp_comm"], ACTIVATIONS["compile"], ACTIVATIONS["repeat_kv"],
            ACTIVATIONS["sac_attention"], ACTIVATIONS["loss"],
            PLAN["recompute_layers"], ACTIVATIONS["grouped_gemm"], ACTIVATIONS["tp_comm_overlap"],
            ACTIVATIONS["recompute_modules"])
WRAP = table(FSDP["min_params"], FSDP["prefetch"])
DEMO = table(
    replace(EQUIVALENCE["ranks"], hi=16),
    replace(EQUIVALENCE["steps"], hi=100),
    replace(EQUIVALENCE["size"], hi=1000),
    EQUIVALENCE["seed"],
    EQUIVALENCE["clip"],
)
