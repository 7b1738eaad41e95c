"""Megatron-Core's MoE layer, one forward on the CPU: the bytes autograd keeps for its backward, as JSON.

Run as its own process (tests/test_engine_megatron_moe.py): Megatron-Core asks for CUDA streams and events, which a
CPU build of PyTorch lacks, so they are replaced by stand-ins that do nothing; that would leak into other tests.
One gloo rank, Megatron's local layer spec (SequentialMLP: each expert an MLP weighed by its routing probabilities,
as TEGroupedMLP weighs its grouped GEMM's tokens), the alltoall dispatcher, the auxiliary-loss router; or, with
`--ranks N PORT RANK`, rank RANK of N gloo ranks of one expert-parallel group running a case's own dispatcher
(allgather: the group gathers every rank's tokens, each rank keeps its experts' share).
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys

import torch
import torch.distributed as dist

from tests.engines.saved_bytes import kept_bytes


class _Stream:
    """A CUDA stream or event that does nothing (the CPU runs every op in order)."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait_stream(self, *args) -> None:
        pass

    def record_event(self, *args):
        return _Stream()


def _cpu_only() -> None:
    torch.cuda.current_device = lambda: "cpu"
    torch.cuda.Stream = _Stream
    torch.cuda.stream = lambda *a, **k: contextlib.nullcontext()
    torch.cuda.current_stream = lambda *a, **k: _Stream()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def moe_kept_bytes(case: dict) -> int:
    """Bytes of every storage one MoE layer's forward keeps for its backward, parameters and the layer's input left
    out, each storage once."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.moe import moe_utils
    from megatron.core.transformer.spec_utils import build_module
    from megatron.core.transformer.transformer_config import TransformerConfig

    moe_utils.te_general_gemm = None  # left undefined when Transformer Engine does not import: the router's plain path
    gated = case["mlp"] == "swiglu"
    cfg = TransformerConfig(
        num_layers=1, hidden_size=case["hidden"], num_attention_heads=4, num_moe_experts=case["experts"],
        moe_router_topk=case["top_k"], moe_ffn_hidden_size=case["expert_ffn"], ffn_hidden_size=case["expert_ffn"],
        moe_shared_expert_intermediate_size=case["shared_ffn"] or None,
        moe_token_dispatcher_type=case.get("dispatcher", "alltoall"), expert_model_parallel_size=case.get("ep", 1),
        moe_grouped_gemm=False, moe_permute_fusion=False, moe_router_load_balancing_type="aux_loss",
        moe_aux_loss_coeff=1e-2, bf16=True, params_dtype=torch.bfloat16, gated_linear_unit=gated,
        activation_func=torch.nn.functional.silu if gated else torch.nn.functional.gelu,
        bias_activation_fusion=gated, add_bias_linear=False, use_cpu_initialization=True, hidden_dropout=0.0,
        attention_dropout=0.0)
    spec = get_gpt_layer_local_spec(num_experts=case["experts"], moe_grouped_gemm=False)
    torch.manual_seed(1234)  # the same weights on every rank and every run: the routing (and its imbalance) is fixed
    layer = build_module(spec.submodules.mlp, config=cfg).to(torch.bfloat16)
    torch.manual_seed(dist.get_rank())
    x = torch.randn(case["tokens"], 1, case["hidden"], dtype=torch.bfloat16, requires_grad=True)
    skip = {p.untyped_storage().data_ptr() for p in layer.parameters()} | {x.untyped_storage().data_ptr()}
    total, (out, _) = kept_bytes(torch, lambda: layer(x), skip)
    out.float().sum().backward()  # the graph was a real one
    return total


def main() -> None:
    _cpu_only()
    ranks, port, rank = (int(x) for x in sys.argv[3:6]) if sys.argv[2:3] == ["--ranks"] else (1, _port(), 0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks)
    from megatron.core import parallel_state

    parallel_state.initialize_model_parallel(1, 1, expert_model_parallel_size=ranks)
    cases = json.loads(sys.argv[1])
    print("moe kept bytes " + json.dumps({name: moe_kept_bytes(case) for name, case in cases.items()}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
