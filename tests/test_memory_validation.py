"""The memory model against measured peaks (assets/memory_validation.json, `python -m core validate --memory`).

Each row is a real run's measured per-GPU peak (torch.cuda.max_memory_allocated or max_memory_reserved, as its source
printed it) and the planner's prediction for the same layout, counted as the row's framework stores it. One parameter
is fitted, each framework's caching-allocator reserve share, on the named calibration rows; every other row is held
out of it and reported apart.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from core.memory import framework_terms as terms
from core.memory import per_gpu, states
from core.params.catalog import document
from core.planner import memory_accuracy, memory_validation
from scripts import fit_memory, memory_table
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def result():
    return memory_validation.validate()


def _rows(result, prefix: str):
    m = result.matched
    return m[m["key"].str.startswith(prefix)].set_index("key")


def test_every_row_says_what_its_source_measured_and_where():
    data = memory_validation.data()
    assert set(data["sources"]) >= {r["source"] for r in data["rows"]}
    for row in data["rows"]:
        assert row["measured"]["kind"] in memory_validation.KINDS and row["measured"]["excerpt"]
        assert row["role"] in ("calibration", "held-out") and row.get("device", "fullest") in memory_validation.DEVICES
        assert row["framework"] in ("megatron", "torch", "deepspeed")


def test_the_one_fitted_parameter_is_fitted_on_its_named_rows_and_reproduces(result):
    fits = document("memory_fits.json")["fits"]
    calibration = result.matched[result.matched["role"] == "calibration"]
    for key in ("megatron", "torch"):
        got = fit_memory.fit(key)
        assert got["reserve"] == fits[key]["reserve"] and got["rows"] == fits[key]["rows"]
        reserved = calibration[(calibration["framework"] == key) & (calibration["kind"] == "reserved")]
        assert set(got["rows"]) == set(reserved["key"])
    assert fits["deepspeed"]["rows"] == [] and "borrowed" in fits["deepspeed"]  # no measured DeepSpeed reserve
    s = result.summary()["calibration"]
    assert s.rows == 6 and s.mean_abs_error < 0.01  # the sixth: the native cross-entropy's pair (below)


def test_megatron_native_cross_entropy_is_its_ci_pair(result):
    # Megatron-LM's CI runs the same TP2 PP2 model with and without --cross-entropy-loss-fusion (impl native): 409 MB
    # apart on the last stage, 3.96 bytes per local logit (4 x 1,024 x 50,432 / 2). The native kernel's 10 bytes at
    # the peak against the unfused 6 reproduce both runs; the MoE CI case that runs it (MLA, MTP) is held out.
    rows = result.matched.set_index("key")
    fused, plain = rows.loc["mcore-ci-tp2-pp2-ce-fusion"], rows.loc["mcore-ci-tp2-pp2"]
    logits = 1024 * 4 * 50432 / 2
    assert (fused["measured_bytes"] - plain["measured_bytes"]) / logits == pytest.approx(3.96, abs=0.01)
    assert (fused["predicted_bytes"] - plain["predicted_bytes"]) / logits == pytest.approx(4.0, abs=0.05)
    assert fused["role"] == "calibration" and abs(fused["error"]) < 0.015 and abs(plain["error"]) < 0.015
    assert rows.loc["mcore-ci-moe-mla-tp2-pp2-ep4-h100", "role"] == "held-out"


def test_megatron_ci_dense_runs_within_three_percent(result):
    # Megatron-LM's own functional tests (golden mem-max-allocated-bytes): TP, PP, interleaving, CP, the
    # distributed optimizer, full recompute, fp16 with its 16-bit gradient buffer
    dense = _rows(result, "mcore-ci-")
    dense = dense[~dense.index.str.contains("moe")]
    assert len(dense) >= 31
    # held-out cases beyond 3 % (docs/memory.md): TP2 CP2 on one stage
    known = {"mcore-ci-tp2-cp2-sp": 0.04}
    assert np.abs(dense.drop(list(known) + ["mcore-ci-tp4-qk-layernorm"])["error"]).max() < 0.03
    # --qk-layernorm: each per-head norm keeps its contiguous input and fp32 statistics (-5.2 % before it was counted)
    assert -0.031 < dense.loc["mcore-ci-tp4-qk-layernorm", "error"] < -0.025
    assert all(abs(dense.loc[k, "error"]) < bound for k, bound in known.items())
    assert np.abs(dense["error"]).mean() < 0.02
    # with the ends in the split, an interleaved last device holds 4 micro-batches of its layer chunk and 1 of its
    # loss-only chunk: weighted by the chunks' layers it holds 4 layers' worth (-13.2 % counted as 2.5)
    assert abs(dense.loc["mcore-ci-tp1-pp4-vp2-ends", "error"]) < 0.01


def test_transformer_engine_workspaces_of_tp_overlap_and_grouped_gemm(result):
    # TE allocates three more cuBLAS workspaces for its userbuffer GEMMs (--tp-comm-overlap) and one per compute
    # stream, four, for grouped GEMMs (--moe-grouped-gemm); 32 MiB + 1 KiB each on Hopper. Megatron-LM only
    ws = 32 * 2**20 + 1024
    assert float(terms.buffer_bytes("megatron", 1, True, False) - terms.buffer_bytes("megatron", 1)) == 3 * ws
    assert float(terms.buffer_bytes("megatron", 1, False, True) - terms.buffer_bytes("megatron", 1)) == 4 * ws
    assert float(terms.buffer_bytes("torch", 1, True, True)) == float(terms.buffer_bytes("torch", 1))
    rows = _rows(result, "mcore-ci-")
    # FP8 with TP overlap: 0.12 GB short (-13.9 %) before the userbuffers' workspaces were counted
    assert abs(rows.loc["mcore-ci-tp2-pp2-fp8-tp-overlap", "error"]) < 0.03
    # the grouped-GEMM MoE cases (-3.5 % and -9.8 % without the workspaces) and the SequentialMLP ones, which have none
    assert abs(rows.loc["mcore-ci-moe-tp2-ep4", "error"]) < 0.01
    assert -0.07 < rows.loc["mcore-ci-moe-ep8-distopt", "error"] < -0.05
    for key in ("mcore-ci-moe-local-tp2-pp2-ep2", "mcore-ci-moe-tp2-ep2-distopt", "mcore-ci-moe-tp2-cp2-pp2-ep2"):
        assert memory_validation.params_of(next(r for r in memory_validation.data()["rows"] if r["key"] == key)
                                           ).grouped_gemm is False
        assert -0.05 < rows.loc[key, "error"] < -0.035


def test_torchtitan_fsdp_runs_within_three_percent(result):
    # torchtitan's Llama 3.1 8B / 70B benchmarks (reserved memory): FSDP, torch.compile, Float8, context parallel
    rows = result.matched.set_index("key").loc[["tt24-t1-compile", "tt24-t1-compile-fp8", "tt24-t3-compile",
                                                 "tt24-t3-compile-fp8", "tt24-t2-fsdp8-cp1", "tt24-t2-fsdp1-cp8"]]
    assert np.abs(rows["error"]).max() < 0.031


def test_tensor_parallel_torchtitan_runs_count_the_vocabulary_parallel_loss(result):
    # torchtitan's pull-request runs with TP (Qwen-shaped, loss_parallel): DTensor's vocabulary-parallel backward
    # holds 16 bytes per local logit at its peak; counted at the non-parallel 12 they read 10-15 % low
    rows = result.matched.set_index("key").loc[["tt-pr-Q1", "tt-pr-Q2", "tt-pr-Q3", "tt-pr-Q7"]]
    assert np.abs(rows["error"]).max() < 0.04


def test_zero_bubble_tables_keep_their_order_and_size(result):
    # Qi et al.'s Table 4: ZB-2p holds about twice 1F1B's activations; the schedules' simulated micro-batches in
    # flight and Megatron's bytes (fp16 weights and 16-bit gradients under --fp16) give each within 6 %
    zb = _rows(result, "zb-")
    assert len(zb) == 28 and np.abs(zb["error"]).max() < 0.06 and abs(zb["error"].mean()) < 0.02
    for size in ("1p5b", "6p2b", "14p6b", "28p3b"):
        one, two = zb.loc[f"zb-t4-{size}-1f1b"], zb.loc[f"zb-t4-{size}-zb-2p"]
        assert two["measured_bytes"] > one["measured_bytes"] and two["predicted_bytes"] > one["predicted_bytes"]


def test_unmatched_rows_say_why(result):
    unmatched = result.rows[result.rows["unmatched"].notna()]
    assert len(unmatched) >= 10 and unmatched["unmatched"].map(lambda w: isinstance(w, str) and len(w) > 20).all()


def test_docs_table_and_stored_margins_are_current(result):
    doc = memory_table.DOC.read_text(encoding="utf-8")  # docs/memory.md
    assert memory_table.block(result) in doc, "run python scripts/memory_table.py --write"
    stored = (ROOT / "assets" / memory_accuracy.FILE).read_text(encoding="utf-8")
    assert memory_accuracy.text(memory_accuracy.measure(result)) == stored, "run python scripts/memory_table.py --write"


def test_the_recommendation_reads_its_frameworks_margin():
    acc = memory_accuracy.load()
    words = acc.words("megatron")[0]
    m = acc.by_framework["megatron"]
    assert f"{100 * m.mean:.1f} % off on average" in words and "Megatron-LM" in words
    assert "textbook" in acc.words("textbook")[0]


def test_the_allocator_terms():
    # allocated = the larger of the activation peak and the optimizer step; reserved adds the fitted share of the
    # moment that sets it, and the side pools at the activation peak; the context and communicators lie outside
    share = terms.reserve_share("torch")
    got = per_gpu.device_extras("torch", 10e9, 12e9, 1e9, n_groups=2)
    assert got["step"] == pytest.approx(2e9)
    assert got["reserve"] == pytest.approx(max(10e9 * (1 + share) + 1e9, 12e9 * (1 + share)) - 12e9)
    assert got["outside"] == pytest.approx(terms.CONTEXT + 2 * terms.NCCL_PER_GROUP)
    textbook = per_gpu.device_extras("textbook", 10e9, 12e9, 1e9, n_groups=2)
    assert textbook["reserve"] == pytest.approx(0.0) and textbook["outside"] == 0.0


def test_the_optimizer_steps_own_bytes():
    # DeepSpeed keeps every group's fp32 gradient partition until its step ends (4 bytes each, all groups together)
    shards = ((8e9, 4), (1.8e9, 1))  # dense 8 B sharded over 4 ranks (ZeRO-1), experts 1.8 B at expert-dp 1
    assert terms.step_extra("deepspeed", shards, 1) == pytest.approx(4 * (2e9 + 1.8e9))
    assert terms.step_extra("megatron", shards, 1) == 0.0 and terms.step_extra("torch", shards, 1) == 0.0
    # Transformer Engine's FusedAdam under Megatron's precision-aware optimizer copies both bf16 moments of one
    # parameter group to fp32: 8 bytes per parameter against the 6 it stores (bf16 moments, int16 master
    # remainders), for the larger optimizer on the GPU; none where the optimizer is offloaded, none in fp32
    stored = terms.state_kwargs("megatron", states.ADAM_MIXED, False, 1.0, "bf16", "bf16")["k"]
    assert stored == 6.0
    dense, experts = 6.0 * 2e9, 6.0 * 1.8e9  # their optimizers' bytes on the GPU
    assert terms.moment_copies("megatron", "bf16", 12.0, stored, (dense, experts)) == pytest.approx(8 * 2e9)
    assert terms.moment_copies("megatron", "bf16", 12.0, stored, (0.0, 0.0)) == 0.0  # offloaded to the CPU
    assert terms.moment_copies("megatron", "fp32", 12.0, 12.0, (dense, experts)) == 0.0  # fused Adam in place
    assert terms.moment_copies("torch", "bf16", 12.0, stored, (dense, experts)) == 0.0


def test_moonlight_peaks_in_its_optimizer_step(result):
    # 22.3 GB of states plus the expert optimizer's 1.8 B parameters' moments copied to fp32 (14.4 GB) and the
    # buffers (Transformer Engine's grouped-GEMM workspaces among them): 36.9 GB, 36.6 measured (allocated); the
    # activation peak (31.6 GB) is below it
    rows = result.rows.set_index("key")
    row = rows.loc["bridge-moonlight-none"]
    assert row["predicted_bytes"] / 1e9 == pytest.approx(36.93, abs=0.02)
    assert row["states_on_gpu_bytes"] + row["activation_bytes"] + row["buffer_bytes"] < row["predicted_bytes"] - 4e9
    assert abs(row["error"]) < 0.01


def test_the_command_line_prints_the_validation():
    out = subprocess.run([sys.executable, "-m", "core", "validate", "--memory", "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["summary"]["calibration"]["rows"] == 6 and len(doc["rows"]) == len(memory_validation.data()["rows"])


def test_each_rows_settings_are_what_the_planner_runs():
    # The `settings` block records what the run configured; every setting the planner models must be what the row's
    # `software` (or its framework's default) runs, so a switch the run set cannot be silently timed as another
    # (the MLA + MTP case sat at -9.4 % with its native fused loss recorded here and not in `software`).
    defaults = {"megatron": {"fp16": "fp16", "bf16": "fp32", "fp8": "fp32"}, "torch": {}, "deepspeed": {}}
    for row in memory_validation.data()["rows"]:
        if row.get("unmatched"):
            continue
        st, sw, key = row.get("settings", {}), row.get("software", {}), row["key"]
        if "grad_dtype" in st:
            runs = sw.get("grad_dtype") or defaults[row["framework"]].get(row["precision"], "fp32")
            assert runs == st["grad_dtype"], key
        if "loss" in st:
            runs = sw.get("loss", "auto")
            want = {"default": {"auto", "upcast", "compiled"}, "fused": {"fused", "native"},
                    "compiled": {"compiled"}}.get(st["loss"], {"upcast"})  # a kernel not modelled runs upcast
            assert runs in want, (key, st["loss"], runs)
        if "moe_dispatcher" in st:
            assert sw.get("moe_dispatcher", "alltoall") == st["moe_dispatcher"], key
        if "optimizer_state_dtype" in st:
            assert sw.get("optimizer_dtype", "fp32") == st["optimizer_state_dtype"], key
        if "attention" in st:
            assert row["model"].get("flash", False) == (st["attention"] == "flash"), key


def test_torchtune_single_gpu_rows_are_pure_bf16():
    # torchtune builds Llama 3.2 3B in bf16 and steps it with no fp32 master; its README's packed rows (eager and
    # compiled layers, the loss eager in both: compile_loss's result is dropped) read within 0.5 %; counted with an
    # fp32 master and fp32 moments (12 bytes per parameter more, 38 GB) the runs would not fit the A100 they ran on
    rows = {r["key"]: r for r in memory_validation.data()["rows"] if r["source"] == "torchtune_readme"}
    assert set(rows) == {"tune-3b-packed", "tune-3b-packed-compile"}
    for key, err in (("tune-3b-packed", -0.005), ("tune-3b-packed-compile", -0.001)):
        got = memory_validation.memory_row(rows[key])
        assert got["error"] == pytest.approx(err, abs=0.003) and got["kind"] == "active", key
        mixed = dict(rows[key], software={**rows[key]["software"], "optimizer_dtype": "fp32"})
        assert memory_validation.memory_row(mixed)["unmatched"].startswith("does not fit")
