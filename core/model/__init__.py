"""What is trained and on what: model and GPU descriptions, their presets, parameter counts.

Owns ModelConfig / GpuSpec (validated against core.params.model), the preset objects built from the catalog in
assets/, and the parameter-count formulas. May import: core.params and the top-level basics.
"""
