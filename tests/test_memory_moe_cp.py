"""Memory under context parallelism, expert parallelism and FP8.

Sources: Megatron-LM, docs/source/api-guide/context_parallel.rst ("CP partitions the network inputs and all
activations along sequence dimension ... The activation memory footprint per GPU is also CP times smaller";
"each GPU only stores the KV of a sequence chunk in forward"); Korthikanti et al. 2022 for the per-layer terms;
Megatron-LM's MoE parallel folding for the expert groups; DeepSeek-V3 Technical Report (arXiv:2412.19437)
sections 3.2 and 3.3 for its layout and FP8 storage.
"""

import itertools

import numpy as np
import pytest

from core.memory import activations as act
from core.memory import context_parallel, device_activations, experts, fp8, per_gpu
from core.model import presets
from core.units import GB


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("sp", [False, True])
def test_context_parallel_degree_divides_activation_memory(recompute, sp):
    # Megatron-LM: "The activation memory footprint per GPU is also CP times smaller" (ring buffers aside). CP runs
    # on fused attention, which stores no a s^2 scores: the baseline is the same layer without them ("none" at
    # c > 1 keeps what "selective" keeps).
    flash = "selective" if recompute == "none" else recompute
    for c, t, s in itertools.product((2, 4, 16), (1, 8), (8192, 131072)):
        base = act.stage_bytes(act.Shape(s, 1, 16384, 128, t, sp, flash, 128256), 8, 23.5)
        split = act.stage_bytes(act.Shape(s, 1, 16384, 128, t, sp, recompute, 128256, cp=c), 8, 23.5)
        for term in ("layers", "embedding", "output"):
            assert float(split[term]) == pytest.approx(float(base[term]) / c, rel=1e-12)
        # the layer rebuilt during the backward under recompute: also fused attention, also / c
        rebuilt = act.per_layer_bytes(s, 1, 16384, 128, t, sp, "selective") - act.per_layer_bytes(s, 1, 16384, 128,
                                                                                                   t, sp, flash)
        assert float(split["recompute_buffer"]) == pytest.approx(float(rebuilt) / c, rel=1e-12)


def test_llama3_128k_at_cp16_holds_what_8k_holds_without_cp():
    # Llama 3 405B: 131,072 tokens over CP 16 = 8,192 tokens per GPU, the pre-training shape (arXiv:2407.21783,
    # Table 4). Without the s^2 scores (selective or full recompute) the per-layer bytes are the same.
    for mode in ("selective", "full"):
        long = act.per_layer_bytes(131072, 1, 16384, 128, 8, True, mode, cp=16)
        short = act.per_layer_bytes(8192, 1, 16384, 128, 8, True, mode)
        assert float(long) == float(short)
    # No a s^2 scores under CP (fused attention): "none" keeps what "selective" keeps; without CP they are stored.
    assert float(act.per_layer_bytes(131072, 1, 16384, 128, 8, True, "none", cp=16)) == float(
        act.per_layer_bytes(131072, 1, 16384, 128, 8, True, "selective", cp=16))
    extra = act.per_layer_bytes(8192, 1, 16384, 128, 8, True, "none") - act.per_layer_bytes(
        8192, 1, 16384, 128, 8, True, "selective")
    assert float(extra) == 5 * 128 * 8192 * 8192 / 8


def test_ring_attention_buffers_are_four_kv_chunks():
    # Llama 3 405B, t = 8, c = 16: 8 KV heads / 8 = one 128-wide head per rank, 8,192 tokens, BF16.
    chunk = 2 * 8192 * 1 * 128 * 2
    assert float(context_parallel.kv_chunk_bytes(131072, 1, 16384, 128, 8, 8, 16)) == chunk == 4_194_304
    assert float(context_parallel.ring_buffer_bytes(131072, 1, 16384, 128, 8, 8, 16)) == 4 * chunk
    assert float(context_parallel.ring_buffer_bytes(131072, 1, 16384, 128, 8, 8, 1)) == 0.0


def test_the_all_gather_exchange_holds_the_whole_sequences_kv_and_its_gradients():
    # Megatron-LM --cp-comm-type all_gather / Llama 3: the backward holds the gathered K and V of all 16 ranks and the
    # full-sequence dK and dV before reduce-scattering them: 2 x 16 chunks, 128 MiB against the ring's 16 MiB.
    chunk = 4_194_304
    got = context_parallel.ring_buffer_bytes(131072, 1, 16384, 128, 8, 8, 16, cp_comm="all-gather")
    assert float(got) == 2 * 16 * chunk == 128 * 2**20
    assert float(context_parallel.ring_buffer_bytes(131072, 1, 16384, 128, 8, 8, 1, cp_comm="all-gather")) == 0.0
    import dataclasses

    from core.memory import per_gpu
    from core.model import presets
    mm = dataclasses.replace(per_gpu.ModelMemory.of(presets.model("llama3-405b")), seq=131072)
    ring, gathered = (device_activations.end_stages(per_gpu.MemoryConfig(
        mm, per_gpu.Layout(t=8, p=16, cp=16), per_gpu.Training(sequence_parallel=True, cp_comm=comm),
        per_gpu.InFlight(16.0, 1.0))) for comm in ("p2p", "all-gather"))
    assert float(gathered.peak - ring.peak) == pytest.approx((32 - 4) * chunk)  # one layer's buffers, once


def test_fp8_activations_save_seven_of_34_sbh():
    s, b, h, a = 2048, 1, 12288, 96
    sel = act.per_layer_bytes(s, b, h, a, 1, False, "selective")
    sel8 = act.per_layer_bytes(s, b, h, a, 1, False, "selective", fp8=True)
    assert float(sel) == 34 * s * b * h and float(sel8) == 27 * s * b * h
    t8 = act.per_layer_bytes(s, b, h, a, 8, False, "selective", fp8=True)
    assert float(t8) == (8 + 19 / 8) * s * b * h
    full = act.per_layer_bytes(s, b, h, a, 8, True, "full", fp8=True)
    assert float(full) == 2 * s * b * h / 8  # the kept layer input stays BF16


def test_fp8_byte_counts_leave_master_weights_and_adam_alone():
    # A GEMM weight: 1 (FP8) + 2 (BF16 gradient) + 12 (FP32 master + two FP32 moments) = 15 bytes, not 16.
    m = presets.model("mixtral-8x7b")
    assert fp8.param_bytes(m, True, experts=True) == 1.0 and fp8.param_bytes(m, False) == 2.0
    share = fp8.gemm_share(m)  # attention projections of the dense part; the rest is embeddings, router, norms
    assert 0.8 < share < 0.9
    assert fp8.param_bytes(m, True) == pytest.approx(share + 2 * (1 - share))
    st = experts.sharded_states(1e9, 1, 0, param_bytes=fp8.param_bytes(m, True, experts=True))
    assert float(st.total) == 15e9


def test_deepseek_v3_expert_states_at_its_published_layout():
    # PP 16, EP 64, no TP, ZeRO-1 over DP 128 (arXiv:2412.19437, section 3.2): 61 layers over 16 stages is 4 per
    # stage, 4 of them MoE on the fullest; 256 / 64 = 4 experts per GPU; expert-dp = 128 / 64 = 2.
    m = presets.model("deepseek-v3")
    n_moe = experts.moe_layers_on_stage(m, 16)
    per_layer = experts.expert_params_per_layer(m)
    assert n_moe == 4 and experts.experts_per_gpu(m, 64) == 4
    assert float(experts.expert_data_parallel(1, 128, 1, 64, 1)) == 2
    got = per_gpu.model_state_parts(per_gpu.MemoryConfig(per_gpu.ModelMemory.of(m), per_gpu.Layout(
        t=1, p=16, d=128, ep=64, etp=1, zero=1)))
    expert_rank = 4 * per_layer / 64
    assert expert_rank / 1e6 == pytest.approx(704.6, abs=0.1) and float(got.expert_rank) == pytest.approx(expert_rank)
    assert float(got.expert_group) == 2
    assert float(got.expert_states) == pytest.approx(expert_rank * (2 + 2 + 12 / 2))
    assert float(got.states - got.expert_states) == pytest.approx(float(got.psi_rank) * (2 + 2 + 12 / 128))
    assert float(got.expert_states) / GB == pytest.approx(7.05, abs=0.01)


def test_expert_tensor_parallel_and_zero_stages_shard_the_expert_group():
    # etp = t = 8, ep = 4, d = 8, cp = 2: expert-dp = 8 x 8 x 2 / 32 = 4 ranks; ZeRO-3 divides all three.
    model = per_gpu.ModelMemory(dense_params=1e9, layers=8, hidden=4096, heads=32, seq=4096, expert_params=32e9,
                                moe_layers=8)
    got = per_gpu.model_state_parts(per_gpu.MemoryConfig(model, per_gpu.Layout(t=8, p=1, d=8, cp=2, ep=4, etp=8,
                                                                                zero=3)))
    assert float(got.expert_group) == 4 and float(got.expert_rank) == pytest.approx(32e9 / 32)
    assert float(got.expert_states) == pytest.approx(32e9 / 32 * 16 / 4)
    assert float(got.states - got.expert_states) == pytest.approx(1e9 / 8 * 16 / 16)
    assert float(experts.expert_data_parallel(8, 8, 2, 4, 1)) == 32


def test_moe_layers_keep_more_activations_than_the_dense_formula():
    # Mixtral: top-2 of experts 3.5 h wide: 2 (2 + 14) = 32 s b h instead of the dense MLP's 16.
    m = presets.model("mixtral-8x7b")
    sbh = m.seq * m.hidden
    assert float(experts.moe_extra_bytes(m, 1)) == 16 * sbh
    assert float(experts.moe_extra_bytes(m, 1, t=2, cp=4)) == 16 * sbh / 8
    assert float(experts.moe_extra_bytes(m, 1, recompute="full")) == 0.0
    # FP8: 2 (1 + 10.5) = 23 instead of 12.
    assert float(experts.moe_extra_bytes(m, 1, fp8=True)) == 11 * sbh
    assert float(experts.moe_extra_bytes(m, 1, capacity=1.25)) == (2.5 * 16 - 16) * sbh
    dense = presets.model("llama3-8b")
    assert np.all(experts.moe_extra_bytes(dense, np.array([1, 2])) == 0)
