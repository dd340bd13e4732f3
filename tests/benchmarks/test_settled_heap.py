"""Every measured window runs on a settled heap: the systems of a bench share one process, and
a full collection over what earlier systems left (0.40 s here) paused whichever system ran
when its threshold tripped, 0.6 s into a 3 s Poisson window."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from accel.benchmarks.runner import run_system, settled_heap
from accel.benchmarks.systems import System


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_window_collects_earlier_garbage_freezes_the_survivors_and_thaws_them_after() -> None:
    survivor, garbage = _Cycle(), _Cycle()
    dead = weakref.ref(garbage)
    del garbage
    with settled_heap():
        assert dead() is None and gc.get_freeze_count() > 0
        frozen = weakref.ref(survivor)
        del survivor  # garbage now, but frozen: no collection inside the window frees it
        gc.collect()
        assert frozen() is not None
    assert gc.get_freeze_count() == 0  # nothing stays frozen at exit (extensions report leaks then)
    gc.collect()
    assert frozen() is None


class _Driver:
    framework = "fake"

    def call(self, app: Any, question: str) -> str:
        return question

    def batch(self, app: Any, questions: list[str], concurrency: int) -> list[str]:
        return list(questions)


def test_the_window_opens_after_the_heap_settled() -> None:
    seen: list[int] = []
    system = System("fake", build=lambda apps: object(), concurrent=True)
    run = run_system(system, None, _Driver(), ["q1", "q2"], "batch", warmed=lambda: seen.append(gc.get_freeze_count()))
    assert run.outputs == ["q1", "q2"] and seen and seen[0] > 0 and gc.get_freeze_count() == 0
