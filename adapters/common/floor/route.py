"""Sending one captured component call to the shared session's engine scheduler.

A call becomes one `EngineTask` of its program (`query_id = "program<N>"`), so the topology
policy batches it with every other program's waiting requests for the same engine. Sync
callers block their own thread on the session loop; async callers await it from any loop
(directly when they are on the session loop). LLM calls carry the program's priority and
add their service time to the program (`programs`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from accel.adapters.common.bindings import EngineSpec
from accel.adapters.common.floor import programs
from accel.session import EngineTask
from accel.scope import WrappedRun, current_run, in_stock_call

log = logging.getLogger("accel.floor")

_ids = itertools.count()
_auto = {"on": False}


class OnSessionLoop(Exception):
    """A blocking component call was made on the session loop's own thread (it stays stock)."""


def set_auto(on: bool) -> None:
    """`ACCEL_AUTO=1`: capture engine calls process-wide, not only inside wrapped runs."""
    _auto["on"] = bool(on)


def active_run() -> WrappedRun | None:
    """The program a component call belongs to, or None when it must run as stock: outside
    any wrapped run (unless auto), or inside `stock_call()` (a wrapped app's stock fallback)."""
    if in_stock_call():
        return None
    run = current_run()
    if run is None and _auto["on"]:
        run = WrappedRun(app="auto")  # a call outside any wrapped app is a program of its own
    return run


# ---- counters (explain / tests): routed, stock (why), fallback (engine error) ----------------


@dataclass
class Stats:
    routed: Counter = field(default_factory=Counter)
    stock: Counter = field(default_factory=Counter)
    fallback: Counter = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, name: str, key: Any) -> bool:
        """Count one event; True the first time this key is seen (log it once)."""
        with self._lock:
            counter: Counter = getattr(self, name)
            counter[key] += 1
            return counter[key] == 1

    def snapshot(self) -> dict[str, dict[Any, int]]:
        with self._lock:
            return {"routed": dict(self.routed), "stock": dict(self.stock), "fallback": dict(self.fallback)}

    def reset(self) -> None:
        with self._lock:
            self.routed.clear()
            self.stock.clear()
            self.fallback.clear()


stats = Stats()


def note_stock(component: str, reason: str) -> None:
    """A captured component ran its own code for this call (an option accel does not map)."""
    if stats.count("stock", (component, reason)):
        log.info("%s runs as stock: %s", component, reason)


def note_fallback(component: str, err: BaseException) -> None:
    """An accel engine failed before serving the call; the component's own code serves it."""
    if stats.count("fallback", (component, type(err).__name__)):
        log.warning("%s fell back to its own code after an accel engine error: %s", component, err)


# ---- submission ----------------------------------------------------------------------------


def session_of(run: WrappedRun) -> Any:
    """The session serving `run`: the wrapped app's own, else the process-wide one."""
    if run.session is not None:
        return run.session
    from accel.session import get_session

    return get_session()


def _task(run: WrappedRun, component: str, requests: list[Any], llm: bool) -> EngineTask:
    priority = programs.priority(run) if llm else 0
    return EngineTask(query_id=f"program{run.program}", node=f"{component}#{next(_ids)}", depth=0,
                      requests=requests, priority=priority)


async def _submit(session: Any, name: str, task: EngineTask, run: WrappedRun, llm: bool) -> list[Any]:
    scheduler = await session.scheduler(name)
    try:
        return await scheduler.submit(task)
    finally:
        if llm and task.dispatched_at is not None:
            run.add_service(time.perf_counter() - task.dispatched_at)


async def _stream(session: Any, name: str, task: EngineTask, run: WrappedRun) -> AsyncIterator[Any]:
    scheduler = await session.scheduler(name)
    try:
        async for chunk in scheduler.stream(task):
            yield chunk
    finally:
        if task.dispatched_at is not None:
            run.add_service(time.perf_counter() - task.dispatched_at)


def submit_sync(run: WrappedRun, spec: EngineSpec, requests: list[Any], component: str) -> list[Any]:
    """The engine's results for `requests`, blocking this thread (never the session loop's)."""
    session = session_of(run)
    if session.in_loop_thread():
        raise OnSessionLoop(component)
    name = spec.bind(session)
    llm = spec.kind == "llm"
    task = _task(run, component, requests, llm)
    future = asyncio.run_coroutine_threadsafe(_submit(session, name, task, run, llm), session.loop)
    try:
        result = future.result()
    except BaseException:
        future.cancel()
        raise
    stats.count("routed", component)
    return result


async def submit_async(run: WrappedRun, spec: EngineSpec, requests: list[Any], component: str) -> list[Any]:
    """`submit_sync` for async callers on any loop; cancelling the caller withdraws the task."""
    session = session_of(run)
    name = spec.bind(session)
    llm = spec.kind == "llm"
    loop = session.loop
    work = _submit(session, name, _task(run, component, requests, llm), run, llm)
    if asyncio.get_running_loop() is loop:
        result = await work
    else:
        result = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, loop))
    stats.count("routed", component)
    return result


def stream_sync(run: WrappedRun, spec: EngineSpec, request: Any, component: str) -> Iterator[Any]:
    """One LLM request streamed to this thread; closing the iterator aborts the request."""
    from accel.session import relay_to_thread

    session = session_of(run)
    if session.in_loop_thread():
        raise OnSessionLoop(component)
    name = spec.bind(session)
    task = _task(run, component, [request], True)
    stats.count("routed", component)
    return relay_to_thread(session.loop, lambda: _stream(session, name, task, run))


def stream_async(run: WrappedRun, spec: EngineSpec, request: Any, component: str) -> AsyncIterator[Any]:
    """One LLM request streamed to async code on any loop."""
    from accel.session import relay_to_loop

    session = session_of(run)
    name = spec.bind(session)
    task = _task(run, component, [request], True)
    stats.count("routed", component)
    loop = session.loop
    if asyncio.get_running_loop() is loop:
        return _stream(session, name, task, run)
    return relay_to_loop(loop, lambda: _stream(session, name, task, run))
