"""A Hugging Face hub id as a model: the planner's preset when there is one, else a published shape the importer
knows (Llama 3.2 1B / 3B and the Qwen3 sizes, as torchtitan's flavors spell them), so a YAML that names its model
only by hub id still reads into a row."""

from __future__ import annotations

import re

from core.configs import model as model_of
from core.configs.account import Reading
from core.configs.bridge_recipe import hub_preset
from core.configs.torchtitan_flavors import flavor

# hub id (lower case, -instruct / -base / -hf stripped) -> torchtitan flavor (family, size)
SHAPES = ((r"meta-llama/(?:meta-)?llama-3\.2-(1|3)b", "llama3", "{}B"),
          (r"qwen/qwen3-(0\.6|1\.7|4|8|14)b", "qwen3", "{}B"))


def read(hub: str, name: str, r: Reading) -> bool:
    """Puts the model a hub id names into `r` (a preset, or the shape as a custom model); False when unknown."""
    key = hub_preset(hub) or hub_preset("/".join(hub.rstrip("/").split("/")[-2:]))
    if key:
        r.read(name, hub, {"model": key}, f"model = {key} (the Hugging Face model's architecture)")
        return True
    bare = re.sub(r"-(instruct|hf|base)$", "", "/".join(hub.lower().rstrip("/").split("/")[-2:]))
    for pattern, family, size in SHAPES:
        m = re.fullmatch(pattern, bare)
        if m:
            arch, src = flavor(family, size.format(m.group(1)))
            r.read(name, hub, {}, f"the published {family} {size.format(m.group(1))} shape ({src})")
            model_of.settle(r, arch)
            return True
    return False
