"""The preset files in assets/ as plain data: their entries and keys, read once.

Choice inputs (`model`, `gpu`) need the preset keys, and the validated ModelConfig / GpuSpec objects need
the parameter tables here in core.params; reading the raw files at this level lets both happen without an
import from core.params upward (core.model.presets builds the validated objects from these entries).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

ASSETS = Path(__file__).resolve().parents[2] / "assets"


@lru_cache(maxsize=8)
def document(filename: str) -> dict[str, Any]:
    """The whole of assets/<filename> as read (the calibration and validation data keep more than a list)."""
    return json.loads((ASSETS / filename).read_text(encoding="utf-8"))


@lru_cache(maxsize=8)
def entries(filename: str, list_key: str) -> tuple[dict[str, Any], ...]:
    """The list `list_key` of assets/<filename>, as read (core.model.presets validates each entry)."""
    data = json.loads((ASSETS / filename).read_text(encoding="utf-8"))
    return tuple(data[list_key])


def model_keys() -> tuple[str, ...]:
    return tuple(e["key"] for e in entries("models.json", "models"))


def gpu_keys() -> tuple[str, ...]:
    return tuple(e["key"] for e in entries("gpus.json", "gpus"))


def calibration_families() -> tuple[str, ...]:
    """The GPU families with a calibration record in assets/efficiency.json (core.cost.calibration reads them)."""
    return tuple(dict.fromkeys(e["family"] for e in document("efficiency.json")["calibrations"].values()))
