"""Every measured window starts on a settled heap: the systems of a bench share one process, and
a full collection over what earlier systems left (0.40 s here) paused whichever system ran
when its threshold tripped, 0.6 s into a 3 s Poisson window."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from accel.benchmarks.runner import run_system, settle_heap
from accel.benchmarks.systems import System


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_settling_collects_earlier_garbage_and_freezes_what_survives() -> None:
    try:
        survivor, garbage = _Cycle(), _Cycle()
        dead = weakref.ref(garbage)
        del garbage
        settle_heap()
        assert dead() is None and gc.get_freeze_count() > 0
        frozen = weakref.ref(survivor)
        del survivor  # garbage now, but frozen: only the next window's settling frees it
        gc.collect()
        assert frozen() is not None
        settle_heap()
        assert frozen() is None
    finally:
        gc.unfreeze()


class _Driver:
    framework = "fake"

    def call(self, app: Any, question: str) -> str:
        return question

    def batch(self, app: Any, questions: list[str], concurrency: int) -> list[str]:
        return list(questions)


def test_the_window_opens_after_the_heap_settled() -> None:
    seen: list[int] = []
    system = System("fake", build=lambda apps: object(), concurrent=True)
    try:
        gc.unfreeze()
        run = run_system(system, None, _Driver(), ["q1", "q2"], "batch", warmed=lambda: seen.append(gc.get_freeze_count()))
    finally:
        gc.unfreeze()
    assert run.outputs == ["q1", "q2"] and seen and seen[0] > 0
