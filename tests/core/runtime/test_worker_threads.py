"""The worker pool that the session loop hands blocking code to (`accel.worker_threads`)."""

from __future__ import annotations

import _thread
import asyncio
import contextvars
import threading
from concurrent.futures import CancelledError
from typing import Any

import pytest

from accel.caller import user_code_pool
from accel.worker_threads import WorkerPool


class HeldStarts:
    """Starts workers that begin only when released: a worker still waiting for the GIL."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.started = 0

    def __call__(self, fn: Any, args: tuple[Any, ...]) -> None:
        self.started += 1
        _thread.start_new_thread(lambda: (self.go.wait(), fn(*args)), ())


def test_submit_returns_before_the_worker_it_starts_has_begun() -> None:
    starts = HeldStarts()
    pool = WorkerPool(4, "t", start_thread=starts)
    futures = [pool.submit(lambda i=i: i * 2) for i in range(3)]
    # ThreadPoolExecutor.submit would wait here for each new thread to run
    assert starts.started == 3 and not any(f.running() or f.done() for f in futures)
    starts.go.set()
    assert [f.result(timeout=10) for f in futures] == [0, 2, 4]
    pool.shutdown()
    assert pool.workers == 0
    assert not [t.name for t in threading.enumerate() if t.name.startswith("t_")]  # none listed alive once gone


def test_an_idle_worker_is_reused_and_max_workers_is_kept() -> None:
    starts = HeldStarts()
    starts.go.set()
    pool = WorkerPool(2, "t", start_thread=starts)
    for i in range(5):  # one after another: the first worker serves them all
        assert pool.submit(lambda i=i: i).result(timeout=10) == i
    assert starts.started == 1
    gate = threading.Event()
    held = [pool.submit(gate.wait, 10) for _ in range(4)]
    assert starts.started == 2 and pool.workers == 2  # the other two wait for a worker
    gate.set()
    assert all(f.result(timeout=10) for f in held)
    pool.shutdown()


def test_errors_reach_the_future_and_the_worker_goes_on() -> None:
    pool = WorkerPool(1, "t")

    def fail() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        pool.submit(fail).result(timeout=10)
    assert pool.submit(lambda: "after").result(timeout=10) == "after"
    pool.shutdown()


def test_shutdown_cancels_queued_work_finishes_running_work_and_refuses_new_work() -> None:
    pool = WorkerPool(1, "t")
    gate, began = threading.Event(), threading.Event()
    running = pool.submit(lambda: (began.set(), gate.wait(10))[1])
    assert began.wait(10)
    queued = pool.submit(lambda: "never")
    closer = threading.Thread(target=pool.shutdown, kwargs={"wait": True, "cancel_futures": True})
    closer.start()
    with pytest.raises(CancelledError):
        queued.result(timeout=10)
    assert closer.is_alive()  # waits for the work running
    gate.set()
    closer.join(10)
    assert not closer.is_alive() and running.result() is True and pool.workers == 0
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(lambda: None)


def test_run_in_executor_runs_in_a_named_worker_in_the_callers_context() -> None:
    request = contextvars.ContextVar("request")
    pool = WorkerPool(2, "accel-test")

    def where() -> tuple[str, str]:
        return threading.current_thread().name, request.get()

    async def main() -> tuple[str, str]:
        request.set("q1")
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(pool, context.run, where)

    name, value = asyncio.run(main())
    assert name.startswith("accel-test_") and name != threading.main_thread().name and value == "q1"
    pool.shutdown()


def test_user_code_runs_on_a_pool_that_never_waits_for_a_thread() -> None:
    assert isinstance(user_code_pool(), WorkerPool)


def test_a_refused_thread_fails_the_submit_only_when_no_worker_could_take_the_work(caplog: pytest.LogCaptureFixture) -> None:
    def refused(fn: Any, args: tuple[Any, ...]) -> None:
        raise RuntimeError("can't start new thread")

    with pytest.raises(RuntimeError, match="no worker thread could be started"):
        WorkerPool(4, "none", start_thread=refused).submit(lambda: "lost")

    starts = [_thread.start_new_thread, refused]
    pool = WorkerPool(4, "one", start_thread=lambda fn, args: starts.pop(0)(fn, args))
    gate, began = threading.Event(), threading.Event()
    first = pool.submit(lambda: (began.set(), gate.wait(10))[1])
    assert began.wait(10)  # the one worker is busy, with no idle token to spare
    second = pool.submit(lambda: "served by the running worker")
    assert "could not start a worker" in caplog.text
    gate.set()
    assert first.result(timeout=10) is True and second.result(timeout=10) == "served by the running worker"
    pool.shutdown()


def test_max_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_workers"):
        WorkerPool(0, "t")
