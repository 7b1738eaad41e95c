"""Python config functions followed from the syntax tree, never run: the registries and recipes frameworks now ship
as Python (torchtitan's Trainer.Config functions, Megatron-Bridge's ConfigContainer recipes).

Such a function builds one object and edits it: literals and arithmetic, names it assigned, the file's other config
functions (`cfg = llama3_8b()`), attribute edits (`cfg.model.tensor_model_parallel_size = 4`) and `replace(...)`.
Every other call stays as its name and arguments (a `Call`), which the reader of that framework interprets; what
cannot be reduced stays as its source text (a `Text`). The work is bounded (MAX_DEPTH, MAX_STEPS).
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from dataclasses import dataclass, field

from core.errors import InputError

MAX_DEPTH = 6  # config functions calling config functions
MAX_STEPS = 5_000  # statements and expressions evaluated, whatever the file


@dataclass
class Call:
    """A call the evaluator does not run: its callee as written, positional and keyword values."""

    name: str
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)

    def short(self) -> str:
        return self.name.rsplit(".Config", 1)[0].split("(")[0].split(".")[-1]


@dataclass(frozen=True)
class Text:
    """An expression the evaluator cannot reduce, kept as its source text."""

    text: str

    def __str__(self) -> str:
        return self.text


def required(func: ast.FunctionDef) -> int:
    """Parameters without a default: a config entry takes none (it is named, never called with arguments)."""
    a = func.args
    return len(a.posonlyargs + a.args) - len(a.defaults) + sum(d is None for d in a.kw_defaults)


@dataclass(frozen=True)
class Entries:
    """What a file's run functions are called (`noun`), what they return, and how a user names one (`launch`)."""

    noun: str  # "config", "recipe"
    returns: str  # "Trainer.Config", "ConfigContainer"
    launch: str  # the launch command that names one


def functions(tree: ast.Module, source: str, max_nodes: int) -> dict[str, ast.FunctionDef]:
    """The module's top-level functions, the tree bounded first."""
    if sum(1 for _ in ast.walk(tree)) > max_nodes:
        raise InputError(f"{source}: larger than a config file ({max_nodes:,} syntax nodes)")
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def choose(funcs: dict[str, ast.FunctionDef], kind: Entries, name: str, source: str) -> str:
    """The run to read: `name` (the user's or the launch command's), else the file's only entry: a function without
    required parameters that returns `kind.returns` (annotated, or building it)."""
    entries = [n for n, f in funcs.items() if not required(f) and (kind.returns in ast.unparse(
        f.returns or ast.Constant("")) or any(isinstance(c, ast.Call) and ast.unparse(c.func).endswith(kind.returns)
                                              for c in ast.walk(f)))]
    if not entries:
        raise InputError(f"{source}: no function returning {kind.returns} (one per run)")
    if not name and len(entries) > 1:
        shown = ", ".join(entries[:12]) + (", ..." if len(entries) > 12 else "")
        raise InputError(f"{source}: {len(entries)} {kind.noun}s ({shown}); name the one you run (check --entry NAME, "
                         f"or add its launch command: {kind.launch})")
    name = name or entries[0]
    if name not in funcs:
        raise InputError(f"{source}: no {kind.noun} function {name[:60]!r} (it has {', '.join(entries[:12])})")
    return name


def constants(tree: ast.Module) -> dict[str, object]:
    """The module's top-level names bound to literals (a recipe's model id, a shared size)."""
    out: dict[str, object] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) and node.value is not None else None
        if isinstance(target, ast.Name):
            try:
                out[target.id] = ast.literal_eval(node.value)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
    return out


def set_path(root: Call, path: list[str], value: object) -> None:
    """`root.a.b.c = value`, making the sections that were left at their defaults (`config.compile.enable = True`
    on a config that never named compile)."""
    node = root
    for attr in path[:-1]:
        if not isinstance(node.kwargs.get(attr), Call):
            node.kwargs[attr] = Call(attr, [], {})
        node = node.kwargs[attr]
    node.kwargs[path[-1]] = value


def plain(value: object) -> object:
    """A value as a config account shows it."""
    if isinstance(value, Call):
        return value.short() + "(...)"
    if isinstance(value, list):
        return [plain(v) for v in value]
    return str(value) if isinstance(value, Text) else value


class Evaluator:
    """Reduces a config function to nested Calls and plain values. `helpers`: calls made as statements whose effect
    the reader knows (name -> function of the evaluated arguments); any other such call, and control flow, is
    listed in `skipped` (what it sets is not read). `defaults`: imported functions whose result the reader knows
    (a framework's base config, name -> the Call it returns)."""

    def __init__(self, funcs: dict[str, ast.FunctionDef], module_env: dict | None = None,
                 helpers: dict[str, Callable] | None = None, defaults: dict[str, Call] | None = None) -> None:
        self.funcs, self.steps, self.skipped = funcs, 0, []
        self.module_env, self.helpers, self.defaults = module_env or {}, helpers or {}, defaults or {}

    def _tick(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise InputError(f"a config function takes more than {MAX_STEPS:,} steps to follow; not a config")

    def run(self, func: ast.FunctionDef, depth: int = 0, bound: dict | None = None) -> object:
        """The function's return value; `bound`: the arguments a call in the file passed (name -> value)."""
        if depth > MAX_DEPTH:
            raise InputError(f"{func.name}(): config functions call each other more than {MAX_DEPTH} deep")
        env: dict[str, object] = dict(self.module_env)
        a = func.args
        plain_args = a.posonlyargs + a.args
        for p, d in zip(plain_args[len(plain_args) - len(a.defaults):], a.defaults, strict=True):
            env[p.arg] = self.value(d, env, depth)
        for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
            if d is not None:
                env[p.arg] = self.value(d, env, depth)
        env.update(bound or {})
        for stmt in func.body:
            self._tick()
            if isinstance(stmt, ast.Return):
                return self.value(stmt.value, env, depth) if stmt.value else None
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                value = self.value(stmt.value, env, depth)
                for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
                    self.assign(target, value, env)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                    ast.unparse(stmt.value.func) in self.helpers:
                args = [self.reference(x, env, depth) for x in stmt.value.args]
                self.helpers[ast.unparse(stmt.value.func)](*args)
            elif isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)) or (
                    isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
                self.skipped.append(ast.unparse(stmt).splitlines()[0][:60])
        return None

    def reference(self, node: ast.AST, env: dict, depth: int) -> object:
        """An argument as the object itself (a helper edits it in place), not a copy."""
        path = []
        while isinstance(node, ast.Attribute):
            path.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and isinstance(env.get(node.id), Call):
            out = env[node.id]
            for attr in reversed(path):
                out = out.kwargs.get(attr) if isinstance(out, Call) else None
            return out
        return self.value(node, env, depth)

    def assign(self, target: ast.AST, value: object, env: dict) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
            return
        path = []
        while isinstance(target, ast.Attribute):
            path.append(target.attr)
            target = target.value
        if isinstance(target, ast.Name) and isinstance(env.get(target.id), Call) and path:
            set_path(env[target.id], list(reversed(path)), value)

    def value(self, node: ast.AST, env: dict, depth: int) -> object:
        self._tick()
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.value(x, env, depth) for x in node.elts]
        if isinstance(node, ast.Name):  # names alias one object, as in Python (a copy each read would be unbounded)
            return env[node.id] if node.id in env else Text(node.id)
        if isinstance(node, ast.BinOp):
            return _arith(node.op, self.value(node.left, env, depth), self.value(node.right, env, depth), node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.value(node.operand, env, depth)
            return -v if isinstance(v, (int, float)) and not isinstance(v, bool) else Text(ast.unparse(node)[:60])
        if isinstance(node, ast.Attribute):
            base = self.value(node.value, env, depth)
            if isinstance(base, Call) and node.attr in base.kwargs:
                return base.kwargs[node.attr]
            return Text(ast.unparse(node)[:60])
        if isinstance(node, ast.Call):
            return self.call(node, env, depth)
        return Text(ast.unparse(node)[:60])

    def call(self, node: ast.Call, env: dict, depth: int) -> object:
        callee = ast.unparse(node.func)[:80]
        kwargs = {k.arg: self.value(k.value, env, depth) for k in node.keywords if k.arg}
        args = [self.value(x, env, depth) for x in node.args]
        if callee in self.funcs:
            params = [p.arg for p in self.funcs[callee].args.posonlyargs + self.funcs[callee].args.args]
            return self.run(self.funcs[callee], depth + 1, dict(zip(params, args, strict=False)) | kwargs)
        if callee in self.defaults:
            return copy.deepcopy(self.defaults[callee])
        if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Call):  # a(...).b(...)
            inner = self.call(node.func.value, env, depth)
            return Call(f"{inner.name if isinstance(inner, Call) else inner}.{node.func.attr}", [inner, *args],
                        kwargs)
        if callee in ("replace", "dataclasses.replace") and args and isinstance(args[0], Call):
            out = copy.deepcopy(args[0])
            out.kwargs.update(kwargs)
            return out
        return Call(callee, args, kwargs)


def _arith(op: ast.operator, a: object, b: object, node: ast.AST) -> object:
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    if numbers and abs(a) < 1e15 and abs(b) < 1e15:
        if isinstance(op, ast.Add):
            return a + b
        if isinstance(op, ast.Sub):
            return a - b
        if isinstance(op, ast.Mult):
            return a * b
        if isinstance(op, ast.FloorDiv) and b:
            return a // b
        if isinstance(op, ast.Div) and b:
            return int(a / b) if (a / b).is_integer() else a / b
    return Text(ast.unparse(node)[:60])
