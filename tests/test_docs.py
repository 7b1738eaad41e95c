"""The README stays a five-minute read and true to the code: its two commands are the ones the repository runs,
its command lines run, it links every doc under docs/ in one click, and every relative link in it and in docs/
resolves. The generated tables live in the docs that explain them (docs/inputs.md here; docs/step-time.md and
docs/memory.md in tests/test_validation.py and tests/test_memory_validation.py)."""

import re
import shlex
from pathlib import Path

import pytest

from core.cli import main
from scripts import memory_table, param_docs, validation_table
from scripts.param_docs import block

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = sorted((ROOT / "docs").glob("*.md"))
README_LINES = 250

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")  # [text](target), ![alt](target)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")


def _links(text: str) -> list[str]:
    """Every Markdown link target outside code (fenced blocks and `spans`)."""
    return LINK.findall(CODE.sub("", FENCE.sub("", text)))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


def test_input_table_matches_the_spec_tables():
    assert block() in param_docs.DOC.read_text(encoding="utf-8"), "stale: run python scripts/param_docs.py --write"


def test_each_generated_table_lives_once_in_its_doc_and_not_in_the_readme():
    for script in (param_docs, validation_table, memory_table):
        assert script.DOC.parent == ROOT / "docs", script.__name__
        doc = script.DOC.read_text(encoding="utf-8")
        assert doc.count(script.BEGIN) == 1 and doc.count(script.END) == 1, script.DOC
        assert script.BEGIN not in README and script.END not in README, script.__name__


def test_two_commands_and_ci_call_the_same_test_command():
    assert "pip install -r requirements.txt && streamlit run app.py" in README
    assert "\nscripts/test" in README
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test" in ci and "REQUIRE_BROWSER=1" in ci


def test_every_page_has_a_screenshot_in_the_readme():
    for name in ("pipeline", "zero", "planner", "lecture"):
        assert f"docs/screenshots/{name}.png" in README
        assert (ROOT / "docs" / "screenshots" / f"{name}.png").stat().st_size > 10_000


def test_the_readme_is_a_five_minute_read():
    assert len(README.splitlines()) <= README_LINES, "move detail to docs/ and link it from the README"


def test_the_readme_links_every_doc_in_one_click():
    linked = set(_links(README))
    assert len(DOCS) >= 12
    missing = [p.name for p in DOCS if f"docs/{p.name}" not in linked]
    assert not missing, f"docs not linked from README.md: {missing}"


@pytest.mark.parametrize("path", [ROOT / "README.md", *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    broken = []
    for target in _links(path.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
            continue
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(target)
    assert not broken, f"{path.relative_to(ROOT)}: links that lead nowhere: {broken}"


def _readme_command_lines() -> list[str]:
    section = README.split("## Eleven command lines", 1)[1].split("\n## ", 1)[0]
    code = FENCE.search(section).group(0)
    return [line for line in code.splitlines() if line.startswith("python -m core ")]


def test_the_readme_shows_eleven_command_lines():
    assert len(_readme_command_lines()) == 11


@pytest.mark.parametrize("line", _readme_command_lines())
def test_each_readme_command_line_runs(line, capsys):
    args = shlex.split(line, comments=True)[3:]  # after "python -m core"
    assert main(args) == 0
    out = capsys.readouterr()
    assert out.out.strip(), out.err
