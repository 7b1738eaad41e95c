"""core's imports run one way and have no cycles: params -> model -> pipeline | memory -> cost -> planner | views
-> cli. Every import is read from the source (function-level ones included), so a lazy import cannot hide a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "core"
BASICS = {"errors", "units", "validate", "runtime"}
# Rank of each package; a module may import its own package, the basics and any package of lower rank.
RANK = {"params": 1, "model": 2, "pipeline": 3, "memory": 3, "cost": 4, "planner": 5, "views": 5, "cli": 6}


def module_name(path: Path) -> str:
    parts = path.relative_to(CORE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """core modules a file imports, resolved to module names ("from core.x import y" -> core.x.y if a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("core")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("core"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in modules else node.module)
    return {m for m in found if m in modules}


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in CORE.rglob("*.py")}
    modules = set(files)
    return {name: imports(path, modules) - {name} for name, path in files.items()}


def layer(module: str) -> tuple[str, int]:
    parts = module.split(".")
    if len(parts) == 1:
        return "core", 0
    head = parts[1]
    if head in BASICS:
        return head, 0
    if head == "__main__":
        return head, 7
    return head, RANK[head]


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_every_package_has_a_rank():
    heads = {p.name for p in CORE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert heads == set(RANK), "a new package under core/ needs its place in the flow (RANK here and core/__init__)"
    tops = {p.stem for p in CORE.glob("*.py")} - {"__init__", "__main__"}
    assert tops == BASICS, "the top level of core/ keeps only shared basics"


def test_no_import_cycles_inside_core():
    assert find_cycle(graph()) is None


def test_imports_run_one_way():
    wrong = []
    for module, targets in graph().items():
        head, rank = layer(module)
        for target in targets:
            t_head, t_rank = layer(target)
            if t_head == head or t_rank < rank or (t_rank == 0 and rank == 0 and t_head in BASICS):
                continue
            wrong.append(f"{module} -> {target}")
    assert not wrong, "imports against the flow:\n" + "\n".join(sorted(wrong))


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("package", sorted(RANK))
def test_each_package_says_what_it_owns_and_may_import(package):
    doc = ast.get_docstring(ast.parse((CORE / package / "__init__.py").read_text(encoding="utf-8")))
    assert doc and ("May import" in doc or package in ("params", "cli")), package
