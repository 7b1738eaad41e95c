"""One memory truth (issue 23 item 2): a planner row's link opens the ZeRO page on the row's bytes per GPU, made of
the same parts. Checked through the pages' own code paths, live (the planner's numbers may move; the two pages must
move together): the Planner page's cached view and the link its table shows (ui.planner.cache), then the ZeRO page
run by AppTest from that link's query, its headline metric and its per-stage table.
"""

from __future__ import annotations

import json
import subprocess
import sys
from urllib.parse import parse_qsl, urlsplit

import pytest
from streamlit.testing.v1 import AppTest

from core.params.planner import PlannerParams
from tests.conftest import ROOT
from ui.planner import cache as cp

ZERO_PAGE = str(ROOT / "pages" / "zero.py")
STAGES = ("DP", "ZeRO-1", "ZeRO-2", "ZeRO-3")
CUSTOM_MOE = dict(model="custom", layers=24, hidden=2048, heads=16, kv_heads=4, ffn=5632, vocab=32000, mlp="swiglu",
                  tied=False, experts=16, top_k=2, shared_experts=1, expert_ffn=1408, dense_layers=1, flash=True,
                  mtp_layers=1)  # with a multi-token prediction depth on the last stage
QUESTIONS = {  # dense, GQA, MoE (two kinds), long context (CP), FP8, offload, custom dense, custom MoE with MTP, ends
    "gpt3-175b": PlannerParams(gpus=256, batch=512, mb_sizes=(1, 2)),
    "llama3-70b": PlannerParams(model="llama3-70b", gpus=64, batch=512),
    "mixtral": PlannerParams(model="mixtral-8x7b", gpus=64, batch=512, mb_sizes=(1, 2)),
    "deepseek-v3": PlannerParams(model="deepseek-v3", gpus=1024, batch=2048, mb_sizes=(1,)),
    "llama3-405b-128k": PlannerParams(model="llama3-405b", seq=131072, gpus=16384, batch=128, mb_sizes=(1,)),
    "llama3-405b-128k-ag": PlannerParams(model="llama3-405b", seq=131072, gpus=16384, batch=128, mb_sizes=(1,),
                                         cp_comm="all-gather"),  # Llama 3's exchange: the gathered K/V's buffers
    "llama3-70b-fp8": PlannerParams(model="llama3-70b", gpus=64, batch=512, precision="fp8"),
    "offload": PlannerParams(model="llama3-70b", gpus=8, batch=64, offload="all", zero="3", mb_sizes=(1,)),
    # GPT-J's parallel block with per-head q and k norms: the ZeRO page's custom model keeps both
    "custom-dense": PlannerParams(model="custom", layers=32, hidden=4096, heads=32, ffn=16384, vocab=50000,
                                  parallel=True, qk_norm=True, gpus=32, batch=256, mb_sizes=(1,)),
    "custom-moe": PlannerParams(gpus=32, batch=256, mb_sizes=(1,), **CUSTOM_MOE),
    # Moonlight's shape: multi-head latent attention (kv latent 512, no query latent) with fine-grained experts
    "custom-mla": PlannerParams(model="custom", layers=27, hidden=2048, heads=16, ffn=11264, vocab=163840,
                                mlp="swiglu", tied=False, experts=64, top_k=6, shared_experts=2, expert_ffn=1408,
                                dense_layers=1, flash="true", kv_lora_rank=512, gpus=16, batch=128, mb_sizes=(1,)),
    # the embedding and the loss counting as layers of the split: at p = 32 the end stages hold 2 of 80 layers, the
    # others 3, so a middle device (3 layers x 31 micro-batches) holds more than the first (2 x 32)
    "llama3-70b-ends": PlannerParams(model="llama3-70b", gpus=256, batch=512, fix_t=8, fix_p=32, mb_sizes=(1,),
                                     ends_in_split=True),
    # ... and interleaved: 82 slots over 8 x 4 stages, 2 layers on the end stages and 3 on the others, so the end
    # devices' in-flight counts are weighted by their chunks' layers (core.pipeline.timeline.weighted_ends)
    "llama3-70b-ends-vp": PlannerParams(model="llama3-70b", gpus=128, batch=512, fix_t=8, fix_p=8,
                                        schedule="interleaved", v=4, mb_sizes=(1,), ends_in_split=True),
    # hybrid sharding: ZeRO within 8 of the 32 data-parallel ranks, 4 copies (the ZeRO page opens at N_d = 8)
    "llama3-70b-hsdp": PlannerParams(model="llama3-70b", gpus=256, batch=512, fix_t=8, fix_replicate=4,
                                     framework="torch", mb_sizes=(1, 2)),
    # full recompute on the first 5 of each stage's 20 layers (the ZeRO page opens with the same N)
    "llama3-70b-partial": PlannerParams(model="llama3-70b", gpus=64, batch=512, fix_t=8, fix_p=4, recompute="full",
                                        recompute_layers=5, mb_sizes=(1, 2)),
    "llama3-70b-8-layers": PlannerParams(model="llama3-70b", depth=8, gpus=8, batch=16, mb_sizes=(1,)),
    "mixtral-hsdp": PlannerParams(model="mixtral-8x7b", gpus=64, batch=512, fix_replicate=2, fix_ep=8, zero="3",
                                  framework="torch", mb_sizes=(1,)),
}
ROWS = 3  # per question: the best feasible rows, of different ZeRO stages where there are


def rows_of(view) -> list:
    """Up to ROWS feasible rows: the best, then one of each other ZeRO stage, offload and resharding, then the next
    best (so each question covers several kinds of row, and always the one the page recommends)."""
    f = view.top_feasible
    kinds = list(dict.fromkeys(zip(f["zero_stage"], f["offload"], f["reshard"], strict=True)))
    picked = [f[(f["zero_stage"] == z) & (f["offload"] == o) & (f["reshard"] == r)].iloc[0] for z, o, r in kinds]
    rest = [r for _, r in f.head(ROWS).iterrows()]
    out, seen = [], set()
    for r in picked + rest:
        key = (r["t"], r["p"], r["d"], r["cp"], r["ep"], r["zero_stage"], r["schedule"], r["offload"], r["reshard"])
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out[:ROWS]


def zero_page_at(link: str) -> AppTest:
    at = AppTest.from_file(ZERO_PAGE, default_timeout=60)
    at.query_params.update(dict(parse_qsl(urlsplit(link).query)))
    at.run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def gb(text: str) -> float:
    value, unit = text.split()
    assert unit == "GB"
    return float(value.replace(",", ""))


CASES = [(name, i) for name in QUESTIONS for i in range(ROWS)]


@pytest.fixture(scope="module")
def plans():
    return {name: cp.plan_view(q) for name, q in QUESTIONS.items()}


@pytest.mark.parametrize("name,i", CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_the_zero_page_a_row_opens_shows_the_rows_memory_and_parts(plans, name, i):
    view = plans[name]
    rows = rows_of(view)
    if i >= len(rows):
        pytest.skip(f"{name}: only {len(rows)} distinct feasible rows")
    row = rows[i]
    link = cp.with_links(row.to_frame().T.infer_objects(), view.zero_link_base)["zero_link"].iloc[0]  # the table's
    at = zero_page_at(link)
    stage = STAGES[int(row["zero_stage"])]
    shown = {m.label: m.value for m in at.metric}[f"{stage} per GPU"]
    assert gb(shown) == pytest.approx(row["memory_bytes"] / 1e9, rel=0.01, abs=0.006), (name, link)
    table = next(d.value for d in at.dataframe if d.value.columns[0] == "stage").set_index("stage").loc[stage]
    assert table["total on GPU [GB]"] == pytest.approx(row["memory_bytes"] / 1e9, rel=1e-6)
    parts = ("params [GB]", "grads [GB]", "optimizer [GB]", "expert states [GB]")
    states = sum(float(table[c]) for c in parts if c in table)
    assert states + float(table.get("streamed layer [GB]", 0.0)) + float(table.get("ZeRO-3 gathered [GB]", 0.0)) \
        == pytest.approx((row["states_on_gpu_bytes"] + row["zero3_working_bytes"]) / 1e9, rel=1e-6)
    assert table["activations [GB]"] == pytest.approx(row["activation_bytes"] / 1e9, rel=1e-6)


def test_the_cases_cover_every_kind_of_model_and_at_least_20_rows(plans):
    counted = sum(min(ROWS, len(rows_of(v))) for v in plans.values())
    assert counted >= 20
    kinds = {name: v.top_feasible.iloc[0] for name, v in plans.items()}
    assert kinds["llama3-405b-128k"]["cp"] > 1 and kinds["mixtral"]["ep"] >= 1
    assert any(r["ep"] > 1 for v in (plans["mixtral"], plans["deepseek-v3"], plans["custom-moe"])
               for r in rows_of(v))
    assert any(r["offload"] != "none" for r in rows_of(plans["offload"]))
    assert any(not r["reshard"] for v in plans.values() for r in rows_of(v))  # ZeRO-3 kept gathered (FSDP2)
    from core.planner import plan as planner
    assert planner.plan(QUESTIONS["llama3-70b-ends"]).best()["worst_stage"] == "middle"  # a middle device fullest
    assert all(r["replicate"] > 1 for v in (plans["llama3-70b-hsdp"], plans["mixtral-hsdp"]) for r in rows_of(v)
               if r["zero_stage"] >= 1)
    assert any(r["replicate"] == 4 for r in rows_of(plans["llama3-70b-hsdp"]))


@pytest.mark.parametrize("name", ["mixtral", "llama3-70b", "custom-moe", "custom-mla", "llama3-70b-ends",
                                  "mixtral-hsdp", "llama3-70b-partial"])
def test_the_command_line_prints_the_same_bytes_per_gpu_from_the_same_inputs(plans, name):
    # python -m core zero with the link's inputs as flags (the page's keys are the CLI's options) and --act
    view = plans[name]
    row = rows_of(view)[0]
    link = cp.with_links(row.to_frame().T.infer_objects(), view.zero_link_base)["zero_link"].iloc[0]
    flags = []
    for key, value in parse_qsl(urlsplit(link).query):
        flags += [f"--{key.replace('_', '-')}", value]
    out = subprocess.run([sys.executable, "-m", "core", "zero", *flags, "--json"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)["per_gpu"][("dp", "zero1", "zero2", "zero3")[int(row["zero_stage"])]]
    assert got["total"] == pytest.approx(row["memory_bytes"], rel=1e-9)
    assert got["activations"] == pytest.approx(row["activation_bytes"], rel=1e-9)
