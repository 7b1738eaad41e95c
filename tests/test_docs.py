"""The README stays true to the code: its input table is generated from the Spec tables, and its two
commands are the ones the repository runs."""

from pathlib import Path

from scripts.param_docs import DOC, block

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_input_table_matches_the_spec_tables():
    assert block() in DOC.read_text(encoding="utf-8"), "stale: run python scripts/param_docs.py --write"


def test_two_commands_and_ci_call_the_same_test_command():
    assert "pip install -r requirements.txt && streamlit run app.py" in README
    assert "\nscripts/test" in README
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test" in ci and "REQUIRE_BROWSER=1" in ci


def test_every_page_has_a_screenshot_in_the_readme():
    for name in ("pipeline", "zero", "planner", "lecture"):
        assert f"docs/screenshots/{name}.png" in README
        assert (ROOT / "docs" / "screenshots" / f"{name}.png").stat().st_size > 10_000
