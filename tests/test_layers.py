"""The folder map of docs/design.md holds: import-linter's contracts (`.importlinter`) pass, run
as a user runs them, `lint-imports` from the checkout (`accel/engines` etc. link the mapped
folders into `accel/`, so the checkout has the import layout on disk)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_layer_contracts_hold() -> None:
    done = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "BROKEN" not in done.stdout and "KEPT" in done.stdout


def _sources() -> list[Path]:
    """Every module of the package as it imports (`accel/` and the folders it links in)."""
    found = []
    for folder, _dirs, files in os.walk(ROOT / "accel", followlinks=True):
        found += [Path(folder, name) for name in files if name.endswith(".py")]
    return found


def test_engine_tasks_only_in_runtime() -> None:
    """Data reaches the engine schedulers only through the session: only the runtime makes
    `EngineTask`s, and only the runtime and the session name a scheduler (issue 28)."""
    runtime = ROOT / "accel" / "runtime"
    tasks, schedulers = [], []
    for path in _sources():
        text = path.read_text()
        where = path.relative_to(ROOT)
        if path.is_relative_to(runtime):
            continue
        if re.search(r"\bEngineTask\(", text):
            tasks.append(str(where))
        if path != ROOT / "accel" / "session.py" and re.search(r"schedulers\[|\.scheduler\(", text):
            schedulers.append(str(where))
    assert len(_sources()) > 100  # the linked folders were walked
    assert tasks == [], f"EngineTask made outside accel/runtime/: {tasks}"
    assert schedulers == [], f"engine schedulers reached outside accel/runtime/ and accel/session.py: {schedulers}"
