"""Engine tests skip locally when an engine is missing, saying how to install it, and fail in CI instead."""

import pytest

from tests.engine_support import INSTALL, ROOT, need


def test_a_missing_engine_skips_with_the_install_command(monkeypatch):
    monkeypatch.delenv("REQUIRE_ENGINES", raising=False)
    with pytest.raises(pytest.skip.Exception, match="requirements-engines.txt"):
        need("no_such_engine_module")


def test_ci_turns_the_skip_into_a_failure(monkeypatch):
    monkeypatch.setenv("REQUIRE_ENGINES", "1")
    with pytest.raises(pytest.fail.Exception, match="no_such_engine_module"):
        need("no_such_engine_module")
    assert INSTALL.startswith("scripts/install-engines")
    script = (ROOT / "scripts" / "install-engines").read_text(encoding="utf-8")
    assert "DS_BUILD_OPS=0" in script and "-c requirements.txt" in script  # DeepSpeed without ops, app's pins
    assert "--no-deps -r requirements-megatron.txt" in script  # Megatron-Core's numpy<2 pin left out
    assert "scripts/install-engines" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
