"""pytest plugin (`-p outcomes_plugin --accel-outcomes=FILE`): appends each test's outcome by
node id (`tests/test_x.py::Class::test[param]`, as pytest takes it back) to FILE, one JSON
line per test, so a conformance difference names the test the way one reruns it. Outcomes:
`passed`, `failed` (in the test), `error` (in set-up, teardown or collection), `skipped`,
`xfailed`, and `running` for a test that never ended (its process killed by the per-test
timeout): lines are written as tests start and end, so a hung pass still tells where it hung.
"""

from __future__ import annotations

import json
from typing import Any

_file: Any = None
_outcomes: dict[str, str] = {}


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--accel-outcomes", default=None, help="append each test's outcome to this JSON-lines file")


def pytest_configure(config: Any) -> None:
    global _file
    path = config.getoption("accel_outcomes")
    if path:
        _file = open(path, "a", buffering=1)  # line-buffered: each line is on disk at once


def _note(nodeid: str, outcome: str, message: str) -> None:
    if _outcomes.get(nodeid) in (None, "running", "passed", "skipped", "xfailed"):  # a failure stays
        _outcomes[nodeid] = outcome
        if _file is not None:
            _file.write(json.dumps({"id": nodeid, "outcome": outcome, "message": message[:500]}) + "\n")


def _message(report: Any) -> str:
    """A skip's reason, or a failure's first `E` line (the exception), else its last line."""
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    lines = report.longreprtext.strip().splitlines()
    return next((line[1:].strip() for line in lines if line.startswith("E ")), lines[-1] if lines else "")


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _note(nodeid, "running", "never ended (the pass was stopped: see its output)")


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


def pytest_unconfigure(config: Any) -> None:
    if _file is not None:
        _file.close()
