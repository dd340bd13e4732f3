"""Run a framework's own test suite in a subprocess and read each test's outcome.

Used by the conformance tests: the same suite runs stock and under accel, and any test whose
outcome differs is a place where accel is not a drop-in. Outcomes come from pytest's JUnit XML
(`passed`, `failed`, `error`, `skipped`, `xfailed`). Network access is limited to loopback
(pytest-socket), as the issue asks; the suites use fake models, so they need no engines.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / ".accel" / "conformance"
PLUGIN_DIR = Path(__file__).resolve().parent
LOOPBACK_ONLY = ["--disable-socket", "--allow-unix-socket", "--allow-hosts=127.0.0.1,::1"]


@dataclass(frozen=True)
class SuiteRun:
    outcomes: dict[str, str]
    messages: dict[str, str]
    seconds: float
    output_tail: str


def langchain_core_sources() -> Path:
    """The installed langchain-core's source tree (its tests live only in the sdist), fetched
    by the test command's set-up step (`scripts/conformance-sources.sh`)."""
    version = importlib.metadata.version("langchain-core")
    path = SOURCES / f"langchain_core-{version}"
    if not (path / "tests" / "unit_tests").is_dir():
        raise FileNotFoundError(
            f"conformance: langchain-core {version}'s own tests are not at {path}. "
            "Remedy: run `make test` (or scripts/conformance-sources.sh), which downloads its source distribution."
        )
    return path


def run_suite(source: Path, target: str, variant: str, report: Path, timeout_s: float = 900) -> SuiteRun:
    """Run `target` (a path inside `source`) as `variant`: "stock", "auto" (ACCEL_AUTO=1
    through accel-run, as a user would) or "wrapped" (every chain called through accel.wrap)."""
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCEL_AUTO", "PYTEST_"))}
    pytest = [sys.executable, "-m", "pytest", target, "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
              "-o", "junit_family=xunit2", *LOOPBACK_ONLY]
    if variant == "auto":
        command = [sys.executable, "-m", "accel.patches.run", *pytest]
        env["ACCEL_AUTO"] = "1"
    elif variant == "wrapped":
        command = [*pytest, "-p", "wrap_plugin"]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGIN_DIR), env.get("PYTHONPATH")]))
    elif variant == "stock":
        command = pytest
    else:
        raise ValueError(f"unknown variant {variant!r}")
    started = time.perf_counter()
    done = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True, timeout=timeout_s)
    seconds = time.perf_counter() - started
    if not report.exists():
        raise RuntimeError(f"conformance ({variant}): pytest wrote no report (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    outcomes, messages = read_junit(report)
    return SuiteRun(outcomes, messages, seconds, (done.stdout + done.stderr)[-4000:])


def read_junit(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = ("failed" if child.tag == "failure" else "error"), (child.get("message") or "")
            elif child.tag == "skipped":
                outcome = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
                message = child.get("message") or ""
        outcomes[test_id] = outcome
        messages[test_id] = message[:500]
    return outcomes, messages


def differences(stock: SuiteRun, other: SuiteRun) -> list[str]:
    """One line per test whose outcome differs (or that ran in one run only)."""
    lines = []
    for test_id in sorted(set(stock.outcomes) | set(other.outcomes)):
        a, b = stock.outcomes.get(test_id, "absent"), other.outcomes.get(test_id, "absent")
        if a != b:
            lines.append(f"{test_id}: stock {a}, accel {b} {other.messages.get(test_id, '')[:200]}")
    return lines
