"""Cost pieces beyond t x p x d: MoE all-to-all, ring attention's exchange, FP8 peaks, active-parameter FLOPs.

Sources: DeepSeek-V3 Technical Report (arXiv:2412.19437): section 3.2.1 ("the communication overhead introduced
by cross-node expert parallelism results in an inefficient computation-to-communication ratio of approximately
1:1"), 3.2.2 (NVLink 160 GB/s, IB 50 GB/s, at most 4 nodes per token), 3.3 (FP8 dispatch, FP8 GEMMs); the GPU
datasheets in assets/gpus.json; Megatron-LM's context parallelism guide (K/V exchanged in a ring).
"""

import pytest

from core.cost import expert_comm, flops, precision_peak, ring_attention
from core.cost.collective import Fabric
from core.cost.step_input import Layouts
from core.model import counts, presets


def test_all_to_all_volume_per_layer():
    # One GPU, b s / (t cp) tokens x k copies x h values x bytes x (ep - 1) / ep per direction.
    one = expert_comm.direction_bytes(4096, 1, 7168, 8, t=1, cp=1, ep=64)
    assert float(one) == 4096 * 8 * 7168 * 2 * 63 / 64
    assert float(expert_comm.direction_bytes(4096, 1, 7168, 8, t=2, cp=4, ep=64)) == float(one) / 8
    assert float(expert_comm.direction_bytes(4096, 1, 7168, 8, ep=1)) == 0.0  # every expert local
    # A step: forward dispatch (FP8: half) + combine, two backward gradients; full recompute adds a forward.
    assert float(expert_comm.layer_bytes(4096, 1, 7168, 8, ep=64)) == 4 * float(one)
    assert float(expert_comm.layer_bytes(4096, 1, 7168, 8, ep=64, fp8_dispatch=True)) == 3.5 * float(one)
    assert float(expert_comm.layer_bytes(4096, 1, 7168, 8, ep=64, recompute="full")) == 6 * float(one)
    assert float(expert_comm.layer_bytes(4096, 1, 7168, 8, ep=64, capacity=1.25)) == 5 * float(one)


def test_which_link_the_all_to_all_crosses():
    assert float(expert_comm.network_share(8, 1, 8)) == 0.0           # EP 8 inside one 8-GPU server
    assert float(expert_comm.network_share(8, 2, 8)) == pytest.approx(4 / 7)  # etp 2: 4 members per server
    assert float(expert_comm.network_share(64, 1, 8)) == pytest.approx(56 / 63)  # DeepSeek: EP 64 over 8 nodes
    # DeepEP with node-limited routing: a token reaches 4 servers, crosses InfiniBand once per remote one
    # (3.5 expected remote servers of 4), so 3.5 of its 8 copies' bytes leave the server.
    assert float(expert_comm.network_share(64, 1, 8, top_k=8, reached=4)) == pytest.approx(3.5 / 8)


def test_deepseek_v3_cross_node_all_to_all_is_about_one_to_one_with_compute():
    # arXiv:2412.19437, 3.2.1: cross-node EP gives "a computation-to-communication ratio of approximately 1:1".
    # One MoE layer's forward on one GPU at its published layout (b = 1, s = 4096, no TP/CP, EP 64, FP8 GEMMs,
    # FP8 dispatch, node limit 4), with this project's assumptions (60 % of peak, 80 % of link rate).
    m, g = presets.model("deepseek-v3"), presets.gpu("h800-80gb")
    moe = m.moe
    active = (counts.attention_params(m, with_bias=False) + m.hidden * moe.experts
              + (moe.top_k + moe.shared) * counts.mlp_params(m.hidden, moe.expert_ffn, m.swiglu))
    forward_flops = 4096 * (2 * active + 4 * 4096 * counts.attention_core_width(m))
    compute = forward_flops / (precision_peak.effective_peak(m, g, fp8=True) * 0.6)
    one = expert_comm.direction_bytes(4096, 1, m.hidden, moe.top_k, ep=64)
    traffic = one * (0.5 + 1.0)  # FP8 dispatch + BF16 combine
    fabric = Fabric(g.intra_bytes_per_s * 0.8, g.inter_bytes_per_s * 0.8, 8)
    comm = expert_comm.layer_time(traffic, 64, 1, fabric, messages=2, top_k=moe.top_k, reached=4)
    assert 0.7 < float(comm / compute) < 1.5
    unlimited = expert_comm.layer_time(traffic, 64, 1, fabric, messages=2)
    assert float(unlimited / compute) > 2  # without node-limited routing the network dominates


def test_ring_attention_volume_and_what_attention_hides():
    # Llama 3 405B at 128K, t 8, c 16: 15 steps of a 4,194,304-byte K/V chunk (one 128-wide KV head per rank).
    chunk = 2 * 8192 * 128 * 2
    assert float(ring_attention.layer_bytes(131072, 1, 16384, 128, 8, 8, 16)) == 15 * chunk * 3
    assert float(ring_attention.layer_bytes(131072, 1, 16384, 128, 8, 8, 16, "full")) == 15 * chunk * 4
    assert float(ring_attention.layer_bytes(131072, 1, 16384, 128, 8, 8, 1)) == 0.0
    assert bool(ring_attention.crosses_node(8, 16, 8)) and not bool(ring_attention.crosses_node(1, 8, 8))
    # On the 50 GB/s network at 80 %: a chunk takes 105 us, its 8,192 x 8,192 block of attention 0.93 ms at
    # 60 % of the H100's 989 TFLOP/s: fully hidden.
    # Each send also pays one message latency (10 us here).
    net = Fabric(40e9, 40e9, 8, send_latency_s=10e-6)
    llama = presets.model("llama3-405b").with_seq(131072)
    total, exposed = ring_attention.layer_time(llama, Layouts(micro_batch_size=1, t=8, cp=16), net, 989e12 * 0.6)
    assert float(total) == pytest.approx(15 * 3 * (chunk / 40e9 + 10e-6))
    assert float(exposed) == 0.0
    # Short chunks cannot hide it: 4K tokens over c 16 (256 per rank), Llama 3 8B shapes, t 1.
    small = presets.model("llama3-8b").with_seq(4096)
    total, exposed = ring_attention.layer_time(small, Layouts(micro_batch_size=1, t=1, cp=16), net, 989e12 * 0.6)
    work = 4 * 256**2 * 4096 / (989e12 * 0.6)
    send = 2 * 256 * 8 * 128 * 2 / 40e9 + 10e-6
    assert float(exposed) == pytest.approx(15 * 3 * (send - work))


def test_fp8_peaks_from_the_datasheets():
    # Dense FP8 = half the sparse figure: H100/H200/H800 1,979, B200 4,500, MI300X 2,614.9; none on A100, V100.
    peaks = {k: presets.gpu(k).tflops_fp8 for k in presets.gpu_keys()}
    assert peaks["h100-80gb"] == peaks["h200-141gb"] == peaks["h800-80gb"] == 1979
    assert peaks["b200-180gb"] == 4500 and peaks["mi300x-192gb"] == 2614.9
    assert peaks["a100-80gb"] is None and peaks["v100-32gb"] is None
    m, h100 = presets.model("llama3-70b"), presets.gpu("h100-80gb")
    share = precision_peak.fp8_flop_share(m)
    assert 0.85 < share < 0.95  # linear layers; attention core and logits stay BF16
    blended = precision_peak.effective_peak(m, h100, fp8=True)
    assert blended == pytest.approx(1 / (share / 1979e12 + (1 - share) / 989e12))
    assert precision_peak.effective_peak(m, h100, fp8=False) == h100.peak_flops
    assert precision_peak.effective_peak(m, presets.gpu("a100-80gb"), fp8=True) == 312e12


def test_flops_use_active_parameters_not_total():
    # Mixtral: 6 x 12.9B active per token (plus attention), far below 6 x 46.7B.
    m = presets.model("mixtral-8x7b").with_seq(4096)
    per_token = float(flops.model_flops(m, 1)) / 4096
    active, total = counts.active_params(m), counts.model_params(m)
    attention = 3 * m.layers * 4 * 4096 * m.hidden / 2  # causal: the project's MFU counts half the s x s work
    embedding = m.vocab * m.hidden  # a lookup, no FLOPs; the output layer's 2 V h per token is counted
    norms = (2 * m.layers + 1) * m.hidden  # RMSNorm scales: no matmul
    assert per_token == pytest.approx(6 * (active - embedding - norms) + attention, rel=1e-12)
    assert per_token < 0.35 * 6 * total
