"""Config files engineers already have (Megatron-LM scripts, torchtitan TOML, DeepSpeed JSON, Hugging Face
config.json, NeMo YAML), read into planner inputs with an account of every field, and evaluated as a planner row
(`python -m core check`). Nothing in a file is executed.

May import: core.params, core.model, core.planner (the row) and the basics.
"""
