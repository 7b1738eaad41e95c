"""DeepSpeed as the referee of the DeepSpeed exports, on the CPU in one process (gloo).

    python tests/engines/deepspeed_worker.py IN.json OUT.json

IN lists exported configs with the row's data-parallel size d and whether the row is pipelined. Each config goes
through deepspeed.runtime.config.DeepSpeedConfig with an mpu reporting d as the data-parallel world size (its batch
checks, its pydantic sections). Pipelined configs are also handed to DeepSpeed's PipelineEngine (deepspeed.initialize
with a two-layer PipelineModule on one stage), the engine whose asserts decide what runs; ZeRO-2 and ZeRO-3 are tried
there too, to confirm the engine still refuses what the exporter never writes.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import traceback


def main() -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("DS_TEST_PORT", "29617"), RANK="0",
                      WORLD_SIZE="1", LOCAL_RANK="0")
    import deepspeed
    import torch
    from deepspeed.pipe import PipelineModule
    from deepspeed.runtime.config import DeepSpeedConfig

    deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)

    class DataParallel:
        """The mpu DeepSpeedConfig asks for the data-parallel world size (the row's d)."""

        def __init__(self, d: int) -> None:
            self.d = d

        def get_data_parallel_world_size(self) -> int:
            return self.d

    cases = json.load(open(sys.argv[1], encoding="utf-8"))
    out = {"deepspeed": deepspeed.__version__, "configs": [], "engine": []}
    for case in cases:
        try:
            c = DeepSpeedConfig(copy.deepcopy(case["config"]), mpu=DataParallel(case["d"]))
            out["configs"].append({"ok": True, "stage": int(c.zero_optimization_stage), "world": c.world_size,
                                   "batch": c.train_batch_size, "micro": c.train_micro_batch_size_per_gpu,
                                   "accumulation": c.gradient_accumulation_steps})
        except Exception as exc:  # noqa: BLE001  (the test reports DeepSpeed's own message)
            out["configs"].append({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]})

    def engine(config: dict) -> str:
        cfg = copy.deepcopy(config)
        cfg["train_batch_size"] = cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"]
        torch.manual_seed(0)
        model = PipelineModule(layers=[torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)], num_stages=1,
                               loss_fn=torch.nn.MSELoss())
        try:
            eng, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg,
                                           optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3))
            return type(eng).__name__
        except AssertionError as exc:
            return f"refused: {exc}"
        except Exception:  # noqa: BLE001
            return "error: " + traceback.format_exc(limit=2)[-400:]

    for case in cases:
        if case["pipelined"] and case.get("engine"):
            out["engine"].append({"index": cases.index(case), "result": engine(case["config"])})
    probe = next(c["config"] for c in cases if c["pipelined"] and c.get("engine"))
    for stage in (2, 3):
        cfg = copy.deepcopy(probe)
        cfg["zero_optimization"] = {"stage": stage}
        out["engine"].append({"index": None, "stage": stage, "result": engine(cfg)})
    json.dump(out, open(sys.argv[2], "w", encoding="utf-8"), indent=1)


if __name__ == "__main__":
    main()
