"""A query's output as a stream: the text deltas of the Decode that produces it, then its value.

`Runtime.stream` yields `Delta`s while the plan's text source generates and one `Final` with
the query's value; an Output dict built from known parts yields each `Part` (and a text part's
`Delta`s) as it is known (`accel.ir.output_parts`); any other output yields only the `Final`.
Leaving the iterator early (break, close, the consumer cancelled) cancels the query, and so
aborts its engine requests, before the iterator returns.

`relay_to_thread` / `relay_to_loop` carry such a stream from the session loop to a consumer in
another thread or on another event loop: a task on the session loop pushes items across with
thread-safe handoffs (a `SimpleQueue`, `call_soon_threadsafe`), so nothing polls.
"""

from __future__ import annotations

import asyncio
import contextvars
import contextlib
import queue
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from accel.types import Delta, Final, Part, StreamItem

T = TypeVar("T")


async def stream_query(run: Callable[[Callable[[StreamItem], None]], Awaitable[Any]]) -> AsyncIterator[StreamItem]:
    """Run `run(on_item)` as a task; yield each delta or part as it arrives, then the value. The
    task lets the query go on while the consumer handles an item; a queue wakes the consumer."""
    items: asyncio.Queue[Delta | Part | None] = asyncio.Queue()
    task = asyncio.get_running_loop().create_task(run(items.put_nowait))
    task.add_done_callback(lambda _: items.put_nowait(None))
    try:
        while (item := await items.get()) is not None:
            yield item
        yield Final(task.result())
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait([task])  # the query's engine requests are aborted before we return
        if not task.cancelled():
            task.exception()  # seen: a failure the consumer left before reading is not "unretrieved"


@dataclass(frozen=True, slots=True)
class _End:
    error: BaseException | None


class _Relay(Generic[T]):
    """Iterates `source()` in a task on `loop`, handing each item and then an `_End` to `put`
    (called on the loop's thread). `cancel()` works from any thread; the `_End` still comes,
    once the source has cleaned up."""

    def __init__(self, loop: asyncio.AbstractEventLoop, source: Callable[[], AsyncIterator[T]], put: Callable[[Any], None],
                 context: contextvars.Context | None = None) -> None:
        self._loop = loop
        self._context = context
        self._source = source
        self._put = put
        self._task: asyncio.Task[None] | None = None
        loop.call_soon_threadsafe(self._start)

    def _start(self) -> None:
        self._task = self._loop.create_task(self._pump(), name="accel-stream-relay", context=self._context)
        self._task.add_done_callback(self._ended)

    async def _pump(self) -> None:
        async with aclosing(self._source()) as items:
            async for item in items:
                self._put(item)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._put(_End(asyncio.CancelledError() if task.cancelled() else task.exception()))

    def cancel(self) -> None:
        """Cancel the source; scheduled after `_start` (same FIFO), so the task exists."""
        self._loop.call_soon_threadsafe(lambda: self._task.cancel())


def relay_to_thread(loop: asyncio.AbstractEventLoop, source: Callable[[], AsyncIterator[T]],
                    context: contextvars.Context | None = None, caller: Any = None) -> Iterator[T]:
    """Blocking iteration, from a thread other than `loop`'s, of `source()` run on `loop` (in
    `context`, else the caller's at the first `next`). Starts at the first `next`; closing early
    cancels the source and waits for its cleanup. With a `ThreadCaller`, this thread also runs
    the user code the query hands to it while it waits for items."""
    items: queue.SimpleQueue[Any] = queue.SimpleQueue() if caller is None else caller.inbox
    relay = _Relay(loop, source, items.put, context)
    ended = False
    try:
        while not isinstance(item := _next(items, caller), _End):
            yield item
        ended = True
        if item.error is not None:
            raise item.error
    finally:
        if not ended:
            relay.cancel()
            while not isinstance(_next(items, caller), _End):
                pass


def _next(items: queue.SimpleQueue[Any], caller: Any) -> Any:
    """The next relayed item, running any user code handed over meanwhile."""
    item = items.get()
    while caller is not None and caller.is_job(item):
        caller.run_job(item)
        item = items.get()
    return item


async def relay_to_loop(loop: asyncio.AbstractEventLoop, source: Callable[[], AsyncIterator[T]],
                        context: contextvars.Context | None = None) -> AsyncIterator[T]:
    """Async iteration, on another event loop, of `source()` run on `loop`. Closing early or
    cancelling the consumer cancels the source and waits for its cleanup."""
    caller = asyncio.get_running_loop()
    items: asyncio.Queue[Any] = asyncio.Queue()

    def put(item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the consumer's loop is closed: nobody listens
            caller.call_soon_threadsafe(items.put_nowait, item)

    relay = _Relay(loop, source, put, context)
    ended = False
    try:
        while not isinstance(item := await items.get(), _End):
            yield item
        ended = True
        if item.error is not None:
            raise item.error
    finally:
        if not ended:
            relay.cancel()
            while not isinstance(await items.get(), _End):
                pass
