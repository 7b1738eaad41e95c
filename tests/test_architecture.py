"""The tree's shape, read from the source (function-level imports included, so a lazy import cannot hide an edge):

- core's imports run one way and have no cycles: params -> model | frameworks -> pipeline | memory -> cost -> planner
  -> views -> cli;
- pages and ui/ talk to core only through its views (core.views*), the input tables (core.params*), core.errors
  and core.units (app.py also sets up the process through core.runtime);
- no function in core/, ui/, pages/ is over 80 lines, and no core function takes more than 10 parameters (records
  instead), with a shrinking list of known exceptions that their owners are cutting down;
- a page stays thin: at most PAGE_LINES lines (headline, inputs, main view, body order; sections go to ui/).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core"
BASICS = {"errors", "units", "validate", "runtime"}
# Rank of each package; a module may import its own package, the basics and any package of lower rank.
RANK = {"params": 1, "model": 2, "frameworks": 2, "pipeline": 3, "memory": 3, "cost": 4, "planner": 5, "configs": 6,
        "views": 7, "cli": 8}


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
        return head, max(RANK.values()) + 1
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


# --- pages and ui/ through core's views ---------------------------------------------------------------------

PAGE_SEAM = ("core.views", "core.params", "core.errors", "core.units")
FRONT = sorted([*(ROOT / "ui").glob("*.py"), *(ROOT / "pages").glob("*.py"), ROOT / "app.py"])


def core_imports(path: Path) -> set[str]:
    """Every core module or name a file imports ("from core import units" -> core.units)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "core"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "core":
            found |= {f"{node.module}.{a.name}" if node.module == "core" else node.module for a in node.names}
    return found


def through_seam(module: str) -> bool:
    return any(module == s or module.startswith(s + ".") for s in PAGE_SEAM)


@pytest.mark.parametrize("path", FRONT, ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_and_ui_reach_core_only_through_views_params_errors_units(path):
    allowed = {"core.runtime"} if path.name == "app.py" else set()  # the process's memory setting, at start-up
    wrong = sorted(m for m in core_imports(path) if not through_seam(m) and m not in allowed)
    assert not wrong, f"{path.relative_to(ROOT)} imports {wrong}: ask core.views.<page> instead"


def test_the_seam_check_sees_a_reach_into_a_domain(tmp_path):
    page = tmp_path / "page.py"
    page.write_text("from core.memory import states\nfrom core import units\nimport core.views.zero\n"
                    "def f():\n    from core.planner.plan import plan\n")
    assert sorted(m for m in core_imports(page) if not through_seam(m)) == ["core.memory", "core.planner.plan"]


def test_every_page_has_its_view_model():
    views = {p.stem for p in (CORE / "views").glob("*.py")}
    pages = {p.stem for p in (ROOT / "pages").glob("*.py")} - {"home"}  # home shows no number
    assert pages <= views, f"pages without a core/views/<page>.py: {sorted(pages - views)}"


# --- a screen long, a handful of parameters -------------------------------------------------------------------

MAX_LINES = 80
MAX_PARAMS = 10
# Known exceptions in core, each owned by the engineer cutting it down (issue 25 item 4); ui/ and pages/ have none.
LONG_KNOWN: set[str] = set()
WIDE_KNOWN: set[str] = set()


def functions(path: Path):
    """(name, lines, parameters) of every function and method in a file (self / cls not counted)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x]
            params = len(names) - (names[:1] in (["self"], ["cls"]))
            yield node.name, node.end_lineno - node.lineno + 1, params


def offenders(roots: list[Path], limit_of) -> set[str]:
    out = set()
    for path in roots:
        for name, lines, params in functions(path):
            if limit_of(lines, params):
                out.add(f"{path.relative_to(ROOT)}:{name}")
    return out


PAGE_LINES = 160  # a page is its headline, inputs, main view and body order; drawing helpers and sections go to ui/


def long_pages(folder: Path) -> dict[str, int]:
    """{file name: lines} of the pages in `folder` over PAGE_LINES lines."""
    counts = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in sorted(folder.glob("*.py"))}
    return {name: n for name, n in counts.items() if n > PAGE_LINES}


def test_every_page_stays_within_its_line_budget():
    long = long_pages(ROOT / "pages")
    assert not long, f"pages over {PAGE_LINES} lines (move sections and helpers to a ui/ module named for them): {long}"


def test_the_line_budget_sees_a_long_page(tmp_path):
    (tmp_path / "thin.py").write_text("x = 1\n" * PAGE_LINES)
    (tmp_path / "long.py").write_text("x = 1\n" * (PAGE_LINES + 1))
    assert long_pages(tmp_path) == {"long.py": PAGE_LINES + 1}


def test_no_function_over_80_lines_in_ui_and_pages():
    assert offenders(FRONT, lambda lines, _: lines > MAX_LINES) == set()


def test_no_core_function_over_80_lines_beyond_the_known_ones():
    found = offenders(sorted(CORE.rglob("*.py")), lambda lines, _: lines > MAX_LINES)
    assert found <= LONG_KNOWN, f"new functions over {MAX_LINES} lines: {sorted(found - LONG_KNOWN)}"


def test_no_core_function_with_more_than_10_parameters_beyond_the_known_ones():
    found = offenders(sorted(CORE.rglob("*.py")), lambda _, params: params > MAX_PARAMS)
    assert found <= WIDE_KNOWN, f"new functions over {MAX_PARAMS} parameters: {sorted(found - WIDE_KNOWN)}"
