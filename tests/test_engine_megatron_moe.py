"""The bytes Megatron-Core's MoE layer keeps for its backward are the ones core.frameworks.megatron lists for it.

Megatron-Core 0.14 (the release core.frameworks.megatron is read at) runs one MoE layer's forward on the CPU
(tests/engines/megatron_moe_worker.py); every storage autograd saves is counted once. Dropless routing sends exactly
top-k copies of every token, so the count does not depend on which experts the router picks. The count must equal
the accounting's MoE terms per token, plus two tensors per layer, not per token: the tokens-per-expert counts (one
int64 per expert) and the auxiliary loss (one fp32 scalar).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from core.frameworks import megatron
from core.frameworks.records import Arch
from core.memory import saved
from tests.engine_support import ENGINES, ROOT, need

CASES = {  # GPT-style experts (GeLU, unfused) as Megatron's CI MoE runs; DeepSeek-style (fused SwiGLU, shared)
    "gelu": dict(mlp="gelu", hidden=128, experts=8, top_k=2, expert_ffn=512, shared_ffn=0, tokens=64),
    "swiglu_shared": dict(mlp="swiglu", hidden=128, experts=16, top_k=6, expert_ffn=96, shared_ffn=192, tokens=64),
}


def _measured() -> dict[str, int]:
    need("megatron.core")
    path = os.pathsep.join(x for x in (str(ROOT), os.environ.get("PYTHONPATH", "")) if x)
    done = subprocess.run([sys.executable, str(ENGINES / "megatron_moe_worker.py"), json.dumps(CASES)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("moe kept bytes "))
    return json.loads(line.removeprefix("moe kept bytes "))


def _modelled(case: dict) -> float:
    arch = Arch(norm="rmsnorm", mlp=case["mlp"], dropout=False, flash=True, moe=True)
    w = saved.Widths(hidden=case["hidden"], q=case["hidden"], kv_heads=1, head_dim=1, ffn=case["expert_ffn"],
                     heads=4, routed=case["top_k"], expert_ffn=case["expert_ffn"], shared_ffn=case["shared_ffn"],
                     experts=case["experts"])
    coef = saved.coefficients(megatron.moe_layer(arch))
    return float(saved.layer_bytes(coef, w, case["tokens"], 1, 1, False, 1, "none"))


def test_megatron_core_moe_layer_keeps_what_the_accounting_lists():
    got = _measured()
    for name, case in CASES.items():
        per_layer = 8 * case["experts"] + 4  # tokens per expert (int64), the auxiliary loss (fp32)
        assert got[name] == _modelled(case) + per_layer, name


def test_the_allgather_dispatcher_keeps_the_same_bytes_per_routed_copy():
    # Megatron-Core's default dispatcher on two gloo ranks of one expert-parallel group: each rank gathers both
    # ranks' tokens and keeps the copies routed to its own experts, so over the group it keeps what alltoall keeps
    # for the same tokens (the gathered hidden states are not saved: index_select keeps its indices only). One rank
    # alone may keep more or less (its experts' share of the routing): the memory model counts the average.
    need("megatron.core")
    case = dict(CASES["gelu"], dispatcher="allgather", ep=2, tokens=128)
    path = os.pathsep.join(x for x in (str(ROOT), os.environ.get("PYTHONPATH", "")) if x)
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    runs = [subprocess.Popen([sys.executable, str(ENGINES / "megatron_moe_worker.py"), json.dumps({"ag": case}),
                              "--ranks", "2", str(port), str(rank)], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env) for rank in (0, 1)]
    kept = []
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err[-4000:]
        line = next(x for x in out.splitlines() if x.startswith("moe kept bytes "))
        kept.append(json.loads(line.removeprefix("moe kept bytes "))["ag"])
    per_layer = 8 * case["experts"] + 4
    assert sum(kept) / 2 == _modelled(case) + per_layer
    assert min(kept) < max(kept)  # the ranks' shares of the routing differ
