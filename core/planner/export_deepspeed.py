"""A layout as a DeepSpeed config (JSON) plus the lines of code that give DeepSpeed what JSON cannot: the pipeline
and tensor-parallel degrees, which its PipelineModule and topology take from the model code.

Every key is one DeepSpeed's own config class accepts (tests/engines load each export into
deepspeed.runtime.config.DeepSpeedConfig with the row's data-parallel size), and a layout DeepSpeed's engines
refuse (ZeRO-2/3 with its pipeline engine, a schedule other than its 1F1B) is never written (core.planner.frameworks).
"""

from __future__ import annotations

import json

from core.planner import export_switches
from core.planner.export_base import Export, refusal
from core.planner.layout import Layout

BUCKET = 500_000_000  # DeepSpeed's documented default bucket size (elements), written out explicitly


def deepspeed_config(layout: Layout) -> tuple[dict, list[str]]:
    """DeepSpeed config dict (batch, precision, ZeRO, offload, recompute, AutoTP) and notes."""
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
    if layout.t > 1 and layout.p == 1:
        cfg["tensor_parallel"] = {"autotp_size": layout.t}
    if layout.recompute == "full":
        cfg["activation_checkpointing"] = {"partition_activations": layout.t > 1, "cpu_checkpointing": False,
                                           "contiguous_memory_optimization": False,
                                           "synchronize_checkpoint_boundary": False}
        if layout.p > 1:
            cfg["pipeline"] = {"activation_checkpoint_interval": 1}

    notes = [
        f"train_batch_size {layout.global_batch} = micro-batch {layout.micro_batch_size} x accumulation "
        f"{layout.grad_accum_steps} x data-parallel {layout.d}; DeepSpeed checks it against its data-parallel size "
        f"(world size {layout.n_gpus} / model-parallel size {layout.t * layout.p}).",
    ]
    if layout.t > 1 and layout.p == 1:
        notes.append(f"tensor_parallel.autotp_size {layout.t}: DeepSpeed's AutoTP shards the model's linear layers "
                     "over t ranks (Hugging Face-style models; deepspeed.initialize does it).")
    if layout.recompute == "full":
        notes.append("Full recompute: " + ("pipeline.activation_checkpoint_interval 1 makes the pipeline engine "
                                           "checkpoint every layer." if layout.p > 1 else
                                           "wrap each layer's forward in deepspeed.checkpointing.checkpoint (the "
                                           "activation_checkpointing section configures it)."))
    if layout.offload == "optimizer+params":
        notes.append("offload_param is valid with ZeRO stage 3 only (DeepSpeed docs).")
    if layout.model.is_moe or layout.model.mla is not None:
        notes.append(f"{layout.model.name}'s mixture-of-experts / latent-attention blocks are your model code (e.g. "
                     "deepspeed.moe.layer.MoE with ep_size=1: every GPU holds all experts); the JSON config does "
                     "not describe the model. Expert parallelism (ep > 1), context parallelism and FP8 are not "
                     "expressible in it: rank with framework megatron for those.")
    return cfg, notes + export_switches.script_notes(layout, "deepspeed")


def deepspeed_setup(layout: Layout) -> tuple[str, list[str]]:
    """Python that hands DeepSpeed the pipeline and tensor-parallel degrees (empty when the JSON says it all)."""
    t, p, d = layout.t, layout.p, layout.d
    if p == 1:
        return "", []
    lines = [
        f"# DeepSpeed takes p = {p} (and t = {t}) from code: a PipelineModule over a pipe x data x model topology.",
        "import deepspeed",
        "from deepspeed.pipe import PipelineModule",
        "from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology",
        "",
        f"topology = PipeModelDataParallelTopology(num_pp={p}, num_mp={t}, num_dp={d})",
        "model = PipelineModule(layers=layer_specs, topology=topology, loss_fn=loss_fn, partition_method=\"uniform\")",
        'engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), '
        'config="ds_config.json")',
        "loss = engine.train_batch(data_iter)  # one step: the JSON's gradient_accumulation_steps micro-batches, 1F1B",
    ]
    notes = ["layer_specs (your model as a list of LayerSpec / layers), loss_fn and data_iter are your training "
             "code's; the engine runs DeepSpeed's 1F1B TrainSchedule."]
    if t > 1:
        notes.append(f"num_mp = {t}: each stage's layers must be tensor-parallel themselves (as in Megatron-DeepSpeed, "
                     "which BLOOM-176B and MT-NLG 530B trained with); DeepSpeed gives them the model-parallel group.")
    return "\n".join(lines) + "\n", notes


def deepspeed_export(layout: Layout) -> Export:
    refused = refusal(layout, "deepspeed")
    if refused:
        return refused
    cfg, notes = deepspeed_config(layout)
    setup, more = deepspeed_setup(layout)
    return Export(json.dumps(cfg, indent=2), tuple(notes + more), setup=setup)
