"""The folder map of docs/design.md holds: import-linter's contracts (`.importlinter`) pass, run
as a user runs them, `lint-imports` from the checkout (`accel/engines` etc. link the mapped
folders into `accel/`, so the checkout has the import layout on disk)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_layer_contracts_hold() -> None:
    done = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "BROKEN" not in done.stdout and "KEPT" in done.stdout
