"""Check the layer contracts of `.importlinter` on `accel` as it installs: `make lint`.

Plain `lint-imports` cannot check this checkout: setup.py maps the top-level folders to
subpackages (`engines/` is `accel.engines`, ...), and import-linter's graph builder (grimp)
only walks the root package's own directory, so from the source tree it finds no
`accel.engines`. This script copies each mapped folder under its import name into a temporary
tree (what an install holds) and runs `lint-imports` there. tests/test_layers.py runs it in CI.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def package_dirs() -> dict[str, str]:
    """setup.py's PACKAGE_DIRS (import name -> folder), read without running setup()."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PACKAGE_DIRS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise RuntimeError("setup.py defines no PACKAGE_DIRS")


def installed_tree(into: Path) -> Path:
    """The `accel` package as it installs: each mapped folder copied under its import name."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name, folder in sorted(package_dirs().items(), key=lambda item: item[0].count(".")):
        shutil.copytree(ROOT / folder, into / Path(*name.split(".")), ignore=ignore, dirs_exist_ok=True)
    return into


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` with the project's contracts on the installed-layout `tree`."""
    return subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--config", str(ROOT / ".importlinter"), "--no-cache"],
                          cwd=tree, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                          timeout=300)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="accel-layers-") as tmp:
        done = lint(installed_tree(Path(tmp)))
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
