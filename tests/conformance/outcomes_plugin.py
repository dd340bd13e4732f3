"""pytest plugin (`-p outcomes_plugin --accel-outcomes=FILE`): writes each test's outcome by
node id (`tests/test_x.py::Class::test[param]`, as pytest takes it back) to FILE as JSON, so
a conformance difference names the test the way one reruns it. Outcomes: `passed`, `failed`
(in the test), `error` (in set-up, teardown or collection), `skipped`, `xfailed`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_results: dict[str, dict[str, str]] = {}


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--accel-outcomes", default=None, help="write each test's outcome to this JSON file")


def _note(nodeid: str, outcome: str, message: str) -> None:
    current = _results.get(nodeid)
    if current is None or current["outcome"] in ("passed", "skipped", "xfailed"):
        _results[nodeid] = {"outcome": outcome, "message": message[:500]}


def _message(report: Any) -> str:
    """A skip's reason, or a failure's first `E` line (the exception), else its last line."""
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    lines = report.longreprtext.strip().splitlines()
    return next((line[1:].strip() for line in lines if line.startswith("E ")), lines[-1] if lines else "")


def pytest_runtest_logreport(report: Any) -> None:
    if report.failed:
        _note(report.nodeid, "failed" if report.when == "call" else "error", _message(report))
    elif report.skipped:
        _note(report.nodeid, "xfailed" if hasattr(report, "wasxfail") else "skipped", _message(report))
    elif report.when == "call":
        _note(report.nodeid, "passed", "")


def pytest_collectreport(report: Any) -> None:
    if report.failed or report.skipped:  # a module that fails to import, or skips itself
        _note(report.nodeid, "error" if report.failed else "skipped", _message(report))


def pytest_sessionfinish(session: Any) -> None:
    path = session.config.getoption("accel_outcomes")
    if path:
        Path(path).write_text(json.dumps(_results, indent=0, sort_keys=True))
