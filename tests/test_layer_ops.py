"""The per-operation time model (core.cost.gemm, core.cost.layer_ops) against hand counts.

With an idealised GPU (one SM, 1 x 1 tiles, efficiency 1, unbounded bandwidth) every GEMM takes exactly its FLOPs /
peak, so the phases must carry the textbook FLOPs: forward 2 x tokens x the layer's weights / t (Narayanan et al.
2021), input- and weight-gradient each the same again, the attention core 4 b s^2 h / t; full recompute re-runs
the whole forward and selective recompute only the attention core (Korthikanti et al. 2022). Collectives move
Megatron-LM's volumes: two all-reduces of b s h forward, two backward; sequence parallelism swaps each for a
reduce-scatter + all-gather pair and re-gathers the sharded inputs in the backward.
"""

import dataclasses

import numpy as np
import pytest

from core.cost import calibration, gemm, layer_ops
from core.cost.collective import Fabric
from core.cost.rates import Rates
from core.cost.step_input import Layouts
from core.model import presets
from core.model.counts import layer_matmul_params

A100 = presets.gpu("a100-80gb")
GPT3 = presets.model("gpt3-175b")
LLAMA = presets.model("llama3-70b")
PEAK = 1e15


def times_of(model, r, b, t, sp, recompute, bw, latency, **more):
    """layer_times on a server of 8 with `bw` on every link; latency 0 = bandwidth terms only (textbook volumes),
    else NCCL's latencies (core.cost.collective) and `latency` per message."""
    fabric = Fabric(bw, bw, 8, latency, latency, nccl_latency=1.0 if latency else 0.0)
    return layer_ops.layer_times(model, r, Layouts(micro_batch_size=b, t=t, sp=sp, recompute=recompute, **more), fabric)


def ideal(**change) -> Rates:
    r = Rates(peak=PEAK, linear_peak=PEAK, bandwidth=1e30, sms=1, gemm_eff=1.0, mem_eff=1.0, gemm_k0=0.0,
              tile_m=1, tile_n=1, flash_eff=1.0, flash_causal_share=0.5)
    return dataclasses.replace(r, **change)


def test_a_large_gemm_runs_at_the_calibrated_fraction_with_its_wave_quantisation():
    r = Rates.of(A100)
    tiles = (8192 // r.tile_m) * (8192 // r.tile_n)
    filled = tiles / (np.ceil(tiles / r.sms) * r.sms)
    expected = 2 * 8192 ** 3 / (312e12 * r.gemm_eff * filled * 8192 / (8192 + r.gemm_k0))
    assert float(gemm.gemm_time(r, 8192, 8192, 8192)) == pytest.approx(expected, rel=1e-12)


def test_one_row_more_than_the_sms_hold_costs_a_whole_second_wave():
    # 12 x 9 tiles of 256 x 128 fill the A100's 108 SMs exactly; one more row of the output needs 13 x 9 tiles,
    # a second wave that is almost empty: the time doubles (k = 8192 keeps the GEMM compute-bound).
    r = Rates.of(A100)
    assert (12 * 9, r.tile_m, r.tile_n) == (r.sms, 256, 128)
    full = gemm.gemm_time(r, 12 * 256, 9 * 128, 8192)
    spill = gemm.gemm_time(r, 12 * 256 + 1, 9 * 128, 8192)
    assert float(spill / full) == pytest.approx(2.0, rel=1e-3)


def test_attention_score_products_are_memory_bound_on_an_a100():
    # s = 2048, head size 96 (GPT-3): 2 s^2 x 96 FLOPs against 2 s^2 bytes written, below the A100's ridge of
    # 312e12 / 2.039e12 = 153 FLOP per byte: the roofline's memory side sets the time.
    r = Rates.of(A100)
    moved = 32 * 2 * (2 * 2048 * 96 + 2048 * 2048)
    assert float(gemm.gemm_time(r, 2048, 2048, 96, batch=32)) == pytest.approx(moved / (2.039e12 * r.mem_eff))


def test_stream_time_is_bytes_over_achieved_bandwidth():
    r = Rates.of(A100)
    assert float(gemm.stream_time(r, 1e9)) == pytest.approx(1e9 / (2.039e12 * r.mem_eff))


@pytest.mark.parametrize("model", [GPT3, LLAMA])
@pytest.mark.parametrize("t", [1, 8])
def test_phases_carry_the_textbook_flops(model, t):
    b = 2
    times = times_of(model, ideal(), b, t, False, "none", 1e30, 0.0)
    tokens = b * model.seq
    weights = layer_matmul_params(model.hidden, model.heads, model.kv_heads, model.ffn, model.swiglu)
    if model.kv_heads < t:  # replicated key/value heads: each rank computes its own copy
        pytest.skip("kv heads replicated")
    assert float(times["F"]["gemm"]) * PEAK == pytest.approx(2 * tokens * weights / t, rel=1e-9)
    assert float(times["B"]["gemm"]) == pytest.approx(float(times["F"]["gemm"]), rel=1e-9)
    assert float(times["W"]["gemm"]) == pytest.approx(float(times["F"]["gemm"]), rel=1e-9)
    if not model.flash_attention:
        core = 4 * b * model.seq ** 2 * model.hidden / t
        assert float(times["F"]["attention"]) * PEAK == pytest.approx(core, rel=1e-9)
        assert float(times["B"]["attention"]) * PEAK == pytest.approx(2 * core, rel=1e-9)


def test_flash_attention_does_causal_blocks_only_and_recomputes_in_its_backward():
    times = times_of(LLAMA, ideal(), 1, 8, True, "none", 1e30, 0.0)
    core = 4 * LLAMA.seq ** 2 * LLAMA.hidden / 8 * 0.5
    assert float(times["F"]["attention"]) * PEAK == pytest.approx(core)
    assert float(times["B"]["attention"]) * PEAK == pytest.approx(2.5 * core)


def test_recompute_reruns_exactly_what_it_dropped():
    r = Rates.of(A100)
    args = (GPT3, r, 1, 8, False)
    none, selective, full = (times_of(*args, mode, 240e9, 1e-5) for mode in ("none", "selective", "full"))
    assert all(float(none["R"][c]) == 0.0 for c in layer_ops.COMPONENTS)
    assert float(selective["R"]["attention"]) == float(selective["F"]["attention"])
    assert float(selective["R"]["gemm"]) == 0.0 and float(selective["R"]["tp"]) == 0.0
    for c in layer_ops.COMPONENTS:
        assert float(full["R"][c]) == float(full["F"][c])


def test_tensor_parallel_volumes_with_and_without_sequence_parallelism():
    r, bw, t, b = ideal(), 100e9, 8, 2
    act = 2 * b * GPT3.seq * GPT3.hidden  # one s x b x h activation in 16 bits
    ring = (t - 1) / t * act / bw
    plain = times_of(GPT3, r, b, t, False, "full", bw, 0.0)
    sp = times_of(GPT3, r, b, t, True, "full", bw, 0.0)
    assert float(plain["F"]["tp"]) == pytest.approx(2 * 2 * ring)  # two all-reduces
    assert float(sp["F"]["tp"]) == pytest.approx(4 * ring)  # two reduce-scatters + two all-gathers: the same
    assert float(plain["B"]["tp"]) == pytest.approx(2 * 2 * ring)
    assert float(sp["B"]["tp"]) == pytest.approx(6 * ring)  # + re-gathering the two sharded inputs
    assert float(plain["R"]["tp"]) == float(plain["F"]["tp"])  # full recompute repeats the forward's traffic
    alone = times_of(GPT3, r, b, 1, False, "none", bw, 1e-5)
    assert all(float(alone[ph]["tp"]) == 0.0 for ph in layer_ops.PHASES)


def test_megatron_hides_backward_tp_behind_gemms_but_never_more_than_it_sends():
    r = Rates.of(A100)
    for sp in (False, True):
        for bw in (1e9, 240e9, 1e13):
            times = times_of(GPT3, r, 1, 8, sp, "none", bw, 1e-5)
            hidden = float(times["hidden"]["tp"])
            assert 0.0 <= hidden <= float(times["B"]["tp"])
    # On a slow link each column-parallel layer's all-reduce outlasts its weight-gradient GEMM, which it hides fully.
    slow = times_of(GPT3, r, 1, 8, False, "none", 1e9, 1e-5)
    h, tokens = GPT3.hidden, GPT3.seq
    wgrads = [gemm.gemm_time(r, h, n, tokens, c_bytes=4.0, accumulate=True) for n in (3 * h / 8, GPT3.ffn / 8)]
    assert float(slow["hidden"]["tp"]) == pytest.approx(float(sum(wgrads)))


def test_memory_bound_bytes_per_element():
    # GPT block with dropout, no SP: forward 22 bytes per b s h element + 4 per b s ffn / t; backward 34 and 6.
    r = ideal(bandwidth=1e12)
    b, t = 1, 4
    times = times_of(GPT3, r, b, t, False, "none", 1e30, 0.0)
    e_h, e_f = b * GPT3.seq * GPT3.hidden, b * GPT3.seq * GPT3.ffn / t
    assert float(times["F"]["memory"]) == pytest.approx((22 * e_h + 4 * e_f) / 1e12)
    assert float(times["B"]["memory"]) == pytest.approx((34 * e_h + 6 * e_f) / 1e12)


def test_fitted_values_are_restored_after_a_trial():
    before = Rates.of(A100)
    with calibration.trial("a100-16bit", gemm_eff=0.5):
        assert Rates.of(A100).gemm_eff == 0.5
    assert Rates.of(A100) == before
    with pytest.raises(KeyError):
        with calibration.trial("a100-16bit", tile_m=64):
            pass


def test_moe_layers_run_top_k_experts_per_token_and_cp_splits_every_sequence():
    # An ideal GPU: a MoE model's average layer does the active weights' FLOPs (core.model.counts), whatever ep and
    # expert TP spread them over; context parallelism divides a rank's tokens (and its queries) by cp.
    from core.model.counts import attention_core_width, matmul_params_per_layer

    v3 = presets.model("deepseek-v3")
    b, t, cp = 1, 1, 1
    for ep, etp in ((1, 1), (64, 1), (8, 1)):
        times = times_of(v3, ideal(), b, t, False, "none", 1e30, 0.0, ep=ep, etp=etp)
        tokens = b * v3.seq
        router = 2 * tokens * v3.hidden * v3.moe.experts * (v3.moe_layers / v3.layers)
        linear = 2 * tokens * matmul_params_per_layer(v3)
        # (to 1e-4: core.model.counts also counts MLA's two latent norms among the attention weights)
        assert float(times["F"]["gemm"]) * PEAK == pytest.approx(linear, rel=1e-4)
        assert float(times["B"]["gemm"]) * PEAK == pytest.approx(linear, rel=1e-4)
        assert router < 0.01 * linear
    for cp in (2, 8):
        split = times_of(GPT3, ideal(), 1, 8, True, "none", 1e30, 0.0, cp=cp)
        whole = times_of(GPT3, ideal(), 1, 8, True, "none", 1e30, 0.0)
        assert float(split["F"]["gemm"]) == pytest.approx(float(whole["F"]["gemm"]) / cp)
        assert float(split["F"]["attention"]) == pytest.approx(float(whole["F"]["attention"]) / cp)
    assert attention_core_width(GPT3) == GPT3.hidden


def test_fp8_runs_the_linear_layers_at_the_fp8_peak_and_attention_at_16_bits():
    h100 = presets.gpu("h100-80gb")
    bf16, fp8 = Rates.of(h100), Rates.of(h100, fp8=True)
    assert (bf16.linear_peak, fp8.linear_peak, fp8.peak) == (989e12, 1979e12, 989e12)
    slow = times_of(LLAMA, bf16, 1, 8, True, "none", 450e9, 1e-5)
    fast = times_of(LLAMA, fp8, 1, 8, True, "none", 450e9, 1e-5)
    assert float(fast["F"]["gemm"]) < 0.6 * float(slow["F"]["gemm"])
    assert float(fast["F"]["attention"]) == float(slow["F"]["attention"])
    assert Rates.of(A100, fp8=True).linear_peak == 312e12  # no FP8 tensor cores: 16-bit peak


def test_a_parallel_block_exchanges_once_per_direction_and_keeps_fewer_activations():
    # GPT-J / GPT-NeoX / PaLM: attention and MLP read one normed input and add their outputs before one all-reduce
    # (forward), and their input gradients sum before one all-reduce (backward): half the TP collectives, the same
    # GEMM FLOPs; one norm and one residual add of three tensors in the memory-bound work; activations 34 -> 29 s b h.
    from core.memory import activations

    seq_block = dataclasses.replace(GPT3, name="seq")
    par_block = dataclasses.replace(GPT3, name="par", parallel_block=True)
    r = ideal(bandwidth=1e12)
    bw = 1e11
    a = times_of(seq_block, r, 1, 8, False, "none", bw, 0.0)
    b = times_of(par_block, r, 1, 8, False, "none", bw, 0.0)
    assert float(b["F"]["tp"]) == pytest.approx(float(a["F"]["tp"]) / 2)
    assert float(b["B"]["tp"]) == pytest.approx(float(a["B"]["tp"]) / 2)
    assert float(b["F"]["gemm"]) == pytest.approx(float(a["F"]["gemm"]))
    assert float(b["F"]["memory"]) < float(a["F"]["memory"])
    s, h = GPT3.seq, GPT3.hidden
    full = activations.per_layer_bytes(s, 1, h, GPT3.heads, 1, recompute="selective")
    assert float(full) == pytest.approx(34 * s * h)
    assert float(activations.Shape(s, 1, h, GPT3.heads, 1, recompute="selective", parallel=True).per_layer()) == \
        pytest.approx(29 * s * h)


def test_selective_recompute_re_runs_the_forward_of_its_modules():
    # --recompute-modules: mlp re-runs a dense layer's MLP forward (its GEMMs and element-wise work) besides the
    # attention core; without core_attn the attention is not re-run; layernorm (fused in a dense layer) adds nothing
    r = ideal()
    fabric = Fabric(1e12, 1e12, 8, 0.0, 0.0, nccl_latency=0.0)
    lay = Layouts(micro_batch_size=1, t=8, sp=True, recompute="selective")
    plain = layer_ops.layer_times(LLAMA, r, lay, fabric)  # the default modules: core_attn (mla_up_proj: MLA only)
    mlp = layer_ops.layer_times(LLAMA, r, lay, fabric, modules=("core_attn", "mlp"))
    bare = layer_ops.layer_times(LLAMA, r, lay, fabric, modules=("layernorm",))
    assert float(plain["R"]["attention"]) == float(plain["F"]["attention"]) > 0
    assert float(plain["R"]["gemm"]) == float(plain["R"]["memory"]) == 0.0
    assert float(bare["R"]["attention"]) == float(bare["R"]["gemm"]) == float(bare["R"]["memory"]) == 0.0
    again = float(mlp["R"]["gemm"]) + float(mlp["R"]["memory"])
    assert again == pytest.approx(float(mlp["mlp"]["F"]), rel=1e-12) and again > 0
    assert float(mlp["R"]["attention"]) == float(plain["R"]["attention"])


def test_torchtitans_per_op_recompute_reruns_every_other_matmul_and_no_attention_core():
    """SelectiveAC saves the attention kernel and the odd matmuls in forward order (wq/wqkv, w1, w2), so the backward
    re-runs the output projection, w3 (half of the gate-and-up GEMM) and the forward's memory-bound ops; on an ideal
    GPU that is 2 tokens x (h x h + h x ffn) / t FLOPs. The planner times it for rows counted as PyTorch's."""
    r, b, t, s = ideal(), 1, 2, LLAMA.seq
    megatron = times_of(LLAMA, r, b, t, True, "selective", 1e30, 0.0)
    plain = layer_ops.layer_times(LLAMA, r, Layouts(micro_batch_size=b, t=t, sp=True, recompute="selective"),
                                  Fabric(1e30, 1e30, 8, 0.0, 0.0, nccl_latency=0.0), modules=(layer_ops.PER_OP,))
    h, f = LLAMA.hidden, LLAMA.ffn
    assert float(plain["R"]["gemm"]) == pytest.approx(2 * b * s * (h * h + h * f) / t / PEAK, rel=1e-9)
    assert float(plain["R"]["attention"]) == 0.0 and float(megatron["R"]["attention"]) > 0.0  # Megatron's core_attn
    assert float(plain["R"]["memory"]) == pytest.approx(float(plain["F"]["memory"]))
    from core.params.planner import PlannerParams
    from core.planner.plan import recompute_policy
    assert recompute_policy(PlannerParams(memory_framework="torch")) == (layer_ops.PER_OP,)
    assert recompute_policy(PlannerParams(framework="torch")) == (layer_ops.PER_OP,)
    assert recompute_policy(PlannerParams()) == PlannerParams().recompute_modules
