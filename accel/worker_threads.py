"""Worker threads that the session loop hands blocking code to without waiting for one to start.

`ThreadPoolExecutor.submit` starts a missing worker on the submitter's thread, and
`Thread.start` returns only once the new thread has run: it needs the GIL, which a busy
process hands over at its switch interval (5 ms). On the session loop that wait holds up every
query. A LlamaIndex batch of 32 on the `h100-8b` twins starts about 30 workers that way (its
rerank postprocessors run as stock code), and py-spy found the loop inside `Thread.start` for a
quarter of its busy samples. Measured here (2 cores, two threads spinning beside the
submitter): 30 submits that each started a worker held the submitter 411 ms; started as this
pool starts them (`_thread.start_new_thread`, which does not wait) they held it 2 ms, and all 30
were running by 83 ms.

A worker is named as `ThreadPoolExecutor` names its own (`<prefix>_<n>`), serves until the pool
shuts down, and runs as a daemon: a worker blocked in user code never holds up the
interpreter's exit.
"""

from __future__ import annotations

import _thread
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from queue import SimpleQueue
from typing import Any

log = logging.getLogger("accel.worker_threads")

StartThread = Callable[[Callable[..., None], tuple[Any, ...]], object]


@dataclass(slots=True)
class _Work:
    future: Future[Any]
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def run(self) -> None:
        if not self.future.set_running_or_notify_cancel():
            return
        try:
            result = self.fn(*self.args, **self.kwargs)
        except BaseException as err:  # noqa: BLE001 - handed to whoever awaits the future
            self.future.set_exception(err)
        else:
            self.future.set_result(result)


class WorkerPool(Executor):
    """An executor whose `submit` never waits for a thread: a missing worker is started and
    left to begin when it gets the GIL, while the submitter goes on. `start_thread` (default
    `_thread.start_new_thread`) lets a test hold a worker back."""

    def __init__(self, max_workers: int, thread_name_prefix: str, *, start_thread: StartThread | None = None) -> None:
        if max_workers <= 0:
            raise ValueError(f"WorkerPool {thread_name_prefix!r}: max_workers must be positive, got {max_workers}")
        self.max_workers = max_workers
        self.prefix = thread_name_prefix
        self._start_thread = start_thread or _thread.start_new_thread
        self._work: SimpleQueue[_Work | None] = SimpleQueue()
        self._idle = threading.Semaphore(0)  # one token per worker back from a piece of work
        self._lock = threading.Lock()
        self._all_left = threading.Condition(self._lock)
        self._started = 0
        self._serving = 0
        self._closed = False

    @property
    def workers(self) -> int:
        """Workers started and not yet left (some may still be waiting for the GIL to begin)."""
        with self._lock:
            return self._serving

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"WorkerPool {self.prefix!r} is shut down: no new work can start")
            self._work.put(_Work(future, fn, args, kwargs))
            if self._idle.acquire(blocking=False) or self._serving >= self.max_workers:
                return future  # an idle worker takes it, or the first one to finish
            name = f"{self.prefix}_{self._started}"
            self._started += 1
            self._serving += 1
        try:
            self._start_thread(self._serve, (name,))
        except RuntimeError as err:  # the system refused a thread ("can't start new thread")
            with self._lock:
                self._serving -= 1
                serving = self._serving
            if not serving:
                future.cancel()  # never runs: no worker will take it
                raise RuntimeError(f"WorkerPool {self.prefix!r}: no worker thread could be started ({err}). "
                                   "Remedy: raise the process's thread limit or run fewer queries at once") from err
            log.warning("WorkerPool %r: could not start a worker (%s); the work waits for one of the %d running",
                        self.prefix, err, serving)
        return future

    def _serve(self, name: str) -> None:
        threading.current_thread().name = name
        try:
            while (work := self._work.get()) is not None:
                work.run()
                del work  # drop its arguments and result before waiting for the next
                self._idle.release()
            self._work.put(None)  # the next worker leaves too
        finally:
            _forget_this_thread()
            with self._lock:
                self._serving -= 1
                self._all_left.notify_all()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No new work; with `cancel_futures`, work not yet begun is cancelled; with `wait`,
        returns once every worker has left (after the work it was running)."""
        queued: list[_Work] = []
        with self._lock:
            self._closed = True
            while cancel_futures and not self._work.empty():
                item = self._work.get_nowait()
                if item is not None:
                    queued.append(item)
            self._work.put(None)
        for item in queued:  # outside the lock: a cancelled future's callbacks run here
            item.future.cancel()
        if wait:
            with self._lock:
                self._all_left.wait_for(lambda: self._serving == 0)


def _forget_this_thread() -> None:
    """Drop the record `threading` keeps of this worker. A thread it did not start gets a dummy
    record on first use (the worker's name; any log record's `threadName`), which Python 3.11
    never removes: `threading.enumerate()` would list every worker that has left as alive."""
    with threading._active_limbo_lock:  # noqa: SLF001 - no public way to drop a dummy record
        threading._active.pop(threading.get_ident(), None)  # noqa: SLF001
