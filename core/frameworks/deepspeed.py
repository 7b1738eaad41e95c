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
