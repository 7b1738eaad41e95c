"""DeepSpeed's ZeRO with a Hugging Face Transformers model (the code most DeepSpeed runs train): how it stores model
states, what the model's layer keeps for its backward, its loss and its buffers.

Read at DeepSpeed v0.16.0 (e5570b10), config defaults unchanged at v0.19.5 (cf443004):
- model states (runtime/zero/stage_1_and_2.py, stage3.py, engine.py get_data_types): under bf16 with ZeRO the
  gradients are kept in the model's dtype (grad_accum_dtype = model_dtype), so bf16 parameters (2), bf16 gradients
  (2), and the fp32 master partition and Adam's moments (12) sharded stage by stage: the ZeRO paper's accounting.
  contiguous_gradients (default on) copies the gradients into reduce buckets of reduce_bucket_size = 5e8 elements
  in the model's dtype (buf_0, and buf_1 with overlap_comm, which defaults on for stage 3 only); the step casts this
  rank's gradient partition to fp32 (single_grad_partition: 4 bytes per parameter / d, transient).
- the layer: a Hugging Face LlamaDecoderLayer / GPT2Block as eager PyTorch ops (core.frameworks.pytorch.hf_block:
  torchtitan's tensors, with K and V at their own width).
- loss: the model returns bf16 logits, which the caller keeps in its outputs through the backward; the loss upcasts
  them to fp32 for the cross-entropy (transformers loss_utils ForCausalLMLoss: logits.float()).
"""

from __future__ import annotations

from core.frameworks import pytorch
from core.frameworks.capability import Framework
from core.frameworks.records import Accounting, Buffers, Loss, StateBytes

VERSION = "0.16.0"
MIB = float(1 << 20)
REDUCE_BUCKET = 5e8  # zero_optimization.reduce_bucket_size, elements

STATES = StateBytes(
    param=2.0, grad=2.0, master=4.0, sharded_from=(("params", 3), ("grads", 2), ("optimizer", 1)),
    source=f"DeepSpeed {VERSION} runtime/zero/stage_1_and_2.py (bit16_groups_flat, single_partition_of_fp32_groups) "
           "and stage3.py; engine.py get_data_types: gradients in the model's bf16 under ZeRO")

LOSS = Loss(held=6.0, peak=14.0,
            source="transformers loss_utils.ForCausalLMLoss: logits.float() then cross_entropy (log_softmax kept); "
                   "the bf16 logits stay in the model's outputs through the backward")

BUFFERS = Buffers(
    workspace=2 * 32 * MIB, bucket_elements=REDUCE_BUCKET,
    sources=(f"DeepSpeed {VERSION} runtime/zero/config.py: reduce_bucket_size 5e8 elements, contiguous_gradients "
             "true, overlap_comm true for stage 3 only; stage_1_and_2.py backward(): buf_0 (and buf_1 with "
             "overlap_comm) torch.empty(reduce_bucket_size, dtype=self.dtype)",
             "PyTorch CublasHandlePool.cpp: 32 MiB per (handle, stream) on sm90"))

ACCOUNTING = Accounting(
    key="deepspeed", label="DeepSpeed (ZeRO) with a Hugging Face model", version=VERSION, states=STATES,
    block=pytorch.hf_block, head=pytorch.eager_head, loss=LOSS, buffers=BUFFERS,
    selective="selective recompute is model code, not a DeepSpeed switch (counted as no recompute)")


# What it runs (core.frameworks.capability), at the release the planner's export is checked against
CAPABILITY_VERSION = "0.19.8"
_DS = f"DeepSpeed {CAPABILITY_VERSION}"

CAPABILITY = Framework(
    "deepspeed", "DeepSpeed", CAPABILITY_VERSION,
    home=__name__,
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
        "partial": f"{_DS}: PipelineModule(activation_checkpoint_interval=k) checkpoints groups of k layers, "
                   "every layer recomputed; no switch leaves some layers out",
        "hybrid": f"{_DS} deepspeed/runtime/config.py _REMOVED_ZERO_CONFIG_KEYS: 'MiCS ZeRO-3 sharding has been "
                  "removed' (mics_shard_size is rejected); ZeRO++'s zero_hpz_partition_size keeps a secondary "
                  "copy of the parameters only, the optimizer state stays sharded over all data-parallel ranks",
    }, moe_blocks=True)
