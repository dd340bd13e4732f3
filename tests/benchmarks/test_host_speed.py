"""The host-speed probe (benchmarks/host_speed.py): a fixed piece of work timed in its own
thread's CPU time, carried in every bench report and quoted beside the twins' goals and suite."""

from __future__ import annotations

import gc
import threading

import pytest

from accel.benchmarks import host_speed
from accel.benchmarks.twin_goals import host_line, summary
from accel.benchmarks.twin_suite import markdown as suite_markdown, row
from tests.benchmarks.test_twin_goals import BATCH
from tests.benchmarks.test_twin_suite import report


def test_the_work_is_fixed_and_the_probe_orders_its_runs() -> None:
    assert host_speed.work() == host_speed.work()  # the same work every time: only the host moves its time
    speed = host_speed.probe(repeats=3)  # in a fresh interpreter
    assert speed["fresh"] and 0 < speed["least_ms"] <= speed["cpu_ms"] <= speed["most_ms"]
    here = host_speed.probe(repeats=3, fresh=False)
    assert not here["fresh"] and 0 < here["least_ms"] <= here["cpu_ms"] <= here["most_ms"]
    assert gc.isenabled()  # the collector, held off while timed, is back on


def test_the_collector_is_held_off_only_while_the_work_is_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full collection walks the caller's whole heap, which is not the host's speed."""
    seen: list[bool] = []
    monkeypatch.setattr(host_speed, "work", lambda: seen.append(gc.isenabled()))
    host_speed.probe(repeats=2, fresh=False)
    assert seen == [False, False, False] and gc.isenabled()
    gc.disable()
    try:
        host_speed.probe(repeats=1, fresh=False)
        assert not gc.isenabled()  # a caller that runs without the collector keeps it off
    finally:
        gc.enable()


def test_the_probe_counts_cpu_time_not_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe that waits while others compute (a machine whose other processes hold the cores
    between its slices makes it wait) reads only what it computed itself: here its work waits
    on an event that another thread sets once it has burned far more CPU than the bound below."""
    def wait_for_another_threads_work() -> None:
        done = threading.Event()
        threading.Thread(target=lambda: (sum(range(10_000_000)), done.set())).start()
        done.wait()

    monkeypatch.setattr(host_speed, "work", wait_for_another_threads_work)
    assert host_speed.probe(repeats=2, fresh=False)["most_ms"] < 50


def test_without_a_fresh_interpreter_it_probes_in_this_process(monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(host_speed.sys, "executable", "/nonexistent/python")
    with caplog.at_level("WARNING", logger="accel.benchmarks.host_speed"):
        speed = host_speed.probe(repeats=1)
    assert not speed["fresh"] and speed["cpu_ms"] > 0 and "no fresh interpreter" in caplog.text


def test_a_run_quotes_the_mean_of_the_probes_around_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_speed, "REFERENCE_MS", 40.0)
    speed = host_speed.around({"cpu_ms": 40.0}, {"cpu_ms": 50.0})
    assert (speed["cpu_ms"], speed["to_reference"]) == (45.0, 1.125)
    assert host_speed.describe(speed) == "host probe 45.0 ms (1.12x the reference)"
    assert host_speed.describe(None) == "host probe not run"  # a report from before the probe


def _probed(ms: float) -> dict:
    measured = report("batch", 20.0, 8.0, 5.0)
    measured["machine"] = {"host_speed": {"cpu_ms": ms}}
    return measured


def test_the_goals_and_the_suite_say_how_fast_the_host_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_speed, "REFERENCE_MS", 20.0)
    goals = [summary(BATCH, [_probed(22.0), _probed(26.0), _probed(23.0)])]
    assert goals[0]["host_ms"] == [22.0, 26.0, 23.0]
    line = host_line(goals)
    assert "22.0-26.0 ms" in line and "median 23.0 ms" in line and "1.15x the reference machine's 20.0 ms" in line
    assert "not run" in host_line([summary(BATCH, [report("batch", 20.0, 8.0, 5.0)])])
    table = suite_markdown([row(_probed(22.0))], "simulated", True)
    assert table.splitlines()[-1].endswith("| 22.0 |") and "host probe ms" in table
