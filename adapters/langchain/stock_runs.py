"""Running the stock chain from a wrapped one: every call inside a `WrappedRun`, logged on
`accel.adapters.langchain` and counted in `explain()` (why the stock chain answered), with its
engine calls left to the stock components (`stock_call()`) or captured by the floor
(`captured`). Generators hold the run's scope only while they run, never across a yield,
where the consumer's code runs.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing, closing, nullcontext
from typing import Any

from accel.scope import WrappedRun, context_with, stock_call, wrapped_run

log = logging.getLogger("accel.adapters.langchain")

END = object()


class StockRuns:
    """The stock path of `LoweredChain`: what it needs of it is its name, session, counters,
    bound root (`_root`) and original."""

    name: str
    counters: Counter[str]
    original: Any
    _root: Any
    _session: Any

    def _new_run(self) -> WrappedRun:
        return WrappedRun(app=self.name, session=self._session)

    def _stock(self, why: str, method: str, *args: Any, target: Any = None, captured: bool = False, **kwargs: Any) -> Any:
        """`method` of the stock chain (the bound root, once `_bind` applied the outer
        bindings; else `target`), logged and counted; with `captured`, its engine calls still
        go through accel's engine schedulers (the floor)."""
        log.info("accel.wrap(%s): %s; %s runs the stock chain", self.name, why, method)
        self.counters[f"stock runs: {why}"] += 1
        with wrapped_run(self._new_run()), (nullcontext() if captured else stock_call()):
            return getattr(target or self._root, method)(*args, **kwargs)

    async def _astock(self, why: str, method: str, *args: Any, target: Any = None, captured: bool = False, **kwargs: Any) -> Any:
        log.info("accel.wrap(%s): %s; %s runs the stock chain", self.name, why, method)
        self.counters[f"stock runs: {why}"] += 1
        with wrapped_run(self._new_run()), (nullcontext() if captured else stock_call()):
            return await getattr(target or self._root, method)(*args, **kwargs)

    def _stock_stream(self, why: str, input: Any, config: Any, *, captured: bool = False, **kwargs: Any) -> Iterator[Any]:
        """The stock chain's stream (with `captured`, its engine calls go through the floor)."""
        log.info("accel.wrap(%s): %s; stream runs the stock chain", self.name, why)
        self.counters[f"stock runs: {why}"] += 1
        context = context_with(self._new_run())
        step = captured_next if captured else stock_next
        with closing(context.run(self._root.stream, input, config, **kwargs)) as stock:
            while (chunk := context.run(step, stock)) is not END:
                yield chunk

    async def _astock_stream(self, why: str, input: Any, config: Any, *, captured: bool = False, **kwargs: Any) -> AsyncIterator[Any]:
        log.info("accel.wrap(%s): %s; astream runs the stock chain", self.name, why)
        self.counters[f"stock runs: {why}"] += 1
        run = self._new_run()
        async with aclosing(self._root.astream(input, config, **kwargs)) as stock:
            while (chunk := await scoped_anext(run, stock, captured=captured)) is not END:
                yield chunk


def stock_next(stream: Iterator[Any]) -> Any:
    """One step of the original chain's stream marked as a stock call (patched entry points
    inside stay stock); the mark is not held across the yield, where the consumer runs."""
    with stock_call():
        return next(stream, END)


async def stock_anext(stream: AsyncIterator[Any]) -> Any:
    with stock_call():
        return await anext(stream, END)


def captured_next(stream: Iterator[Any]) -> Any:
    """One step of the stock chain's stream whose engine calls the floor captures."""
    return next(stream, END)


def delegate(wrapped: StockRuns, name: str) -> Callable[..., Any]:
    """The original's own sync entry point `name`, inside a `WrappedRun`. Generators (stream,
    transform, batch_as_completed) hold the scope only while they run, never across a yield."""
    method = getattr(wrapped.original, name)
    if name in ("stream", "transform", "batch_as_completed"):
        def generate(*args: Any, **kwargs: Any) -> Iterator[Any]:
            context = context_with(wrapped._new_run())
            items = context.run(method, *args, **kwargs)
            with closing(items):
                while (item := context.run(stock_next, items)) is not END:
                    yield item

        return generate

    def call(*args: Any, **kwargs: Any) -> Any:
        with wrapped_run(wrapped._new_run()), stock_call():
            return method(*args, **kwargs)

    return call


def adelegate(wrapped: StockRuns, name: str) -> Callable[..., Any]:
    method = getattr(wrapped.original, name)
    if name in ("ainvoke", "abatch"):
        async def call(*args: Any, **kwargs: Any) -> Any:
            with wrapped_run(wrapped._new_run()), stock_call():
                return await method(*args, **kwargs)

        return call

    async def generate(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        run = wrapped._new_run()
        async with aclosing(method(*args, **kwargs)) as items:  # nothing runs until iterated
            while (item := await scoped_anext(run, items)) is not END:
                yield item

    return generate


async def scoped_anext(run: WrappedRun, items: AsyncIterator[Any], *, captured: bool = False) -> Any:
    """One step of a stock async stream inside `run` (the scope is not held across yields);
    with `captured`, its engine calls go through the floor."""
    with wrapped_run(run), (nullcontext() if captured else stock_call()):
        return await anext(items, END)
