"""The folder map of docs/design.md holds: import-linter's contracts (`.importlinter`) pass on
the installed layout (`accel.engines` is `engines/`, ... as setup.py maps them)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def package_dirs() -> dict[str, str]:
    """setup.py's PACKAGE_DIRS (import name -> folder), read without running setup()."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PACKAGE_DIRS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py defines no PACKAGE_DIRS")


def installed_tree(into: Path) -> Path:
    """The `accel` package as it installs: each mapped folder copied under its import name."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name, folder in sorted(package_dirs().items(), key=lambda item: item[0].count(".")):
        shutil.copytree(ROOT / folder, into / Path(*name.split(".")), ignore=ignore, dirs_exist_ok=True)
    return into


def test_layer_contracts_hold(tmp_path: Path) -> None:
    tree = installed_tree(tmp_path)
    done = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--config", str(ROOT / ".importlinter"), "--no-cache"],
                          cwd=tree, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "BROKEN" not in done.stdout and "KEPT" in done.stdout
