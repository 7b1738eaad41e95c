"""A launch script read as text, never run: variables, arrays and the one command that starts training.

Megatron-LM's and NeMo's example scripts keep their flags in shell variables and arrays (`GPT_MODEL_ARGS=( ... )`,
`torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py ${GPT_MODEL_ARGS[@]} ...`). This module expands `$NAME`,
`${NAME}`, `${NAME:-default}`, `${NAME[@]}` and integer `$(( ... ))` from assignments in the same file; anything
else (command substitution, positional arguments without a default, loops) stays unresolved and is reported, not
guessed.
"""

from __future__ import annotations

import ast
import operator
import re
import shlex
from dataclasses import dataclass, field

from core.errors import InputError

MAX_LINES = 20_000
MAX_LINE = 50_000  # characters handed to the tokeniser at once (real scripts: 3,215 at most, expanded); shlex
#                    reads ~5 us a character
_ASSIGN = re.compile(r"^(?:export\s+|declare\s+(?:-\w+\s+)?|local\s+)?([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)$", re.S)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*|[0-9]+)(?:(:?-)([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*|[0-9])")
_ARITH = re.compile(r"\$\(\(([^()]*)\)\)")
_ARRAY_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\[[@*]\]\}$")
_ARRAY_IN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\[[@*]\]\}")
# commands inside a string: split at ";" and at a line break, except one before a flag (a multi-line argument string,
# "$ARGS" expanded into `cmd="deepspeed pretrain_gpt.py $ARGS"; eval $cmd`, is one command)
_COMMANDS = re.compile(r";|\n(?!\s*-)")
UNRESOLVED = "\x00"  # marks a value built from something the file does not define


@dataclass
class Script:
    launcher: list[str] = field(default_factory=list)  # tokens before the Python script (torchrun and its flags)
    script: str = ""  # the .py file the command runs
    args: list[str] = field(default_factory=list)  # the script's arguments
    env: dict[str, str] = field(default_factory=dict)  # NAME=value prefixes of the command
    unresolved: list[str] = field(default_factory=list)  # variables the file does not define


def read(text: str) -> Script:
    """The training command of a shell script (InputError when there is none or the text cannot be tokenised)."""
    lines = _logical_lines(text)
    scalars: dict[str, str] = {}
    arrays: dict[str, list[str]] = {}
    out = Script()
    candidates: list[list[str]] = []
    branches = _Branches(out)
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line or line.startswith("#"):
            continue
        if len(line) > MAX_LINE:
            raise InputError(f"script: a line of more than {MAX_LINE:,} characters; not a launch script")
        if branches.control(line, lambda cond: _condition(cond, scalars, arrays, out)):
            continue
        if not branches.active:
            continue
        m = _ASSIGN.match(line)
        if m and m.group(3).startswith("("):
            parts = [m.group(3)[1:]]
            while not _closes(parts[-1]) and i < len(lines):  # each line looked at once
                parts.append(lines[i])
                i += 1
            body = "\n".join(parts).rstrip()
            body = body[:-1] if body.endswith(")") else body
            items = _tokens(body, scalars, arrays, out)
            arrays[m.group(1)] = (arrays.get(m.group(1), []) if m.group(2) else []) + items
            continue
        if m and not _has_command_after_assign(line):
            value = " ".join(_tokens(m.group(3), scalars, arrays, out, split_arrays=False))
            scalars[m.group(1)] = (scalars.get(m.group(1), "") if m.group(2) else "") + value
            candidates += [_tokens(part, scalars, arrays, out) for part in _COMMANDS.split(value) if ".py" in part]
            continue
        candidates.append(_tokens(line, scalars, arrays, out))
        for tok in candidates[-1]:  # bash -c "...": a command inside a string
            if " " in tok and ".py" in tok:
                candidates += [_tokens(part, scalars, arrays, out) for part in _COMMANDS.split(tok)]
    scored = [(_score(c), n, c) for n, c in enumerate(candidates) if _score(c)]
    if not scored:
        raise InputError("no training command found (expected a line running pretrain_*.py, torchrun or python)")
    tokens = list(max(scored)[2])
    while tokens and _ASSIGN.match(tokens[0]) and not tokens[0].startswith("--"):
        name, _, value = tokens.pop(0).partition("=")
        out.env[name] = value
    for j, tok in enumerate(tokens):
        if tok.endswith(".py"):
            out.launcher, out.script, out.args = tokens[:j], tok, tokens[j + 1:]
            break
    else:
        out.launcher, out.args = [], tokens
    return out


class _Branches:
    """if / elif / else / fi: a branch whose condition the file decides is followed; an undecidable one (a file
    test, a variable set at launch) is followed in its first branch, and said so."""

    def __init__(self, out: Script) -> None:
        self.stack: list[list[bool]] = []  # [taking now, some branch taken, parent active]
        self.out = out

    @property
    def active(self) -> bool:
        return all(level[0] for level in self.stack)

    def control(self, line: str, decide) -> bool:
        word = line.split(None, 1)[0].rstrip(";")
        if word in ("if", "elif"):
            cond = re.sub(r";?\s*then\s*$", "", line.split(None, 1)[1] if " " in line else "")
            if word == "if":
                result = decide(cond) if self.active else False
                if result is None:
                    self.out.unresolved.append(f"if {cond[:40]}")
                    result = True
                self.stack.append([bool(result), bool(result), self.active])
            elif self.stack:
                level = self.stack[-1]
                result = False if level[1] else decide(cond)
                result = bool(result) if result is not None else not level[1]
                level[0], level[1] = result, level[1] or result
            return True
        if word == "else" and self.stack:
            level = self.stack[-1]
            level[0], level[1] = not level[1], True
            return True
        if word == "fi" and self.stack:
            self.stack.pop()
            return True
        return word in ("then", "do", "done")


_TEST = re.compile(r"^(!\s+)?(?:\[\[?|test)\s+(.*?)\s*\]?\]$")


def _condition(cond: str, scalars: dict[str, str], arrays: dict[str, list[str]], out: Script) -> bool | None:
    """True / False for the tests a launch script uses on its own variables ([ A = B ], [[ A == B ]], -z, -n,
    !, ||, &&); None when the file cannot decide it (file tests, launch-time variables)."""
    results = []
    for ors in re.split(r"\s*\|\|\s*", cond.strip()):
        ands = []
        for part in re.split(r"\s*&&\s*", ors):
            m = _TEST.match(part.strip())
            if not m:
                return None
            probe = Script()
            words = _tokens(m.group(2), scalars, arrays, probe, split_arrays=False)
            if probe.unresolved or any(UNRESOLVED in w for w in words):
                return None
            negate = bool(m.group(1))
            if words and words[0] == "!":
                negate, words = not negate, words[1:]
            value = _test(words)
            if value is None:
                return None
            ands.append(value != negate)
        results.append(all(ands))
    return any(results)


def _test(words: list[str]) -> bool | None:
    if len(words) == 2 and words[0] in ("-z", "-n"):
        return (words[1] == "") == (words[0] == "-z")
    if len(words) == 1:
        return words[0] != ""
    if len(words) == 3:
        a, op, b = words
        if op in ("=", "=="):
            return a == b
        if op == "!=":
            return a != b
        ints = {"-eq": int.__eq__, "-ne": int.__ne__, "-gt": int.__gt__, "-lt": int.__lt__, "-ge": int.__ge__,
                "-le": int.__le__}
        if op in ints and a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
            return ints[op](int(a), int(b))
    return None


def _logical_lines(text: str) -> list[str]:
    """Lines with continuations joined, and a quoted string that spans lines kept in one line."""
    lines = re.sub(r"\\\r?\n", " ", text).splitlines()
    if len(lines) > MAX_LINES:
        raise InputError(f"script: more than {MAX_LINES:,} lines; not a launch script")
    out: list[str] = []
    pending: list[str] = []
    quote = ""
    for line in lines:  # the quote state is carried from line to line: each character is read once
        pending.append(line)
        quote = _quote_after(line, quote)
        if not quote or len(pending) > 2_000:
            out.append("\n".join(pending))
            pending, quote = [], ""
    if pending:
        out.append("\n".join(pending))
    return out


def _quote_after(line: str, quote: str) -> str:
    """The quote still open at the end of `line` ("" for none), given the one open at its start."""
    escaped = False
    for ch in line:
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            break
    return quote


def _closes(line: str) -> bool:
    """An array's last line: it ends with ")" once a trailing comment is cut."""
    return not line.lstrip().startswith("#") and line.split(" #")[0].rstrip().endswith(")")


def _has_command_after_assign(line: str) -> bool:
    """`A=1 torchrun ...` is a command with an environment prefix, not an assignment."""
    try:
        parts = shlex.split(line, comments=True)
    except ValueError:
        return False
    if parts and parts[0] in ("export", "declare", "local", "readonly"):  # `export A="..."` assigns
        parts = [p for p in parts[1:] if not p.startswith("-")]
    return len(parts) > 1 and not all(_ASSIGN.match(p) for p in parts)


def _tokens(text: str, scalars: dict[str, str], arrays: dict[str, list[str]], out: Script,
            split_arrays: bool = True) -> list[str]:
    """Words of `text` with variables expanded; `${A[@]}` as its elements, each split into words as an unquoted
    expansion is (`"--vocab-size 128256"` gives two)."""
    if len(text) > MAX_LINE:
        raise InputError(f"script: a command of more than {MAX_LINE:,} characters; not a launch script")
    try:
        raw = shlex.split(text, comments=True)
    except ValueError as exc:
        raise InputError(f"script: cannot tokenise a line ({exc})") from None
    tokens: list[str] = []
    for tok in raw:
        ref = _ARRAY_REF.match(tok)
        if ref:
            if ref.group(1) not in arrays:
                out.unresolved.append(ref.group(1))
                continue
            for item in arrays[ref.group(1)]:
                tokens.extend(_words(item) if split_arrays else [item])
            continue
        tok = _ARRAY_IN.sub(lambda m: " ".join(arrays.get(m.group(1), [])), tok)
        tokens.append(_expand(tok, scalars, out))
    return tokens


def _words(item: str) -> list[str]:
    try:
        return shlex.split(item) if " " in item else [item]
    except ValueError:
        return item.split()


def _expand(tok: str, scalars: dict[str, str], out: Script) -> str:
    def var(m: re.Match) -> str:
        name = m.group(1) or m.group(4)
        if name in scalars and not (m.group(2) == ":-" and scalars[name] == ""):
            return scalars[name]
        if m.group(2):
            return m.group(3) or ""
        out.unresolved.append(name)
        return UNRESOLVED + name

    tok = _VAR.sub(var, tok)
    return _ARITH.sub(lambda m: _arith(m.group(1), out), tok)


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Div: operator.floordiv, ast.Mod: operator.mod}


def _arith(expr: str, out: Script) -> str:
    """Shell integer arithmetic of literal numbers (variables already expanded); anything else stays unresolved."""
    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and abs(node.value) < 10**12:
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.FloorDiv | ast.Div | ast.Mod) and right == 0:
                raise ValueError
            result = _OPS[type(node.op)](left, right)
            if abs(result) >= 10**15:
                raise ValueError
            return result
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        raise ValueError

    try:
        if len(expr) > 200 or UNRESOLVED in expr:
            raise ValueError
        return str(value(ast.parse(expr.strip(), mode="eval").body))
    except (ValueError, SyntaxError, RecursionError):
        out.unresolved.append(f"$(({expr.strip()[:30]}))")
        return UNRESOLVED + "arithmetic"


def _score(tokens: list[str]) -> int:
    """How much a command looks like the training launch: it runs pretrain_*.py (or a .py under torchrun/python)
    and carries many flags."""
    if not tokens:
        return 0
    flags = sum(t.startswith("--") for t in tokens)
    runs = next((t for t in tokens if t.endswith(".py")), "")
    if "pretrain" in runs or "train" in runs:
        return 1000 + flags
    if runs or any(t in ("torchrun", "python", "python3") or t.endswith("/torchrun") for t in tokens):
        return 100 + flags if flags else 0
    return 0
