"""Run a framework's own test suite in subprocesses and compare each test's outcome.

Used by the conformance tests: the same suite runs stock and under accel, and any test whose
outcome differs is a place where accel is not a drop-in. A test that fails stock (version skew
between the suite and the installed framework) says nothing about accel: it is reported, not
compared. Outcomes are recorded by node id (outcomes_plugin: `passed`, `failed`, `error`,
`skipped`, `xfailed`). Network access is limited to loopback (pytest-socket), as the issue
asks; the suites use fake models, so they need no engines.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / ".accel" / "conformance"
PLUGIN_DIR = Path(__file__).resolve().parent
LOOPBACK_ONLY = ["--disable-socket", "--allow-unix-socket", "--allow-hosts=127.0.0.1,::1"]
# a test that hangs (the slowest take seconds) ends its pass, stacks dumped: a hang can wedge
# the process (a lock held forever), so the rest of that pass is not run but reported absent
PER_TEST_TIMEOUT = ["--timeout=120", "--timeout-method=thread"]
FAILING = ("failed", "error", "running")  # running: a test that hung, its pass stopped
RERUN_AT_MOST = 200  # more differences than this are no flakiness: not rerun


class StockFailures(UserWarning):
    """Tests of a framework's suite that fail without accel (listed, not compared)."""


class FlakyDifferences(UserWarning):
    """Tests whose outcome differed from stock once but not when rerun."""


@dataclass(frozen=True)
class Suite:
    """A framework's own test suite: run from `source` (its rootdir), `target` inside it."""

    name: str
    source: Path
    target: str
    env: Mapping[str, str] = field(default_factory=dict)
    wrap: str = "chains"  # what the wrapped variant wraps (wrap_plugin's --accel-wrap)


@dataclass(frozen=True)
class SuiteRun:
    outcomes: dict[str, str]
    messages: dict[str, str]
    seconds: float
    output_tail: str
    returncode: int

    def failing(self) -> list[str]:
        return sorted(test_id for test_id, outcome in self.outcomes.items() if outcome in FAILING)


def sdist_sources(distribution: str, tests: str) -> Path:
    """The installed `distribution`'s source tree (its tests ship only in the sdist), fetched by
    the test command's set-up step (`scripts/conformance-sources.sh`)."""
    version = importlib.metadata.version(distribution)
    path = SOURCES / f"{distribution.replace('-', '_')}-{version}"
    if not (path / tests).is_dir():
        raise FileNotFoundError(
            f"conformance: {distribution} {version}'s own tests are not at {path / tests}. "
            "Remedy: run `make test` (or scripts/conformance-sources.sh), which downloads its source distribution."
        )
    return path


def _command(suite: Suite, variant: str, report: Path, targets: list[str]) -> tuple[list[str], dict[str, str]]:
    """The pytest command for `variant`: "stock", "auto" (ACCEL_AUTO=1 through accel-run, as a
    user would) or "wrapped" (wrap_plugin: the suite's apps built through accel.wrap)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCEL_AUTO", "PYTEST_"))}
    env.update(suite.env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGIN_DIR), env.get("PYTHONPATH")]))
    pytest = [sys.executable, "-m", "pytest", *targets, "-q", "-p", "no:cacheprovider", f"--rootdir={suite.source}",
              f"--basetemp={report.with_suffix('.tmp')}",  # passes side by side share no tmp_path
              "-p", "outcomes_plugin", f"--accel-outcomes={report}", *PER_TEST_TIMEOUT, *LOOPBACK_ONLY]
    if variant == "auto":
        return [sys.executable, "-m", "accel.patches.run", *pytest], env | {"ACCEL_AUTO": "1"}
    if variant == "wrapped":
        return [*pytest, "-p", "wrap_plugin", f"--accel-wrap={suite.wrap}"], env
    if variant == "stock":
        return pytest, env
    raise ValueError(f"unknown variant {variant!r}")


def run_passes(suite: Suite, variants: tuple[str, ...], folder: Path, timeout_s: float = 1500,
               tests: list[str] | None = None) -> dict[str, SuiteRun]:
    """Each variant in its own pytest process (the whole target, or only `tests`), all started
    at once: these suites mostly wait (sleeps, timeouts, fake streams), so side by side they
    take little longer than one pass."""
    started, running = time.perf_counter(), {}
    folder.mkdir(parents=True, exist_ok=True)
    for variant in variants:
        command, env = _command(suite, variant, folder / f"{variant}.jsonl", tests or [suite.target])
        log = (folder / f"{variant}.log").open("w")
        running[variant] = (subprocess.Popen(command, cwd=suite.source, env=env, stdout=log, stderr=subprocess.STDOUT), log)
    runs: dict[str, SuiteRun] = {}
    deadline = started + timeout_s
    try:
        for variant, (process, _) in running.items():  # each waited for in turn: no polling
            try:
                process.wait(max(0.0, deadline - time.perf_counter()))
            except subprocess.TimeoutExpired:
                raise TimeoutError(f"conformance {suite.name}: {sorted(set(running) - set(runs))} still running "
                                   f"after {timeout_s:.0f}s") from None
            runs[variant] = _read_run(suite, variant, folder, process.returncode, time.perf_counter() - started)
    finally:
        for process, log in running.values():
            if process.poll() is None:
                process.kill()
                process.wait()
            log.close()
    return runs


def _read_run(suite: Suite, variant: str, folder: Path, returncode: int, seconds: float) -> SuiteRun:
    report, tail = folder / f"{variant}.jsonl", (folder / f"{variant}.log").read_text(errors="replace")[-4000:]
    if not report.exists():
        raise RuntimeError(f"conformance {suite.name} ({variant}): pytest wrote no report (exit {returncode}):\n{tail}")
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    for line in report.read_text().splitlines():  # a test's later line (its end) replaces its start
        result = json.loads(line)
        outcomes[result["id"]], messages[result["id"]] = result["outcome"], result["message"]
    return SuiteRun(outcomes, messages, seconds, tail, returncode)


def differences(stock: SuiteRun, other: SuiteRun) -> dict[str, str]:
    """By test id, a line for each test whose outcome differs (or that ran in one run only);
    tests failing stock are left out."""
    lines = {}
    for test_id in sorted(set(stock.outcomes) | set(other.outcomes)):
        a, b = stock.outcomes.get(test_id, "absent"), other.outcomes.get(test_id, "absent")
        if a != b and a not in FAILING:
            lines[test_id] = f"{test_id}: stock {a}, accel {b} {other.messages.get(test_id, '')[:200]}"
    return lines


def check_stock(suite: Suite, stock: SuiteRun, least: int, passing: float) -> None:
    """The suite really ran stock (at least `least` tests, that share passing); its stock
    failures are reported as a `StockFailures` warning."""
    count = len(stock.outcomes)
    assert count >= least, f"{suite.name}: only {count} tests ran stock\n{stock.output_tail}"
    passed = sum(o == "passed" for o in stock.outcomes.values())
    assert passed >= passing * count, f"{suite.name}: {passed} of {count} passed stock\n{stock.output_tail}"
    failing = stock.failing()
    if failing:
        warnings.warn(StockFailures(f"{suite.name}: {len(failing)} of {count} tests fail stock (not compared):\n"
                                    + "\n".join(f"{t}: {stock.messages[t][:150]}" for t in failing)))


def assert_same_outcomes(suite: Suite, runs: Mapping[str, SuiteRun], variant: str, folder: Path) -> None:
    """No test's outcome under `variant` differs from stock. A few differences are rerun once,
    stock and `variant` side by side (in `folder`): one that does not come back (a timing test
    on a loaded machine) is reported as a `FlakyDifferences` warning, not failed."""
    stock, other = runs["stock"], runs[variant]
    diff = differences(stock, other)
    compared = len(stock.outcomes) - len(stock.failing())
    again = [test_id for test_id in diff if test_id in stock.outcomes]
    hung = [t for t, outcome in other.outcomes.items() if outcome == "running"]
    # a pass stopped by a hang (once seen in a wrapped LangGraph pass, a generator finalized by
    # the garbage collector inside Thread.start) leaves every later test absent: those are rerun
    # too, so a hang that does not come back is reported, and one that does fails
    if again and (len(diff) <= RERUN_AT_MOST or hung):
        rerun = run_passes(suite, ("stock", variant), folder, tests=again)
        gone = [t for t in again if t in rerun["stock"].outcomes and rerun["stock"].outcomes[t] == rerun[variant].outcomes.get(t)]
        if gone:
            warnings.warn(FlakyDifferences(f"{suite.name}: {len(gone)} tests differed under {variant} once, not on a rerun:\n"
                                           + "\n".join(diff.pop(t) for t in gone)))
    ended = f"its pytest stopped in {hung} (exit {other.returncode}):\n{other.output_tail[-2500:]}\n" if hung else ""
    assert not diff, (f"{suite.name}: {len(diff)} of {compared} tests differ under {variant} "
                      f"({variant} pass {other.seconds:.0f}s; at most {RERUN_AT_MOST} rerun, each differing again):\n"
                      + ended + "\n".join(diff.values()))


def writable_copy(source: Path, destination: Path) -> Path:
    """`source` (a read-only shared folder) copied to `destination` with write permission, so
    pytest and Python may write there as they would in a clone."""
    shutil.copytree(source, destination, copy_function=shutil.copyfile)
    for folder, _, _ in os.walk(destination):
        os.chmod(folder, 0o755)
    return destination
