"""Time: training FLOPs, collective communication volume and time, and the step-time model of a layout.

May import: core.params, core.model, core.pipeline, core.memory and the top-level basics.
"""
