"""Write assets/megatron_flags.json: every option Megatron-LM's argument parser accepts at a pinned release.

    git clone https://github.com/NVIDIA/Megatron-LM && git -C Megatron-LM checkout core_v0.19.0
    PYTHONPATH=Megatron-LM python scripts/megatron_flags.py Megatron-LM core_v0.19.0 <commit>

Megatron builds most of its options from dataclasses (ArgumentGroupFactory), so the list is read from the parser
it builds (add_megatron_arguments), not from the text of arguments.py. Only the flag names are stored; no Megatron
code is copied. Modules that need a GPU toolchain to import (triton kernels) are replaced by empty stand-ins, and
Python 3.11 gets typing.override from typing_extensions; neither changes which options exist.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import json
import sys
import typing
from pathlib import Path
from unittest import mock

OUT = Path(__file__).resolve().parents[1] / "assets" / "megatron_flags.json"
STUBS = ("megatron.core.transformer.moe.ops.paged_stash",)  # imports triton at module level


class _Stub(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if any(name == s or name.startswith(s + ".") for s in STUBS):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = mock.MagicMock()
        module.__path__, module.__spec__, module.__name__ = [], spec, spec.name
        return module

    def exec_module(self, module) -> None:
        pass


def main() -> None:
    checkout, release, commit = sys.argv[1:4]
    sys.path.insert(0, checkout)
    sys.meta_path.insert(0, _Stub())
    if not hasattr(typing, "override"):
        import typing_extensions
        typing.override = typing_extensions.override
    from megatron.training.arguments import add_megatron_arguments

    parser = argparse.ArgumentParser(allow_abbrev=False)
    add_megatron_arguments(parser)
    flags = sorted({o for a in parser._actions for o in a.option_strings if o.startswith("--")})
    switches = sorted({o for a in parser._actions for o in a.option_strings
                       if o.startswith("--") and a.nargs == 0})
    choices = {o: [str(c) for c in a.choices] for a in parser._actions if a.choices
               for o in a.option_strings if o.startswith("--")}
    OUT.write_text(json.dumps({
        "release": release, "commit": commit,
        "source": f"NVIDIA/Megatron-LM {release} ({commit}): option strings of the parser built by "
                  "megatron.training.arguments.add_megatron_arguments, extracted by scripts/megatron_flags.py",
        "flags": flags, "switches": switches, "choices": dict(sorted(choices.items())),
    }, indent=1) + "\n", encoding="utf-8")
    print(f"{len(flags)} flags ({len(switches)} take no value) -> {OUT}")


if __name__ == "__main__":
    main()
