"""The folder map of docs/design.md holds: import-linter's contracts (`.importlinter`) pass, run
as a user runs them, `lint-imports` from the checkout (`accel/engines` etc. link the mapped
folders into `accel/`, so the checkout has the import layout on disk)."""

from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

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


def test_session_is_typed() -> None:
    """The session, the one door to the runtime, says what crosses it (issue 28): at most 3
    `Any` annotations in accel/session.py."""
    text = (ROOT / "accel" / "session.py").read_text()
    found = re.findall(r":\s*Any\b|->\s*Any\b", text)
    assert len(found) <= 3, found


def _contracts() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    assert config.read(ROOT / ".importlinter")
    return config


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip()]


def test_adapters_contract_checks_indirect_imports() -> None:
    """Adapters reach the runtime through the session only: their contract counts indirect
    imports, with the session's own imports of the runtime as its one exemption; the public
    types' contract counts them too."""
    config = _contracts()
    adapters = config["importlinter:contract:adapters"]
    assert adapters.getboolean("allow_indirect_imports") is False
    assert _lines(adapters.get("ignore_imports", "")) == ["accel.session -> accel.runtime.**"]
    assert _lines(adapters["source_modules"]) == ["accel.adapters"]
    assert "accel.runtime" in _lines(adapters["forbidden_modules"])
    types = config["importlinter:contract:types"]
    assert types.getboolean("allow_indirect_imports") is False and "ignore_imports" not in types
    assert _lines(types["source_modules"]) == ["accel.types"]
    assert {"accel.runtime", "accel.session", "accel.passes", "accel.adapters"} <= set(_lines(types["forbidden_modules"]))


def test_session_exports_no_runtime_types() -> None:
    """The adapters contract exempts the session's imports of the runtime, so the session must
    not hand the runtime on: its public names are its own or the public types', and no public
    name of the module is a runtime object or module."""
    import accel.session as session
    import accel.types as types

    assert sorted(session.__all__) == ["Session", "get_session", "shutdown"]
    assert all(getattr(session, name).__module__ == "accel.session" for name in session.__all__)
    leaked = []
    for name, value in vars(session).items():
        if name.startswith("_"):
            continue
        where = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None) or ""
        if where.startswith("accel.runtime") and getattr(types, name, None) is not value:
            leaked.append(name)
    assert leaked == [], f"accel.session hands on runtime names (import them as _private): {leaked}"


def _map_rows(design: str) -> list[str]:
    """The path cells of docs/design.md's "Where things live" table."""
    section = design.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    return [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]


def test_design_map_paths_exist() -> None:
    """Every path the design's folder map names exists (issue 28 step 10). A name without a
    folder sits beside the row's first path (`engines/base.py`, `errors.py`)."""
    rows = _map_rows((ROOT / "docs" / "design.md").read_text())
    assert len(rows) > 20, "the map table was not found"
    missing = []
    for cell in rows:
        names = re.findall(r"`([^`]+)`", cell)
        folder = Path(names[0]).parent
        for name in names:
            path = ROOT / (name if "/" in name or name == names[0] else folder / name)
            if not path.exists():
                missing.append(f"{name} (row {cell.strip()})")
    assert not missing, f"docs/design.md's map names paths that do not exist: {missing}"
