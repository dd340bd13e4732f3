"""`accel.batch(app, inputs)`: one batch call over any wrapped app, for apps without a batch
method of their own (LlamaIndex query engines) and for Runnables alike. The app is a drop-in
(`accel.wrap`'s); its `DropInState` says what to run: the app's own `batch` / `abatch`, or an
entry point once per input.

The call is one share scope (`accel.runtime.sharing`): the queries' identical deterministic
engine requests run once. Results and errors come back as a stock batch returns them: in input
order; with `return_exceptions=True` a failing query's exception stands in its place, without
it the first failure (in input order) is raised once every query has finished.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from accel.adapters.common.dropin import DropInState, state_of
from accel.runtime.sharing import batch_scope

DEFAULT_CONCURRENCY = 16


def _target(app: Any) -> DropInState:
    """The wrap's drop-in state: its template and counters (the share scope's), and how a batch
    runs (`DropInState.own_batch` / `entry`)."""
    state = state_of(app)
    if state is None:
        raise TypeError(f"accel.batch: {type(app).__name__} is not an app accel.wrap returned. "
                        "Remedy: accel.batch(accel.wrap(app), inputs)")
    if not state.own_batch and state.entry is None:
        raise TypeError(f"accel.batch: {type(app).__name__} has no query/invoke/chat/retrieve entry point. "
                        "Remedy: call the app's own entry point per input")
    return state


def batch(app: Any, inputs: Sequence[Any], *, return_exceptions: bool = False,
          max_concurrency: int = DEFAULT_CONCURRENCY) -> list[Any]:
    """`app`'s answers to `inputs`, run together (threads, as LangChain's `batch`)."""
    state = _target(app)
    if state.own_batch:  # a Runnable: its own batch, in a scope
        with batch_scope(state.template, state.counters):
            return app.batch(list(inputs), {"max_concurrency": max_concurrency}, return_exceptions=return_exceptions)
    method = getattr(app, state.entry[0])
    with batch_scope(state.template, state.counters), \
            ThreadPoolExecutor(max(1, min(max_concurrency, len(inputs))), thread_name_prefix="accel-batch") as pool:
        futures = [pool.submit(contextvars.copy_context().run, method, x) for x in inputs]
        outcomes = [_outcome(f) for f in futures]
    return _settle(outcomes, return_exceptions)


async def abatch(app: Any, inputs: Sequence[Any], *, return_exceptions: bool = False,
                 max_concurrency: int = DEFAULT_CONCURRENCY) -> list[Any]:
    """`batch` for async callers: the app's async entry point gathered, `max_concurrency` at once."""
    state = _target(app)
    if state.own_batch:
        with batch_scope(state.template, state.counters):
            return await app.abatch(list(inputs), {"max_concurrency": max_concurrency}, return_exceptions=return_exceptions)
    method = getattr(app, state.entry[1])
    gate = asyncio.Semaphore(max(1, max_concurrency))

    async def one(x: Any) -> Any:
        async with gate:
            return await method(x)

    with batch_scope(state.template, state.counters):
        outcomes = await asyncio.gather(*(one(x) for x in inputs), return_exceptions=True)
    return _settle(list(outcomes), return_exceptions)


def _outcome(future: Any) -> Any:
    try:
        return future.result()
    except Exception as exc:  # kept in its place, like a stock batch with return_exceptions
        return exc


def _settle(outcomes: list[Any], return_exceptions: bool) -> list[Any]:
    if not return_exceptions:
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                raise outcome
    return outcomes
