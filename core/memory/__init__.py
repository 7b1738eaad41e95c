"""Bytes per GPU: model states under DP and ZeRO 1-3, offload, FSDP units, activations (Korthikanti et al.),
DeepSpeed's own estimator, whether a layout fits, and the sharded-Adam demonstration.

May import: core.params, core.model and the top-level basics (not pipeline: callers pass in-flight counts).
"""
