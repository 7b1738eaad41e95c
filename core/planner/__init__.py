"""The t x p x d planner: layouts, enumeration and ranking of candidates, the recommendation in plain words, and
the configs for DeepSpeed, Megatron-LM and PyTorch FSDP2.

May import: every domain below it (params, model, pipeline, memory, cost) and the top-level basics.
"""
