"""Full recompute on the first N layers of each stage only (Megatron-LM's --recompute-method block; torchtitan's
every-K-th block): the recomputed layers keep their inputs, the others everything, and the backward re-runs the
forward of those N only. Exact against the all-or-nothing modes, in memory and in time."""

import pytest

from core.configs.check import check
from core.cost import step_time
from core.cost.step_input import Layouts, Setting
from core.memory import activations as act
from core.params.planner import PlannerParams
from core.planner import frameworks
from core.planner import plan as planner

LLAMA70 = dict(model="llama3-70b", gpus=64, gpu="h100-80gb", batch=512, fix_t=8, fix_p=4, zero="1", schedule="1f1b",
               mb_sizes=(1,), sp="on", tp_comm_overlap="off")


def row(**kw):
    return planner.plan(PlannerParams(**{**LLAMA70, **kw})).frame.iloc[0]


def test_a_stage_keeps_the_recomputed_layers_inputs_and_the_others_everything():
    shape = act.Shape(8192, 1, 8192, 64, 8, True, "full", kv_heads=8, ffn=28672, mlp="swiglu", norm="rmsnorm")
    full, none = shape.per_layer(), shape.per_layer("none")
    got = act.stage_bytes(shape, 20, 4, first=False, last=False, layer_bytes=(full, none, 5))
    assert got["layers"] == pytest.approx((5 * full + 15 * none) * 4)
    assert got["recompute_buffer"] == pytest.approx(none - full)  # one recomputed layer rebuilt at a time
    every = act.stage_bytes(shape, 20, 4, first=False, last=False)
    assert every["layers"] == pytest.approx(20 * full * 4)


def test_memory_and_step_time_sit_between_the_two_modes_in_proportion():
    # Llama 3 70B on p = 4: 20 layers per stage; N = 5 recomputes a quarter of them
    full, none, part = row(recompute="full"), row(recompute="none"), row(recompute="full", recompute_layers=5)
    assert part["recompute_layers"] == 5 and full["recompute_layers"] == 0
    res = planner.plan(PlannerParams(**{**LLAMA70, "recompute": "full", "recompute_layers": 5}))
    s = Setting(res.model, res.gpu, res.assumptions, 64, 512, "bf16")
    tb = {n: float(step_time.stage_costs(s, Layouts(t=8, p=4, d=2, recompute=mode, sp=True,
                                                    recompute_layers=n)).tb)
          for n, mode in ((0, "none"), (5, "full"), (20, "full"), (99, "full"))}
    full_tb = float(step_time.stage_costs(s, Layouts(t=8, p=4, d=2, recompute="full", sp=True)).tb)
    # the backward re-runs the forward of 5 of the device's 20 layers: a quarter of full recompute's extra
    assert tb[5] == pytest.approx(tb[0] + 5 / 20 * (full_tb - tb[0]))
    assert tb[20] == pytest.approx(full_tb) and tb[99] == pytest.approx(full_tb)  # N >= the stage: every layer
    assert none["step_time_s"] < part["step_time_s"] < full["step_time_s"]
    assert full["activation_bytes"] < part["activation_bytes"] < none["activation_bytes"]


def test_who_runs_it():
    setting = frameworks.Setting(t=1, p=4, zero=1, schedule="1f1b", recompute="full", recompute_layers=5)
    runs = tuple(k for k, f in frameworks.TABLE.items() if not f.refusals(setting))
    assert runs == ("megatron", "torch")
    why = frameworks.framework("deepspeed").refusals(setting)
    assert "no full recompute of 5 layers per stage" in why[0] and "activation_checkpoint_interval" in why[0]


def test_megatrons_block_method_reads_back_and_torchtitans_every_kth_block_counts_the_same():
    r = row(recompute="full", recompute_layers=5)
    res = planner.plan(PlannerParams(**{**LLAMA70, "recompute": "full", "recompute_layers": 5}))
    text = " ".join(w for w in res.export("megatron", r).text.split() if w != "\\")
    assert "--recompute-granularity full --recompute-method block --recompute-num-layers 5" in text
    back = check([("train.sh", res.export("megatron", r).text)], {"gpu": "h100-80gb", "memory_framework": "megatron"})
    assert back.row["recompute_layers"] == 5 and back.row["memory_bytes"] == pytest.approx(r["memory_bytes"])
    toml = ('[model]\nname = "llama3"\nflavor = "70B"\n[training]\nlocal_batch_size = 1\nseq_len = 8192\n'
            '[parallelism]\ntensor_parallel_degree = 8\npipeline_parallel_degree = 4\ndata_parallel_shard_degree = 2\n'
            '[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "2"\n')
    titan = check([("t.toml", toml)], {"gpu": "h100-80gb"})
    assert (titan.row["recompute"], titan.row["recompute_layers"]) == ("full", 10)  # every 2nd of 20 per stage
