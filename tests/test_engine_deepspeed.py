"""DeepSpeed (the installed release, on the CPU) accepts every DeepSpeed config the planner can export, and its
pipeline engine accepts every pipelined one while still refusing what the exporter never writes (ZeRO-2/3 with
pipeline parallelism). tests/engines/deepspeed_worker.py does the DeepSpeed side in one subprocess."""

import itertools
import json
import os
import subprocess
import sys

import pytest

from core.model import presets
from core.params.planner import PlannerParams
from core.planner import plan as planner
from core.planner.export_deepspeed import deepspeed_export
from core.planner.layout import Layout
from tests import export_readers as read
from tests.engine_support import ENGINES, ROOT, need


def every_shape() -> list[Layout]:
    """One layout per path through the DeepSpeed exporter: ZeRO stage x offload x recompute x (t, p) x precision."""
    llama, gpt3 = presets.model("llama3-70b"), presets.model("gpt3-175b")
    out = []
    for zero, offload, recompute, (t, p), (gpu, precision) in itertools.product(
            range(4), ("none", "optimizer", "optimizer+params"), ("none", "full"), ((1, 1), (8, 1), (1, 4), (8, 4)),
            (("h100-80gb", "bf16"), ("v100-32gb", "fp16"))):
        lay = dict(model=llama if gpu == "h100-80gb" else gpt3, gpu=presets.gpu(gpu), t=t, p=p, d=4, global_batch=64,
                   micro_batch_size=2, zero_stage=zero, offload=offload, recompute=recompute, precision=precision)
        try:
            out.append(Layout(**lay))
        except Exception:  # noqa: BLE001  (offload without ZeRO and the like are not layouts)
            continue
    return out


def planned() -> list:
    """Rows of --framework deepspeed plans (a bf16 and an fp16 cluster)."""
    rows = []
    for q in (PlannerParams(framework="deepspeed"),
              PlannerParams(model="llama3-70b", gpu="h100-80gb", gpus=64, batch=512, framework="deepspeed",
                            offload="all"),
              PlannerParams(model="gpt3-175b", gpu="v100-32gb", gpus=512, batch=512, framework="deepspeed")):
        r = planner.plan(q)
        rows += [r.layout(row) for _, row in r.feasible.head(60).iterrows()]
    return rows


@pytest.fixture(scope="module")
def referee(tmp_path_factory):
    need("deepspeed")
    layouts = every_shape() + planned()
    cases, kept, shapes = [], [], set()
    for lay in layouts:
        art = deepspeed_export(lay)
        if art.refused:
            continue
        cfg = json.loads(art.text)
        shape = json.dumps({k: v for k, v in cfg.items() if "batch" not in k and "accumulation" not in k})
        pipelined = lay.p > 1
        engine = pipelined and lay.offload == "none" and lay.precision == "bf16" and shape not in shapes
        shapes.add(shape if engine else "")
        cases.append({"config": cfg, "d": lay.d, "pipelined": pipelined, "engine": engine})
        kept.append((lay, art))
    tmp = tmp_path_factory.mktemp("deepspeed")
    (tmp / "in.json").write_text(json.dumps(cases), encoding="utf-8")
    done = subprocess.run([sys.executable, str(ENGINES / "deepspeed_worker.py"), str(tmp / "in.json"),
                           str(tmp / "out.json")], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "DS_BUILD_OPS": "0"})
    assert done.returncode == 0, done.stderr[-4000:]
    return kept, cases, json.loads((tmp / "out.json").read_text(encoding="utf-8"))


def test_every_exported_config_is_accepted_by_deepspeeds_config_class(referee):
    kept, cases, out = referee
    assert len(kept) > 100 and len(out["configs"]) == len(kept)
    for (lay, art), got in zip(kept, out["configs"], strict=True):
        assert got["ok"], (got.get("error"), art.text)
        assert (got["stage"], got["world"], got["batch"]) == (lay.zero_stage, lay.d, lay.global_batch)
        assert (got["micro"], got["accumulation"]) == (lay.micro_batch_size, lay.grad_accum_steps)
        assert read.deepspeed(art.text, art.setup) == read.of_layout(lay)


def test_the_pipeline_engine_takes_every_pipelined_export_and_refuses_zero2_and_3(referee):
    kept, cases, out = referee
    tried = [e for e in out["engine"] if e["index"] is not None]
    assert len(tried) >= 4 and all(e["result"] == "PipelineEngine" for e in tried), tried[:3]
    refused = {e["stage"]: e["result"] for e in out["engine"] if e["index"] is None}
    for stage in (2, 3):
        assert refused[stage].startswith("refused: ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism")
    assert all(case["config"]["zero_optimization"]["stage"] <= 1 for case in cases if case["pipelined"])
