"""Where a query's opaque user code runs: on the caller's thread or the caller's event loop.

Stock LangChain runs a chain's steps on the thread that called `invoke`, and an `ainvoke`'s
steps in the caller's task on the caller's loop. A wrapped query runs on accel's session loop,
but the code accel does not lower must still run where stock runs it: thread-locals, loop-bound
clients (async database engines, aiohttp sessions), blocking-call detectors and callback
handlers all notice the difference. So a query carries a `Caller`:

- `ThreadCaller`: a sync caller's thread, which waits in `serve()` while its query runs and
  executes the query's user code handed to it (a second piece of user code that is ready while
  the thread is busy goes to a worker thread, as stock's parallel branches do);
- `LoopCaller`: an async caller's loop, on which the query's coroutines run as tasks.

Both count the pieces started (`started`), which decides whether a failed query may still be
answered by the stock app: never once user code has run (it may have side effects).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import queue
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from accel.worker_threads import WorkerPool

T = TypeVar("T")

OVERFLOW_WORKERS = 64
_overflow: WorkerPool | None = None
_overflow_lock = threading.Lock()


class Caller(Protocol):
    asynchronous: bool
    """Whether the caller entered through an async entry point (so user code runs its async
    methods, as stock's `ainvoke` does)."""
    started: int

    def call(self, fn: Callable[[], T]) -> Awaitable[T]:
        """Run blocking `fn()` where the caller would; awaited on the session loop."""

    def acall(self, make: Callable[[], Coroutine[Any, Any, T]]) -> Awaitable[T]:
        """Run the coroutine `make()` where the caller would (asynchronous callers only)."""


def user_code_pool() -> WorkerPool:
    global _overflow
    with _overflow_lock:
        if _overflow is None:
            _overflow = WorkerPool(OVERFLOW_WORKERS, thread_name_prefix="accel-user")
        return _overflow


class _Done:
    pass


class ThreadCaller:
    """The calling thread as the query's worker. Create it on the caller's thread, start the
    query, then `serve(future)` on that thread until the query is done."""

    asynchronous = False

    def __init__(self) -> None:
        self.started = 0
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._busy = False

    def call(self, fn: Callable[[], T]) -> Awaitable[T]:
        loop = asyncio.get_running_loop()
        result: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()  # the query's context, as the node sees it
        self.started += 1
        with self._lock:
            overflow, self._busy = self._busy, True
        if overflow:
            return loop.run_in_executor(user_code_pool(), context.run, fn)
        self._jobs.put(_Job(fn, context, loop, result))
        return result

    @property
    def inbox(self) -> queue.SimpleQueue[Any]:
        """Where handed-over user code arrives; a relay may share it (see `output_stream`)."""
        return self._jobs

    def is_job(self, item: Any) -> bool:
        return isinstance(item, _Job)

    def run_job(self, job: _Job) -> None:
        """Run one handed-over piece of user code on this thread and hand its outcome back."""
        if job.result.cancelled():  # its query was cancelled while the job waited
            return
        try:
            value = job.context.run(job.fn)
        except BaseException as err:  # noqa: BLE001 - handed back to the awaiting node
            outcome: tuple[Any, BaseException | None] = (None, err)
        else:
            outcome = (value, None)
        with self._lock:
            self._busy = False
        job.loop.call_soon_threadsafe(_settle, job.result, *outcome)

    def serve(self, done: concurrent.futures.Future[T]) -> T:
        """Run handed-over user code until `done` completes; return (or raise) its result."""
        done.add_done_callback(lambda _: self._jobs.put(_Done))
        while (job := self._jobs.get()) is not _Done:
            self.run_job(job)
        return done.result()


@dataclass(frozen=True, slots=True)
class _Job:
    fn: Callable[[], Any]
    context: contextvars.Context
    loop: asyncio.AbstractEventLoop
    result: asyncio.Future[Any]


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # the node was cancelled meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


class LoopCaller:
    """The caller's event loop: the query's coroutines run there as tasks, in the query's
    context; cancelling the awaiting node cancels the task."""

    asynchronous = True

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.started = 0

    def call(self, fn: Callable[[], T]) -> Awaitable[T]:
        """Blocking code of an async caller runs in a worker thread (stock's `ainvoke` of a
        sync component does `run_in_executor` too), never on either loop."""
        self.started += 1
        context = contextvars.copy_context()
        return asyncio.get_running_loop().run_in_executor(user_code_pool(), context.run, fn)

    def acall(self, make: Callable[[], Coroutine[Any, Any, T]]) -> Awaitable[T]:
        self.started += 1
        context = contextvars.copy_context()
        here = asyncio.get_running_loop()
        if here is self.loop:
            return here.create_task(make(), context=context)
        # the task starts in the query's context (the node's, captured by call_soon_threadsafe);
        # cancelling the awaiting node cancels it on the caller's loop
        return asyncio.wrap_future(context.run(asyncio.run_coroutine_threadsafe, make(), self.loop))


def default_executor_is_asyncios(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether `loop`'s default executor is the one asyncio makes itself (or none yet), not one
    the user set (`loop.set_default_executor`). asyncio sizes its own once, `min(32, CPU count
    + 4)` threads, and the frameworks hand an async call's sync code to it; accel hands that
    code to `user_code_pool` instead while this holds (a user-set executor is the user's to
    size). Reads the loop's `_default_executor` (CPython's asyncio; a loop implementation
    without it counts as asyncio's)."""
    executor = getattr(loop, "_default_executor", None)
    return executor is None or getattr(executor, "_thread_name_prefix", None) == "asyncio"


async def in_user_pool(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` in `user_code_pool`, in a copy of the current context, as
    LangChain's `run_in_executor` runs it in the default executor (a StopIteration turned into
    RuntimeError: an asyncio future cannot carry it)."""
    def call() -> T:
        try:
            return fn(*args, **kwargs)
        except StopIteration as err:
            raise RuntimeError from err

    return await asyncio.get_running_loop().run_in_executor(user_code_pool(), contextvars.copy_context().run, call)

