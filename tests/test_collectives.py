"""Collectives as NCCL runs them (core.cost.collective), per layer and per bucket (core.cost.dp_comm), and what the
planner's ranking makes of them (issue 22).

NCCL's own cost model (NVIDIA/nccl src/graph/tuning.cc at 5067397, Simple protocol): base latency 8.4 us (ring,
tree) or 8.0 (PAT); per ring step 3.4 us on NVLink (at least the 3 us network post overhead once the ring leaves
the server) and 14 us across the network; a tree all-reduce pays 2 ((k - 1) x 4.0 + floor(log2 N) x 14) us; a
multi-server ring all-reduce's latency x 1.4; tree bus bandwidth x 0.92, PAT x 0.75 (one rank per server only).
"""

import math

import numpy as np
import pytest

from core.cost import collective
from core.cost.collective import Fabric
from core.params.planner import PlannerParams
from core.planner import plan as planner
from core.planner import rank_memory, validation, validation_scaling
from core.planner.recommend import recommend

H100 = Fabric(450e9 * 0.8, 50e9 * 0.8, 8)  # the h100-80gb preset at the default 80 % of line rate, no ring loss
LLAMA_8192 = dict(model="llama3-405b", gpu="h100-80gb", gpus=8192, batch=2048)


def _ring_latency_us(kind: str, n: int, k: int) -> float:
    c = 2 if kind == "all-reduce" else 1
    nodes = math.ceil(n / k)
    steps, inter = c * (n - 1), c * (nodes - 1)
    lat = 8.4 + (steps - inter) * (3.4 if nodes == 1 else max(3.4, 3.0)) + inter * 14.0
    return lat * (1.4 if kind == "all-reduce" and nodes > 1 else 1.0)


def test_a_ring_pays_one_latency_per_step_nvlink_inside_the_network_across():
    one_server = collective.cost("all-gather", 1e9, 8, 8, H100)
    assert float(one_server.latency) == pytest.approx(_ring_latency_us("all-gather", 8, 8) * 1e-6)
    assert float(one_server.bandwidth) == pytest.approx(7 / 8 * 1e9 / 360e9)
    # 64 ranks, 2 per server (t = 4 apart): 63 steps, 31 of them across the network, min(NVLink, 2 NICs) per rank
    wide = collective.cost("reduce-scatter", 1e9, 64, 2, H100)
    assert float(wide.latency) == pytest.approx((8.4 + 32 * 3.4 + 31 * 14.0) * 1e-6)
    assert float(wide.bandwidth) == pytest.approx(63 / 64 * 1e9 / 80e9)
    assert collective.ALGORITHMS[int(wide.algorithm)] == "ring"
    assert float(collective.seconds("all-reduce", 1e9, 1, 1, H100)) == 0.0


def test_nccl_picks_the_tree_for_small_all_reduces_across_many_servers_and_pat_for_one_rank_per_server():
    small = collective.cost("all-reduce", 1e6, 2048, 8, H100)  # 256 servers of 8
    tree_latency = 8.4 + 2 * (7 * 4.0 + 8 * 14.0)
    assert collective.ALGORITHMS[int(small.algorithm)] == "tree"
    assert float(small.latency) == pytest.approx(tree_latency * 1e-6)
    assert float(small.bandwidth) == pytest.approx(2 * 1e6 / (0.92 * 320e9))  # min(NVLink, 8 NICs) per rank
    big = collective.cost("all-reduce", 4e9, 16, 8, H100)  # two servers, a large buffer: the ring's bandwidth wins
    assert collective.ALGORITHMS[int(big.algorithm)] == "ring"
    spread = collective.cost("all-gather", 1e6, 512, 1, H100)  # one rank per server: PAT's log latency
    assert collective.ALGORITHMS[int(spread.algorithm)] == "pat"
    assert float(spread.latency) == pytest.approx((8.0 + 9 * 14.0 / 3.5 + 512 * 2.8) * 1e-6)
    assert collective.ALGORITHMS[int(collective.cost("all-gather", 1e6, 512, 2, H100).algorithm)] == "ring"


def test_bandwidth_falls_per_doubling_of_servers_beyond_two():
    lossy = Fabric(360e9, 40e9, 8, loss_per_doubling=0.06)
    assert float(lossy.bandwidth(1, 2)) == pytest.approx(40e9)
    assert float(lossy.bandwidth(1, 128)) == pytest.approx(40e9 * 0.94 ** 6)
    assert float(lossy.bandwidth(8, 1)) == 360e9  # inside a server: NVLink, whatever the loss


def _dense_rank_params(result, t, p):
    return float(rank_memory.params_per_rank(result.model, t, p)[0])


def test_the_top_rows_data_parallel_terms_are_the_per_bucket_collectives_by_hand():
    """Llama 3 405B on 8,192 H100: the first row's ZeRO-1 collectives recomputed from Megatron's buckets and
    NCCL's ring: a reduce-scatter of fp32 gradients per bucket in the last micro-batch's backward, an all-gather
    of the BF16 parameters per bucket during the next forward, a chunk ahead (param_sync_func), so all but the first
    chunk's share hides behind 80 % of the earlier chunks' first forwards; the row interleaves (v = 8), so the
    reduce-scatter is issued per model chunk and hides behind
    80 % of the other chunks' remaining backward passes, (v - 1) min(p, m) / v micro-batches' worth, all but the last
    chunk's share (Megatron-Core r0.8 schedules.py, grad_sync_func per chunk); the exposed part splits into latency
    and bandwidth as each collective does."""
    r = planner.plan(PlannerParams(**LLAMA_8192))
    row = r.best()
    t, p, d = int(row["t"]), int(row["p"]), int(row["d"])
    assert (t, p, d, int(row["zero_stage"]), row["schedule"], int(row["v"])) == (8, 8, 128, 1, "interleaved", 8)
    v, m = 8, int(row["m"])
    psi = _dense_rank_params(r, t, p)
    buckets = math.ceil(psi / max(40e6, 1e6 * d))
    share = psi / buckets
    k, nodes = 8 // t, d // (8 // t)
    bw = min(360e9, k * 40e9 * 0.94 ** (math.log2(nodes) - 1))
    lat = _ring_latency_us("reduce-scatter", d, k) * 1e-6
    rs = (lat, (d - 1) / d * share * 4 / bw)
    ag = (lat, (d - 1) / d * share * 2 / bw)
    total = buckets * (sum(rs) + sum(ag))
    assert row["dp_comm_s"] == pytest.approx(total, rel=1e-9)
    exposed = {}
    drain = 0.8 * (row["tb"] + row["tw"]) * (v - 1) * min(p, m) / v
    lead = 0.8 * row["tf"] * (v - 1) * min(p, m) / v  # the earlier chunks' first forwards (param_sync_func)
    for name, (latency, band), least, window in (("rs", rs, buckets / v, drain), ("ag", ag, buckets / v, lead)):
        e = max(least * (latency + band), buckets * (latency + band) - window)
        exposed[name] = (e * latency / (latency + band), e * band / (latency + band))
    assert row["dp_latency_s"] == pytest.approx(exposed["rs"][0] + exposed["ag"][0], rel=1e-9)
    assert row["dp_bandwidth_s"] == pytest.approx(exposed["rs"][1] + exposed["ag"][1], rel=1e-9)
    parts = sum(row[c] for c in ("gemm_s", "attention_s", "memory_bound_s", "tp_exposed_s", "pp_exposed_s",
                                 "bubble_s", "straggler_s", "dp_latency_s", "dp_bandwidth_s", "optimizer_s"))
    assert parts == pytest.approx(row["step_time_s"])


def _zero3(gpus, batch, reshard="on"):
    r = planner.plan(PlannerParams(model="llama3-405b", gpu="h100-80gb", gpus=gpus, batch=batch, mb_sizes=(1,),
                                   fix_t=4, fix_p=1, zero="3", reshard=reshard, recompute="full", sp="on",
                                   tp_comm_overlap="off"))
    assert len(r.frame) == 1
    return r, r.frame.iloc[0]


def test_a_zero3_row_is_a_gather_before_each_layers_forward_and_backward_and_a_reduce_scatter_after():
    r, row = _zero3(8192, 2048)
    d, layers, m = int(row["d"]), r.model.layers, int(row["m"])
    unit = _dense_rank_params(r, 4, 1) / layers
    k, nodes = 2, d // 2
    bw = min(360e9, k * 40e9 * 0.94 ** (math.log2(nodes) - 1))
    lat = _ring_latency_us("all-gather", d, k) * 1e-6
    gather, scatter = lat + (d - 1) / d * unit * 2 / bw, lat + (d - 1) / d * unit * 4 / bw
    assert row["dp_comm_s"] == pytest.approx(m * layers * (2 * gather + scatter), rel=1e-9)
    fwd = max(gather - 0.8 * row["tf"] / layers, 0.0)
    bwd = max(gather + scatter - 0.8 * (row["tb"] + row["tw"]) / layers, 0.0)
    assert row["dp_exposed_s"] == pytest.approx(m * layers * (fwd + bwd), rel=1e-9)
    kept = _zero3(8192, 2048, reshard="off")[1]  # FSDP reshard_after_forward=False: one gather per layer fewer
    assert kept["dp_comm_s"] == pytest.approx(m * layers * (gather + scatter), rel=1e-9)
    assert kept["zero3_working_bytes"] > row["zero3_working_bytes"]  # the stage's parameters stay gathered


def test_zero3_at_equal_work_per_rank_costs_more_collective_time_on_2048_ranks_than_on_64():
    _, small = _zero3(256, 64)  # d = 64, one micro-batch of one sequence per rank
    _, large = _zero3(8192, 2048)  # d = 2,048, the same per rank
    assert (small["d"], large["d"], small["m"], large["m"]) == (64, 2048, 1, 1)
    assert large["dp_comm_s"] > 1.5 * small["dp_comm_s"]
    assert large["dp_latency_s"] > 10 * small["dp_latency_s"]  # a ring step per rank: 2,047 against 63
    assert large["step_time_s"] > small["step_time_s"]


def test_the_ranking_searches_interleaved_depths_tp_overlap_and_resharding():
    r = planner.plan(PlannerParams(**LLAMA_8192))
    f = r.frame
    depths = f[f["schedule"] == "interleaved"].groupby("p")["v"].unique()
    assert sorted(depths[16]) == [2, 4, 8] and sorted(depths[8]) == [2, 4, 8] and sorted(depths[64]) == [2]
    feasible = r.feasible
    assert set(feasible[feasible["schedule"] == "interleaved"]["v"]) == {2, 4, 8}
    assert feasible["tp_comm_overlap"].any() and (~feasible["tp_comm_overlap"]).any()
    kept = f[(f["zero_stage"] == 3) & ~f["reshard"]]
    assert len(kept) and all(fw in ((), ("torch",)) for fw in kept["frameworks"])
    assert all("megatron" in fw for fw in feasible[feasible["tp_comm_overlap"]]["frameworks"])


def test_metas_layout_is_within_ten_percent_of_the_first_row():
    r = planner.plan(PlannerParams(**LLAMA_8192))
    f = r.feasible
    meta = f[(f["t"] == 8) & (f["p"] == 16) & (f["d"] == 64)].iloc[0]
    assert meta["step_time_s"] / r.best()["step_time_s"] < 1.10
    # ZeRO-1 first at Meta's layout: its reduction per model chunk and its gathers a chunk ahead both hide
    assert (int(meta["v"]), int(meta["zero_stage"]), bool(meta["tp_comm_overlap"])) == (8, 1, True)
    big = f[(f["d"] >= 1024) & (f["zero_stage"] == 3)]
    assert big["step_time_s"].min() > 1.5 * r.best()["step_time_s"]  # ZeRO-3 over 1,024+ ranks is no longer free


def test_an_unusual_first_row_says_what_it_gains_and_risks():
    r = planner.plan(PlannerParams(model="llama3-8b", gpu="h100-80gb", gpus=1024, batch=2048))
    best = r.best()
    assert (int(best["t"]), int(best["p"]), int(best["d"])) == (1, 1, 1024)
    text = recommend(r).unusual
    assert "a data-parallel group of 1,024 ranks" in text[0]
    # (numbers with the H100 calibration record refitted with the gathers a chunk ahead, gemm_eff 0.663, timed as
    # the default release, bridge-26.06: 26.04's fitted attention)
    assert text[1].startswith("Gain: 0.20 s per step") and "#32" in text[1]
    assert "0.48 s per step" in text[2] and "(0.8 % of the step) is latency" in text[2]
    assert "if none of it hides, the step is 2.17 s, slower than the usual layout" in text[3]
    assert "Unlike the usual layout" in recommend(r).text()
    usual = recommend(planner.plan(PlannerParams(**LLAMA_8192)))
    assert usual.unusual == ()  # t 8 p 8 d 128 ZeRO-1 is the usual practice


def test_scaling_series_drift():
    s = validation_scaling.validate()
    summary = {x.key: x for x in s.summary()}
    assert summary["megascale-175b-b6144"].role == "calibration"
    # the baseline's defaults (ZeRO-0 with fp32 all-reduce, selective recompute, no flash, blocking sends)
    assert summary["megascale-175b-b6144"].drift < 0.06 and summary["megascale-175b-b768"].drift < 0.05
    # MT-NLG at Megatron-DeepSpeed's compute pace (compute_stack): -1.4, -2.5, -5.1 % (3.7 points; 3.1 at the
    # Megatron-LM pace, when all three read 16-19 % fast)
    assert summary["megascale-530b-weak"].drift < 0.01 and summary["mtnlg-530b"].drift < 0.04
    assert abs(summary["mtnlg-530b"].signed_mean_error) < 0.04
    assert summary["llama3-405b"].drift < 0.01
    # no per-micro-batch + per-step model goes below 5 points on the batch-6,144 points: 6,144 -> 8,192 GPUs cut the
    # step by 17 % for 25 % less work per GPU, 8,192 -> 12,288 by 30 % for 33 %
    assert summary["megascale-175b-b6144"].floor == pytest.approx(0.053, abs=0.002)
    assert summary["megascale-175b-b6144"].drift - summary["megascale-175b-b6144"].floor < 0.005
    cal = s.steps[s.steps["series"] == "megascale-175b-b6144"]
    growth = (cal["predicted_s"] * cal["gpus"]).to_numpy()
    published = (cal["published_s"] * cal["gpus"]).to_numpy()
    assert published[-1] / published[0] == pytest.approx(1.18, abs=0.005)  # GPU-seconds per step, 3,072 -> 12,288
    assert growth[-1] / growth[0] == pytest.approx(1.24, abs=0.02)
    assert np.all(s.steps["fits"] | (s.steps["series"] == "llama3-405b"))
    # by trend against log2(GPUs) the calibration series asks ring_loss 0.02; the sourced default, 6 % of the
    # bandwidth per doubling of servers (NVIDIA/nccl issue 1229), tilts it +1.7 points per doubling but leaves
    # the least drift on the 175B series (kept: a measurement, not this fit)
    assert s.fit["fitted_ring_loss"] == 0.02 and s.fit["trends"]["0.06"] == pytest.approx(0.017, abs=0.003)
    assert s.fit["trends"]["0"] < 0 < s.fit["trends"]["0.04"]


def test_a_scaling_point_is_its_validation_row():
    """One record per published number: a series names validation rows, and both tables print one prediction."""
    steps = validation.step_rows(keep=lambda r: r["source"] in ("megascale", "mtnlg", "llama3_paper")
                                 or r["key"].startswith("mcore-strong"))
    by_key = steps.set_index("key")
    points = validation_scaling.rows()
    assert len(points) == 18
    for p in points.to_dict("records"):
        assert p["predicted_s"] == by_key.loc[p["key"], "predicted_s"]
        assert p["published_s"] == by_key.loc[p["key"], "published_s"]


def test_the_drift_floor_is_the_published_scatter():
    m = np.array([128.0, 64.0, 48.0, 32.0])
    d = 6144 / m
    exact = 0.2 * m + 1.5 + 0.1 * np.log2(d)  # a series a per-micro-batch + per-step model reproduces
    assert validation_scaling.drift_floor(m, exact, d) < 1e-3
    wobble = exact * np.array([1.0, 1.03, 1.0, 1.0])  # one point 3 % slow: the best model splits it
    assert validation_scaling.drift_floor(m, wobble, d) == pytest.approx(0.03, abs=0.005)


def test_an_interleaved_schedule_reduces_each_chunks_gradients_behind_the_later_chunks_backward():
    """Megatron-Core r0.8 (pipeline_parallel/schedules.py: grad_sync_func per model chunk at its last micro-batch)
    and PyTorch's pipelining (REDUCE_GRAD after each stage's last backward): with v chunks, the reduction of all
    but the last chunk runs behind the other chunks' remaining backward passes, so what is exposed is
    max(C / v, C - drain), not C minus one micro-batch's backward."""
    from core.cost import dp_comm

    g = dp_comm.Group(np.array([96.0]), np.array([1.0]), np.array([3.7e9]), 2.0, 4.0)
    base = {"fwd": np.array([0.12]), "bwd": np.array([0.25])}
    plain = dp_comm.step_time(np.array([1]), np.array([True]), g, 12, 6, base, H100)
    buckets = math.ceil(3.7e9 / float(dp_comm.bucket_params(0.0, 96)))  # Megatron's max(40M, 1M x 96) = 96M
    rs = collective.cost("reduce-scatter", 3.7e9 / buckets * 4.0, 96, 1, H100)
    assert plain.total[0] > 0.5
    for v, drain in ((8, 2.0), (8, 0.1), (2, 0.0)):
        w = {**base, "chunks": np.array([float(v)]), "drain": np.array([drain])}
        got = dp_comm.step_time(np.array([1]), np.array([True]), g, 12, 6, w, H100)
        c = buckets * rs.seconds
        ag = plain.exposed - max(rs.seconds, c - 0.25)  # the all-gather's part does not change
        assert got.total == pytest.approx(plain.total)
        assert got.exposed - ag == pytest.approx(max(c / v, c - drain), rel=1e-9)


def test_an_interleaved_schedule_gathers_each_chunks_parameters_a_chunk_ahead():
    """Megatron-Core r0.8 (pipeline_parallel/schedules.py: param_sync_func for the first two chunks at the start,
    chunk k + 1's when chunk k's first micro-batch runs): the earlier chunks' first forwards (`lead`) hide the later
    chunks' gathers, so what is exposed is max(G / v, G - lead); without `lead` (FSDP gathering each chunk at its
    first use) it is the non-interleaved rule, G minus one micro-batch's forward."""
    from core.cost import dp_comm

    g = dp_comm.Group(np.array([96.0]), np.array([1.0]), np.array([3.7e9]), 2.0, 4.0)
    base = {"fwd": np.array([0.12]), "bwd": np.array([0.25]), "chunks": np.array([8.0]), "drain": np.array([2.0])}
    lazy = dp_comm.step_time(np.array([1]), np.array([True]), g, 12, 6, base, H100)
    buckets = math.ceil(3.7e9 / float(dp_comm.bucket_params(0.0, 96)))
    ag = collective.cost("all-gather", 3.7e9 / buckets * 2.0, 96, 1, H100)
    gathers = buckets * ag.seconds
    assert gathers > 0.2  # 7.4 GB over 96 servers: far more than one micro-batch's forward hides
    reduce_part = lazy.exposed - max(ag.seconds, gathers - 0.12)
    for lead, want in ((0.5, max(gathers / 8, gathers - 0.5)), (10.0, gathers / 8)):
        got = dp_comm.step_time(np.array([1]), np.array([True]), g, 12, 6, {**base, "lead": np.array([lead])}, H100)
        assert got.total == pytest.approx(lazy.total)
        assert got.exposed - reduce_part == pytest.approx(want, rel=1e-9)
