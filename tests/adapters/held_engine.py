"""Hold an engine's first call until other requests wait behind it: a busy engine made
deterministic, so a test of cross-run merging never depends on how fast the other threads reach
the loop. A hold of fixed length (0.5 s) failed on a loaded machine, where the threads took
longer than that to submit and every call carried one item."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from accel.session import Session

HOLD_LIMIT_S = 60.0
"""How long the first call waits for company before it goes anyway (the test's assertion then
says what merged); far above any wait a working runtime needs."""


@contextmanager
def first_call_held(session: Session, name: str, waiting: int = 2) -> Iterator[list[int]]:
    """While inside, the first call engine `name` runs waits until `waiting` requests are queued
    behind it (`EngineScheduler.queued`, checked as each request is queued, never polled).
    Yields the size of every call, in order."""
    scheduler = session._runtime.schedulers[name]
    engine = session.get_engine(name)
    calls: list[int] = []
    company: asyncio.Event | None = None
    enqueue, run = scheduler._enqueue, engine.run

    def crowded() -> bool:
        return scheduler.queued >= waiting

    async def counting_enqueue(task: Any) -> None:
        await enqueue(task)
        if company is not None and crowded():
            company.set()

    async def held_run(batch: list[Any]) -> list[Any]:
        nonlocal company
        calls.append(len(batch))
        if len(calls) == 1:
            company = asyncio.Event()
            if not crowded():
                try:
                    await asyncio.wait_for(company.wait(), HOLD_LIMIT_S)
                except TimeoutError:
                    pass
        return await run(batch)

    scheduler._enqueue, engine.run = counting_enqueue, held_run
    try:
        yield calls
    finally:
        del scheduler._enqueue, engine.run
