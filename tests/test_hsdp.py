"""Hybrid sharding (HSDP): ZeRO within d x cp / R ranks, R copies. Its model states are plain ZeRO's over the shard
group, its gradients cross the copies in one all-reduce per step, the frameworks that run it are named with their
source, and a checked config that uses it (torchtitan, Megatron-LM, DeepSpeed MiCS) reads back as the same row."""

import pytest

from core.configs.check import check
from core.cost import collective, dp_comm
from core.errors import InputError
from core.memory import per_gpu, states
from core.model import presets
from core.params.planner import PlannerParams
from core.planner import frameworks, recommend
from core.planner import plan as planner
from core.planner.layout import Layout

H100 = presets.gpu("h100-80gb")


def test_states_are_plain_zero_over_the_shard_group():
    # Llama 3 70B, t 8, d 32 in 4 copies: ZeRO-3 over 8 ranks, the ZeRO paper's 16 bytes / parameter / 8
    assert per_gpu.Layout(d=32, cp=1, replicate=4).shard_group() == 8
    assert per_gpu.Layout(d=16, cp=2, replicate=4).shard_group() == 8  # d x cp = 32 ranks
    q = dict(model="llama3-70b", gpus=256, batch=512, fix_t=8, fix_p=1, zero="3", mb_sizes=(1,), recompute="full",
             sp="on", reshard="on", tp_comm_overlap="off", memory_framework="textbook")
    hsdp = planner.plan(PlannerParams(**q, fix_replicate=4)).frame.iloc[0]
    plain = planner.plan(PlannerParams(**q)).frame.iloc[0]
    # the textbook's states: 16 / 8 bytes of each of the rank's parameters against 16 / 32 without copies
    assert states.model_states(1.0, 8, 3, **states.ADAM_MIXED.kwargs()).total == pytest.approx(2.0)
    assert hsdp["model_state_bytes"] / plain["model_state_bytes"] == pytest.approx(4.0, rel=1e-9)
    assert hsdp["activation_bytes"] == plain["activation_bytes"]


def test_the_copies_all_reduce_their_shard_once_per_step():
    # one layer's gradient shard: 1e9 parameters over 8 ranks and 10 layers, fp32: 50 MB all-reduced over 4 copies,
    # one per server: the ring moves 2 (R - 1) / R of it through each NIC, 75 MB at 50 GB/s = 1.5 ms per layer
    fabric = collective.Fabric(intra_bw=450e9, inter_bw=50e9, gpus_per_node=8, nccl_latency=0.0, net_hop_s=0.0)
    g = dp_comm.Group(n=8.0, per_node=1.0, params=1e9, param_bytes=2.0, grad_bytes=4.0)
    out = dp_comm.across_replicas(g, 4, 1.0, 10, 0.0, fabric)
    assert float(out.total) == pytest.approx(10 * 2 * 3 / 4 * 50e6 / 50e9, rel=0.15)  # NCCL may pick its tree
    assert float(out.exposed) == pytest.approx(float(out.total))  # no backward to hide behind
    hidden = dp_comm.across_replicas(g, 4, 1.0, 10, 1.0, fabric)  # a one-second backward: only the last layer's
    assert float(hidden.exposed) == pytest.approx(float(out.total) / 10)
    assert float(dp_comm.across_replicas(g, 1, 1.0, 10, 0.0, fabric).total) == 0.0


def test_who_runs_it_and_why_not():
    def setting(zero, r=4, p=1):
        return frameworks.Setting(t=1, p=p, zero=zero, schedule="1f1b", replicate=r)

    runs = {z: tuple(k for k, f in frameworks.TABLE.items() if not f.refusals(setting(z))) for z in (1, 2, 3)}
    assert runs == {1: ("megatron",), 2: ("torch",), 3: ("torch",)}
    why = frameworks.framework("deepspeed").refusals(setting(3))
    assert why and "MiCS ZeRO-3 sharding has been removed" in why[0]
    assert "--num-distributed-optimizer-instances" in frameworks.framework("megatron").refusals(setting(3))[0]


def test_a_replica_count_that_does_not_divide_is_infeasible_with_its_reason():
    r = planner.plan(PlannerParams(model="llama3-8b", gpus=24, batch=48, fix_t=1, fix_p=1, zero="3",
                                   fix_replicate=5, mb_sizes=(1,)))
    row = r.frame.iloc[0]
    assert not row["feasible"] and any("replicate = 5 does not divide d x cp = 24" in x for x in row["reasons"])
    with pytest.raises(InputError, match="needs ZeRO stage 1"):
        Layout(model=presets.model("llama3-8b"), gpu=H100, t=1, p=1, d=8, global_batch=8, zero_stage=0, replicate=2)


def test_an_hsdp_layout_is_evaluated_and_exported():
    q = PlannerParams(model="llama3-70b", gpus=256, batch=512, fix_t=8, fix_p=1, zero="3", fix_replicate=4,
                      mb_sizes=(1,), recompute="full", sp="on", reshard="on", tp_comm_overlap="off",
                      framework="torch")
    r = planner.plan(q)
    row = r.frame.iloc[0]
    assert row["feasible"] and row["replicate"] == 4 and row["frameworks"] == ("torch",)
    assert "ZeRO-3 within 8 ranks (4 copies: hybrid sharding)" in recommend.describe(row, 8)
    art = r.export("fsdp", row)
    assert not art.refused
    assert "mesh_dim_names=('pp', 'dp_replicate', 'dp_shard', 'tp')" in art.text
    assert "init_device_mesh(device_type, (1, 4, 8, 8)" in art.text
    assert 'dp_mesh = mesh["dp_replicate", "dp_shard"]' in art.text
    ds = r.export("deepspeed", row)  # DeepSpeed 0.19.8 has no hybrid sharding: its export refuses, saying why
    assert ds.refused and "MiCS ZeRO-3 sharding has been removed" in ds.refused[0]


TITAN = """[job]
description = "Llama 3 70B, HSDP"
[model]
name = "llama3"
flavor = "70B"
[training]
local_batch_size = 2
seq_len = 8192
[parallelism]
data_parallel_replicate_degree = 4
data_parallel_shard_degree = 8
tensor_parallel_degree = 8
"""


def test_torchtitans_replicate_degree_reads_as_hybrid_sharding():
    done = check([("llama3_70b_hsdp.toml", TITAN)], {"gpu": "h100-80gb"})
    row = done.row
    assert (row["t"], row["d"], row["replicate"], row["zero_stage"]) == (8, 32, 4, 3)
    entry = next(e for e in done.reading.entries if e.name == "parallelism.data_parallel_replicate_degree")
    assert entry.kind == "read" and "4 copies" in entry.meaning
    assert "replicate=4" in done.typed


def test_megatron_instances_and_deepspeed_mics_read_as_hybrid_sharding():
    cmd = ("torchrun --nproc-per-node 8 --nnodes 16 pretrain_gpt.py --tensor-model-parallel-size 8 "
           "--pipeline-model-parallel-size 2 --use-distributed-optimizer --num-distributed-optimizer-instances 4 "
           "--num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64 "
           "--group-query-attention --num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 "
           "--swiglu --untie-embeddings-and-output-weights --normalization RMSNorm --disable-bias-linear "
           "--micro-batch-size 1 --global-batch-size 256 --bf16 --vocab-size 128256")
    row = check([("train.sh", cmd)], {"gpu": "h100-80gb"}).row
    assert (row["t"], row["p"], row["d"], row["replicate"], row["zero_stage"]) == (8, 2, 8, 4, 1)
    assert row["frameworks"] == ("megatron",)
    ds = ('{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4, '
          '"bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "mics_shard_size": 4}}')
    done = check([("ds_config.json", ds)], {"gpu": "h100-80gb", "model": "llama3-8b"})
    assert (done.row["d"], done.row["replicate"]) == (16, 4)
    assert done.refusals() and "MiCS ZeRO-3 sharding has been removed" in done.refusals()[0]
