"""A Poisson run's sequential system runs every query alone, so its LLM calls are timed per
query, in query order (the Poisson bound's per-query floors); a concurrent system's are not,
since its queries overlap. A fake driver whose "LLM calls" report fixed durations: no timing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

from accel.benchmarks.runner import run_system
from accel.benchmarks.systems import System

CALLS = {"short": [0.1], "long": [0.4, 0.5], "fails": [0.2]}


class _Driver:
    """Each question's "LLM calls" land in the timer open on the calling thread."""

    framework = "fake"

    def __init__(self) -> None:
        self._local = threading.local()

    def call(self, app: Any, question: str) -> str:
        timer = getattr(self._local, "timer", None)
        if timer is not None:
            timer.extend(CALLS.get(question, []))
        if question == "fails":
            raise RuntimeError("the app failed")
        return question.upper()

    @contextmanager
    def timing(self) -> Iterator[Any]:
        calls: list[float] = []
        self._local.timer = calls
        try:
            yield SimpleNamespace(durations=lambda: list(calls), usage=lambda: [None] * len(calls),
                                  spans=lambda: [(0.0, seconds) for seconds in calls])
        finally:
            self._local.timer = None


def _poisson(concurrent: bool, questions: list[str]) -> Any:
    system = System("stock-sequential" if not concurrent else "stock-concurrent", build=lambda apps: object(),
                    concurrent=concurrent)
    return run_system(system, None, _Driver(), questions, "poisson", arrivals=[0.0] * len(questions), rate=1.0)


def test_a_sequential_poisson_run_times_each_query_alone_in_query_order() -> None:
    run = _poisson(False, ["long", "short", "fails", "long"])
    assert run.outputs == ["LONG", "SHORT", None, "LONG"]
    assert run.llm_calls == [[0.4, 0.5], [0.1], [], [0.4, 0.5]]  # a failed query gives no path


def test_a_concurrent_poisson_run_times_nothing() -> None:
    run = _poisson(True, ["long", "short"])
    assert run.outputs == ["LONG", "SHORT"] and run.llm_calls == []
