"""The folder map of docs/design.md holds: import-linter's contracts (`.importlinter`) pass on
the installed layout (`accel.engines` is `engines/`, ... as setup.py maps them), as `make lint`
checks them (scripts/lint_imports.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports():
    spec = importlib.util.spec_from_file_location("lint_imports", ROOT / "scripts" / "lint_imports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_layer_contracts_hold(tmp_path: Path) -> None:
    lint_imports = _lint_imports()
    done = lint_imports.lint(lint_imports.installed_tree(tmp_path))
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "BROKEN" not in done.stdout and "KEPT" in done.stdout
