"""What a config file said, field by field, and what the planner made of it.

Every field of a file lands in exactly one of four kinds, so a user can see that nothing was dropped silently:
read (it sets a planner input), no effect (read, and it changes neither memory nor step time: paths, learning
rates, logging), unsupported (it would change the row but the planner cannot model it, or cannot parse it), and,
for planner inputs the file does not give, assumed (with the default taken and why).
"""

from __future__ import annotations

import ast
import functools
import json
import reprlib
from dataclasses import dataclass, field

import yaml

from core.errors import InputError

KINDS = ("read", "no effect", "unsupported", "assumed")
ADAPTERS = ("fine-tuning (frozen base weights, small trainable adapters) is not modelled: the planner counts "
            "full-parameter training")  # what every reader says of a LoRA / QLoRA / frozen run
MAX_FIELDS = 4000  # a config with more fields than this is not a training config (bounded work and output)
MAX_PY_LINES = 20_000  # Python read as a syntax tree: a NeMo recipe is ~400 lines and ~15 KB, the planner's script
MAX_PY_BYTES = 300_000  # ~30 KB; parsing 300 KB of dense literals takes ~0.3 s here, 800 KB ~4 s (not linear)


@dataclass(frozen=True)
class Entry:
    kind: str  # one of KINDS
    name: str  # as the file spells it (a flag, a dotted key), or the planner input for "assumed"
    value: str  # as written, shortened
    meaning: str  # what it became ("t = 8"), or why it has no effect / is unsupported / was assumed
    source: str = ""  # which file (several may be checked together)


@dataclass
class Reading:
    """One or more files read into planner inputs (core.params.planner PLAN keys, as strings) plus the account."""

    kind: str  # "megatron", "torchtitan", "deepspeed", "huggingface", "nemo", "torch-script", or a "+" join
    framework: str  # whose bytes the row counts (core.frameworks key) or "" when the file does not say
    raw: dict[str, str] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    source: str = ""
    accumulation: int = 1  # micro-batches per replica and step, where the file says so but not the global batch

    def _add(self, kind: str, name: str, value: object, meaning: str) -> None:
        if len(self.entries) >= MAX_FIELDS:
            raise InputError(f"{self.source or 'config'}: more than {MAX_FIELDS:,} fields; not a training config")
        self.entries.append(Entry(kind, str(name)[:80], _short(value), meaning, self.source))

    def read(self, name: str, value: object, sets: dict[str, object], meaning: str = "") -> None:
        """The field sets planner inputs (`sets`: PLAN key -> value)."""
        for key, v in sets.items():
            self.raw[key] = _text(v)
        said = meaning or ", ".join(f"{k} = {_text(v)}" for k, v in sets.items())
        self._add("read", name, value, said)

    def no_effect(self, name: str, value: object, why: str) -> None:
        self._add("no effect", name, value, why)

    def unsupported(self, name: str, value: object, why: str) -> None:
        self._add("unsupported", name, value, why)

    def assume(self, key: str, value: object, why: str) -> None:
        """A planner input the file does not give: the default taken, and why."""
        self.raw[key] = _text(value)
        self._add("assumed", key, value, why)

    def has(self, key: str) -> bool:
        return key in self.raw

    def counts(self) -> dict[str, int]:
        return {k: sum(e.kind == k for e in self.entries) for k in KINDS}


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


_BRIEF = reprlib.Repr()  # a container shown in the account is cut short: a YAML alias tree can be exponential
_BRIEF.maxlevel, _BRIEF.maxlist, _BRIEF.maxdict, _BRIEF.maxstring, _BRIEF.maxother = 3, 8, 8, 80, 80


def _short(value: object, limit: int = 60) -> str:
    brief = _BRIEF.repr(value) if isinstance(value, (list, dict, tuple, set)) else _text(value)
    text = brief.replace("\x00", "$")  # a variable the script leaves to launch (core.configs.shell) reads $NAME
    return text if len(text) <= limit else text[: limit - 3] + "..."


def json_object(text: str, source: str) -> dict:
    """A config file's JSON object, or one line saying why it is not one."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise InputError(f"{source}: a JSON config must be an object")
    return dict(data)


@functools.lru_cache(maxsize=4)
def _parsed(text: str) -> tuple[object, str]:
    """(data, "") or (None, why it does not parse): a failure is kept too, so a bad file is parsed once."""
    try:
        return yaml.safe_load(text), ""
    except yaml.YAMLError as exc:
        return None, f"not valid YAML ({str(exc).splitlines()[0][:80]})"
    except (RecursionError, MemoryError):
        return None, "nested too deeply; not a training config"


def yaml_data(text: str, source: str) -> object:
    """A YAML file's data, parsed once however many readers look at it (detection, a command's pairing, the
    reader): callers copy what they change. One line when it is not YAML or nests past the parser's depth."""
    data, why = _parsed(text)
    if why:
        raise InputError(f"{source}: {why}")
    return data


def yaml_object(text: str, source: str, fits, kind: str) -> dict:
    """A YAML config's mapping (a copy of its top level) when `fits(data)` says it is a `kind`, or one line saying
    why it is not."""
    data = yaml_data(text, source)
    if not fits(data):
        raise InputError(f"{source}: not {kind}")
    return dict(data)


def python_tree(text: str, source: str) -> ast.Module:
    """Python's syntax tree of a file (never run), or one line saying why there is none: too long, not Python, or
    nested past what the parser holds (CPython raises MemoryError or RecursionError there, not SyntaxError)."""
    if text.count("\n") > MAX_PY_LINES or len(text) > MAX_PY_BYTES:
        raise InputError(f"{source}: more than {MAX_PY_LINES:,} lines or {MAX_PY_BYTES // 1000:,} KB of Python; not "
                         "a training recipe or script")
    try:
        return ast.parse(text)
    except SyntaxError as exc:
        raise InputError(f"{source}: not valid Python ({exc.msg}, line {exc.lineno})") from None
    except (MemoryError, RecursionError, ValueError):
        raise InputError(f"{source}: nested too deeply (or a null byte) for a Python file") from None
