"""`accel.batch(app, inputs)`: one batch call over any wrapped app, for apps without a batch
method of their own (LlamaIndex query engines) and for Runnables alike.

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

from accel.runtime.sharing import batch_scope

DEFAULT_CONCURRENCY = 16


def _template_of(app: Any) -> Any:
    return getattr(app, "template", None) if hasattr(app, "explain") else None


def _entry(app: Any) -> tuple[str, str]:
    for sync, async_ in (("query", "aquery"), ("invoke", "ainvoke"), ("chat", "achat"), ("retrieve", "aretrieve")):
        if hasattr(app, sync):
            return sync, async_
    raise TypeError(f"accel.batch: {type(app).__name__} has no query/invoke/chat/retrieve entry point. "
                    "Remedy: pass an app accel.wrap returned, or the app itself")


def batch(app: Any, inputs: Sequence[Any], *, return_exceptions: bool = False,
          max_concurrency: int = DEFAULT_CONCURRENCY) -> list[Any]:
    """`app`'s answers to `inputs`, run together (threads, as LangChain's `batch`)."""
    if hasattr(app, "batch") and hasattr(app, "abatch"):  # a Runnable: its own batch, in a scope
        with batch_scope(_template_of(app), getattr(app, "counters", None)):
            return app.batch(list(inputs), {"max_concurrency": max_concurrency}, return_exceptions=return_exceptions)
    method = getattr(app, _entry(app)[0])
    with batch_scope(_template_of(app), getattr(app, "counters", None)), \
            ThreadPoolExecutor(max(1, min(max_concurrency, len(inputs))), thread_name_prefix="accel-batch") as pool:
        futures = [pool.submit(contextvars.copy_context().run, method, x) for x in inputs]
        outcomes = [_outcome(f) for f in futures]
    return _settle(outcomes, return_exceptions)


async def abatch(app: Any, inputs: Sequence[Any], *, return_exceptions: bool = False,
                 max_concurrency: int = DEFAULT_CONCURRENCY) -> list[Any]:
    """`batch` for async callers: the app's async entry point gathered, `max_concurrency` at once."""
    if hasattr(app, "batch") and hasattr(app, "abatch"):
        with batch_scope(_template_of(app), getattr(app, "counters", None)):
            return await app.abatch(list(inputs), {"max_concurrency": max_concurrency}, return_exceptions=return_exceptions)
    method = getattr(app, _entry(app)[1])
    gate = asyncio.Semaphore(max(1, max_concurrency))

    async def one(x: Any) -> Any:
        async with gate:
            return await method(x)

    with batch_scope(_template_of(app), getattr(app, "counters", None)):
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
