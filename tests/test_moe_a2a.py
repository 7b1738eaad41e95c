"""The MoE all-to-all as Megatron-Core runs it: the dispatcher (alltoall or DeepEP), group-limited routing and the
batch-level EP overlap, checked by hand on DeepSeek-V3 and against the runs that used them.

Sources: deepseek-ai/DeepEP README (normal kernels: 51 / 50 GB/s RDMA at EP 64 on a ~50 GB/s NIC, 153 / 158 GB/s
NVLink at EP 8 of ~160 GB/s); Megatron-Core core_v0.14.0 schedules.py (warm-up micro-batches, + 1 with
--overlap-moe-expert-parallel-comm), transformer_config.py (moe_deepep_num_sms 20; the overlap's asserts),
models/common/model_chunk_schedule_plan.py (which node's all-to-all runs beside which compute);
NVIDIA-NeMo/Megatron-Bridge d83f5a0d9 scripts/performance/run_script.py (the 25.09 DeepSeek-V3 H100 run: DeepEP,
A2A overlap, etp 1); HF deepseek-ai/DeepSeek-V3 config (n_group 8, topk_group 4).
"""

import pytest

import core.pipeline.schedules  # noqa: F401  (registers the schedules PlannerParams checks against)
from core.cost import expert_comm, moe_overlap
from core.cost.step_input import Assumptions
from core.model import presets
from core.params.catalog import document
from core.params.planner import ASSUMPTIONS, PlannerParams
from core.planner import plan as planner
from core.planner import validation
from core.planner.export_megatron import megatron_args
from core.planner.result import layout_for
from scripts import fit_efficiency

H100 = presets.gpu("h100-80gb")
DSV3 = presets.model("deepseek-v3")
# One MoE layer, one micro-batch of DeepSeek-V3 at Megatron-Bridge's H100 layout: s 4096 over t 2 -> 2,048 tokens
# per GPU, 8 copies each, h 7168, BF16, (ep - 1) / ep of them to other GPUs; four transfers a step.
ONE_WAY = 2048 * 8 * 7168 * 2 * 63 / 64


def test_deepseek_v3_routes_each_token_to_four_servers():
    assert (DSV3.moe.groups, DSV3.moe.group_topk) == (8, 4)
    assert float(expert_comm.servers_reached(DSV3.moe, 64, 1, 8)) == 4.0  # 8 servers, 32 experts each = one group
    assert float(expert_comm.servers_reached(DSV3.moe, 8, 1, 8)) == 1.0  # all experts in one server
    # EP 256 over 32 servers: a group of 32 experts spans 4 servers of 8, 4 groups allow 16, 8 copies reach <= 8
    assert float(expert_comm.servers_reached(DSV3.moe, 256, 1, 8)) == 8.0
    # Without groups (Qwen3: 128 experts, top 8) over 4 servers: 4 (1 - (3/4)^8) reached
    qwen = presets.custom_model({"layers": 94, "hidden": 4096, "heads": 64, "kv_heads": 4, "vocab": 151936,
                                 "seq": 4096, "experts": 128, "top_k": 8, "expert_ffn": 1536})
    assert float(expert_comm.servers_reached(qwen.moe, 32, 1, 8)) == pytest.approx(4 * (1 - 0.75 ** 8))


def test_deepseek_v3_layer_all_to_all_by_hand():
    nbytes = float(expert_comm.layer_bytes(4096, 1, 7168, 8, t=2, ep=64))
    assert nbytes == 4 * ONE_WAY == 924_844_032
    # FP8 dispatch (DeepSeek's own system) halves the forward dispatch only: 3.5 of the 4 transfers' bytes
    assert float(expert_comm.layer_bytes(4096, 1, 7168, 8, t=2, ep=64, fp8_dispatch=True)) == 3.5 * ONE_WAY
    assert float(expert_comm.forward_share()) == 0.5  # dispatch + combine of the 4 transfers
    # alltoall: every copy on its own, 56 of 63 peers in other servers, NCCL at 80 % of the 50 GB/s NIC
    a2a = expert_comm.layer_time(nbytes, 64, 1, expert_comm.fabric(H100, Assumptions()), messages=4)
    assert float(a2a) == pytest.approx(nbytes * 56 / 63 / 40e9 + 4 * 10e-6)  # 20.6 ms
    # DeepEP: once per remote server (3.5 of 8 copies) at the NIC's rate; NVLink carries every copy at 97 %
    deepep = expert_comm.fabric(H100, Assumptions(moe_dispatcher="deepep"))
    assert deepep.inter_bw == 50e9 and deepep.intra_bw == pytest.approx(450e9 * 311 / 320)
    t = expert_comm.layer_time(nbytes, 64, 1, deepep, messages=4, top_k=8, reached=4)
    assert float(t) == pytest.approx(nbytes * 3.5 / 8 / 50e9 + 4 * 10e-6)  # 8.13 ms: the network sets the pace
    assert nbytes / deepep.intra_bw < nbytes * 3.5 / 8 / 50e9  # NVLink (2.1 ms) stays below it


def test_overlap_pairs_each_all_to_all_with_its_sub_module_by_hand():
    # One paired layer (ms): attention 2 fwd / 4 bwd / 1 dw, expert MLP 1 / 1 / 0.5; all-to-all 5 ms, forward 3 of
    # it (dispatch 2, combine 1), each backward transfer 1. Megatron-Core's order (TransformerLayerSchedulePlan.run):
    # combine_bwd beside attn_fwd (1 < 2); dispatch_fwd from 2 to 4 beside mlp_bwd + mlp_dw (2 to 3.5): the MLP
    # forward waits until 4; dispatch_bwd 4-5 beside it; combine_fwd 5-6 beside the attention backward (5-10).
    # 10 ms for 9.5 ms of compute: 0.5 ms exposed, 4.5 of 5 hidden, where the layer-level min
    # (min(3, 6.5 backward compute) + min(2, 3 forward compute)) hid all 5.
    parts = {"attn_F": 2e-3, "attn_B": 4e-3, "attn_W": 1e-3, "mlp_F": 1e-3, "mlp_B": 1e-3, "mlp_W": 0.5e-3}
    assert float(moe_overlap.layer_exposed((2e-3, 1e-3, 1e-3, 1e-3), parts)) == pytest.approx(0.5e-3)
    assert float(moe_overlap.layer_hidden(5e-3, 0.6, parts)) == pytest.approx(4.5e-3)
    assert float(moe_overlap.layer_exposed((0.0, 0.0, 0.0, 0.0), parts)) == pytest.approx(0.0)  # nothing to wait for
    # An all-to-all longer than the compute (NCCL's, 20 ms): the whole 9.5 ms of compute hides it, as the min did
    assert float(moe_overlap.layer_hidden(20e-3, 0.5, parts)) == pytest.approx(9.5e-3)


def test_paired_share_and_exposed():
    # Interleaved p 8, v 4, m 128, first rank: 2 x 7 + 3 x 8 + 1 = 39 warm-up forwards of 512 run alone
    assert float(moe_overlap.paired_share(8, 4, 128, 64, "none", False)) == pytest.approx(473 / 512)
    assert float(moe_overlap.paired_share(1, 1, 8, 8, "none", False)) == pytest.approx(7 / 8)
    # Megatron-Core refuses the overlap with plain 1F1B over a pipeline, full recompute, ep 1, a split backward
    assert float(moe_overlap.paired_share(8, 1, 128, 64, "none", False)) == 0.0
    assert float(moe_overlap.paired_share(8, 4, 128, 64, "full", False)) == 0.0
    assert float(moe_overlap.paired_share(8, 4, 128, 1, "none", False)) == 0.0
    assert float(moe_overlap.paired_share(8, 4, 128, 64, "none", True)) == 0.0
    # What hides costs DeepEP's 20 of 132 SMs beside it
    assert float(moe_overlap.exposed(10.0, 0.5, 0.01, 1000, 20 / 132)) == pytest.approx(10 - 5 * 112 / 132)
    assert float(moe_overlap.exposed(10.0, 1.0, 1.0, 1000)) == 0.0  # never more than the total
    # and each paired layer costs the schedule's own sync_s: 500 paired layers x 625 us
    assert float(moe_overlap.exposed(10.0, 0.5, 0.01, 1000, 0.0, 625e-6)) == pytest.approx(5.0 + 0.3125)


def _mb2509(**software):
    row = next(r for r in validation.data()["rows"] if r["key"] == "mb2509-deepseekv3-1024")
    return validation.step_row({**row, "software": {**row["software"], **software}})


def test_megatron_bridge_deepseek_v3_runs_its_recipe():
    # 25.09 on 1,024 H100 (t2 p8 v4 ep64 etp1): 1,297 tokens/s per GPU = 25.26 s. Its recipe ran DeepEP with the
    # A2A overlap and the layout 'Et|(tt|)*30mL' (the MTP depth and the loss alone in the last virtual stage); before
    # this model (NCCL all-to-all, etp = t, nothing hidden, no MTP) it was predicted +50.6 %.
    row = next(r for r in validation.data()["rows"] if r["key"] == "mb2509-deepseekv3-1024")
    assert row["software"] == {"moe_dispatcher": "deepep", "moe_a2a_overlap": True, "ends_in_split": True,
                               "grad_dtype": "bf16", "loss": "fused", "optimizer_dtype": "bf16",  # its recipe's memory
                               "release": "bridge-25.09"}
    assert row["layout"]["etp"] == 1
    got = _mb2509()
    assert got["published_s"] == pytest.approx(25.26, abs=0.01)
    # Held out: the overlap still hides more than the run did, with the per-layer cost fitted on the ModelZoo pair
    # (946 paired layers x 1,062 us = 1.0 s on top of 1.80 s); with the MTP depth timed -18.6 -> -10.9 %; MLA's
    # activations counted, the recipe's own recompute (mla_up_proj, the planner's selective for MLA) was chosen:
    # -10.2 %. Since the MoE layer is counted as Megatron-Core 0.14 keeps it (no expert outputs: the probabilities
    # weigh the activation), no recompute fits too, at 83.7 of the device's 85.5 GB (98 %), and is 0.7 % faster:
    # -11.0 %. Timed as its release (bridge-25.09's fitted FP8 GEMM and attention, fitted on the table's dense
    # rows) it read -17.0 %: the MoE layers' time, not the release's kernels, is what runs fast. The overlap's cost
    # refitted on the ModelZoo pair timed as its own image (cuDNN attention, release pytorch-25.06): -14.4 %
    assert got["error"] == pytest.approx(-0.144, abs=0.01)
    assert got["memory_bytes"] == pytest.approx(84.0e9, rel=0.01)  # TE's grouped-GEMM workspaces among its buffers
    assert got["a2a"] == pytest.approx(2.80, abs=0.05)
    ideal = validation.step_row(next(r for r in validation.data()["rows"] if r["key"] == "mb2509-deepseekv3-1024"),
                                {"moe_overlap_sync_us": 0.0})
    assert ideal["error"] == pytest.approx(-0.184, abs=0.01) and ideal["a2a"] == pytest.approx(1.80, abs=0.05)
    plain = _mb2509(moe_a2a_overlap=False)  # DeepEP, nothing hidden: +7 %
    assert plain["error"] == pytest.approx(0.075, abs=0.01) and plain["a2a"] == pytest.approx(8.33, abs=0.05)
    nccl = _mb2509(moe_dispatcher="alltoall", moe_a2a_overlap=False)  # every copy over the network
    assert nccl["error"] == pytest.approx(0.580, abs=0.01)
    # The even split would put the MTP depth and two output layers on top of a full last stage: 16 % slower at the
    # same switches (it was), and counted as Megatron-LM stores it that stage no longer fits without recompute (the
    # recipe's split holds it without): selective recompute (core_attn and mla_up_proj re-run), 20 % slower
    even = _mb2509(ends_in_split=False)
    assert got["chosen"] == {"recompute": "none"} and even["chosen"] == {"recompute": "selective"}
    assert even["predicted_s"] / got["predicted_s"] == pytest.approx(1.200, abs=0.005)


def test_modelzoo_qwen3_rows_state_what_they_ran():
    rows = {r["key"]: r for r in validation.data()["rows"] if r["source"] == "moe_modelzoo"}
    assert len(rows) == 9
    pair = rows["zoo-qwen3-235b-cross-ep32"], rows["zoo-qwen3-235b-cross-ep32-overlap"]
    assert [r["published"]["step_time_s"] for r in pair] == [19.7, 17.6]
    assert [r["software"]["moe_a2a_overlap"] for r in pair] == [False, True]
    assert rows["zoo-qwen3-235b-intra-ep8-a2a"]["software"]["moe_dispatcher"] == "alltoall"
    for r in rows.values():
        assert "unmatched" not in r and r["model"]["head_dim"] == 128  # Qwen3's head size 128 (hidden 4096 / 64 heads)
        assert r["published"]["excerpt"].startswith(("| 235B |", "| H100|")) and "moe_dispatcher" in r["assumed"]
        # every row timed as the ModelZoo's own image (PyTorch 25.06, TE 2.6: cuDNN's fused attention on Hopper)
        assert r["software"]["release"] == "pytorch-25.06"
    # the long-context table: TFLOPS per GPU in Megatron-LM's causal count, TP4 PP8 VPP4 EP8, CP from 1 to 8
    long = {k: r for k, r in rows.items() if "-long-" in k}
    assert [(r["model"]["seq"], r["layout"]["cp"], r["published"]["tflops_per_gpu"]) for r in long.values()] == [
        (16384, 1, 295), (32768, 2, 335), (65536, 4, 368), (131072, 8, 389)]
    assert all(r["published"]["flops"] == "causal" and r["role"] == "held-out" for r in long.values())
    # The overlap pair is moe_overlap_sync_us's calibration set (the ideal overlap saved 4.3 s where the run saved
    # 2.1 s); the other three are held out: Megatron-FSDP with EP 8 is far off (ZeRO-3 + EP, not the all-to-all),
    # and TP 4 with DeepEP fast. The 'norm, act' rows run selective recompute of layernorm and moe_act.
    assert {k for k, r in rows.items() if r["software"].get("recompute_modules") == "layernorm,moe_act"} == {
        "zoo-qwen3-235b-cross-ep32", "zoo-qwen3-235b-cross-ep32-overlap", "zoo-qwen3-235b-intra-ep8-a2a"}
    assert [r["role"] for r in pair] == ["calibration", "calibration"]
    got = validation.step_rows(keep=lambda r: r["source"] == "moe_modelzoo").set_index("key")["error"]
    # Timed with the base records' FlashAttention-2 rate the long-context rows read +26 % (16K) to +50 % (128K):
    # the attention kernel, which the release's cuDNN rate (a kernel measurement, not fitted) accounts for
    want = {"zoo-qwen3-235b-cross-ep32": 0.034, "zoo-qwen3-235b-cross-ep32-overlap": 0.000,
            "zoo-qwen3-235b-intra-ep8-fsdp": 0.972, "zoo-qwen3-235b-intra-ep8-a2a": 0.110,
            "zoo-qwen3-235b-intra-ep8-tp4": -0.230, "zoo-qwen3-235b-long-16k-cp1": 0.097,
            "zoo-qwen3-235b-long-32k-cp2": 0.102, "zoo-qwen3-235b-long-64k-cp4": 0.079,
            "zoo-qwen3-235b-long-128k-cp8": 0.042}
    for key, err in want.items():
        assert got[key] == pytest.approx(err, abs=0.01), key


def test_megatron_export_emits_the_switches_the_step_time_counts_on():
    q = PlannerParams(model="deepseek-v3", gpu="h100-80gb", gpus=1024, batch=8192, precision="fp8", fix_t=2, fix_p=8,
                      fix_ep=64, fix_etp=1, schedule="interleaved", v=4, mb_sizes=(1.0,), recompute="none",
                      moe_dispatcher="deepep", moe_a2a_overlap=True)
    result = planner.plan(q)
    args, notes = megatron_args(layout_for(q, result.frame.iloc[0]))
    text = " ".join(args)
    assert "--moe-token-dispatcher-type flex --moe-enable-deepep" in text
    assert "--moe-router-num-groups 8 --moe-router-group-topk 4" in text
    assert "--overlap-moe-expert-parallel-comm --delay-wgrad-compute" in text
    assert any("only Megatron-LM runs them" in n for n in result.notes)
    # Where Megatron-Core refuses the overlap (full recompute), it is neither emitted nor counted on
    full = PlannerParams(**{**q.__dict__, "recompute": "full"})
    row = planner.plan(full).frame.iloc[0]
    args, notes = megatron_args(layout_for(full, row))
    assert "--overlap-moe-expert-parallel-comm" not in args and any("refuses it with full recompute" in n
                                                                     for n in notes)
    off = planner.plan(PlannerParams(**{**full.__dict__, "moe_a2a_overlap": False})).frame.iloc[0]
    assert row["a2a_exposed_s"] == pytest.approx(off["a2a_exposed_s"])
    alltoall = PlannerParams(**{**q.__dict__, "moe_dispatcher": "alltoall", "moe_a2a_overlap": False})
    args, _ = megatron_args(layout_for(alltoall, planner.plan(alltoall).frame.iloc[0]))
    assert "--moe-token-dispatcher-type alltoall" in " ".join(args) and "--moe-enable-deepep" not in args


def test_overlap_cost_is_fitted_on_the_modelzoo_pair_only():
    # scripts/fit_efficiency.py fit 'moe_overlap': one value, on the two ModelZoo rows whose `fitted_by` names it;
    # the planner's default is the stored fit (core.params.planner reads assets/efficiency.json)
    fit = document("efficiency.json")["assumption_fits"]["moe_overlap_sync_us"]
    assert fit["value"] == 1062 and ASSUMPTIONS["moe_overlap_sync_us"].default == 1062.0
    assert Assumptions().moe_overlap_sync_us == 1062.0
    tagged = sorted(r["key"] for r in validation.data()["rows"] if r.get("fitted_by") == fit["fitted_by"])
    assert sorted(fit["rows"]) == tagged == ["zoo-qwen3-235b-cross-ep32", "zoo-qwen3-235b-cross-ep32-overlap"]
    assert all(r["role"] == "calibration" for r in validation.data()["rows"] if r["key"] in tagged)
    # the held-out runs of the overlap, each no worse than the ideal schedule left it (-18.4 %, -2.8 %)
    assert fit["held_out"] == pytest.approx({"mb2509-deepseekv3-1024": -0.144, "mb260401-qwen3_235b_a22b-256": 0.056},
                                            abs=0.002)
    bridge = next(r for r in validation.data()["rows"] if r["key"] == "mb260401-qwen3_235b_a22b-256")
    assert validation.step_row(bridge)["error"] == pytest.approx(0.056, abs=0.005)
    assert validation.step_row(bridge, {"moe_overlap_sync_us": 0.0})["error"] == pytest.approx(-0.028, abs=0.005)
    # refitting gives the stored value
    values, _ = fit_efficiency.fit("moe_overlap")
    assert values == {"moe_overlap_sync_us": 1062}
