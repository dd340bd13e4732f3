"""The vector engine's connections: a psycopg pool that is thrown away when the server goes.

Why not let psycopg's pool ride out an outage: it reconnects in the background with an
exponential backoff, and every checkout meanwhile waits its full timeout. While the server is
down each query then waited ~10 s to fail, and after a restart queries kept waiting until the
backoff ran out (10 s, then 4.6 s on the next query). Here a lost connection discards the
whole pool at once; the next request opens a fresh one behind one direct connect, which fails
at once while the server is still down and succeeds as soon as it is back. Concurrent
requests share one opening attempt, so a burst during an outage costs one connect.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

T = TypeVar("T")
Work = Callable[[psycopg.AsyncConnection], Awaitable[T]]

log = logging.getLogger("accel.engines.vectordb.connections")


class ConnectionLost(Exception):
    """A request failed because its connection (or the pool) could not reach the server."""


class Connections:
    """Open on demand, shared opening, discard on loss. `open_pool()` is the engine's: it
    checks the server and returns an opened pool, or raises a typed error."""

    def __init__(self, open_pool: Callable[[], Awaitable[AsyncConnectionPool]], *, name: str) -> None:
        self._open_pool = open_pool
        self._name = name
        self._pool: AsyncConnectionPool | None = None
        self._opening: asyncio.Task[AsyncConnectionPool] | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self.discarded = 0  # pools thrown away after a lost connection (observable in tests, logs)

    @property
    def is_open(self) -> bool:
        return self._pool is not None

    async def pool(self) -> AsyncConnectionPool:
        """The open pool, opening one if needed (one attempt shared by concurrent callers;
        a caller's cancellation does not cancel the attempt the others wait on)."""
        if self._pool is not None:
            return self._pool
        opening = self._opening
        if opening is None:
            opening = self._opening = asyncio.get_running_loop().create_task(self._open(), name=f"accel-{self._name}-open")
            opening.add_done_callback(self._opened)
        return await asyncio.shield(opening)

    async def _open(self) -> AsyncConnectionPool:
        pool = await self._open_pool()
        self._pool = pool
        return pool

    def _opened(self, task: asyncio.Task[AsyncConnectionPool]) -> None:
        if self._opening is task:
            self._opening = None
        if not task.cancelled():
            task.exception()  # retrieved: every caller that still waits got it too

    async def run(self, work: Work[T], *, retry: bool) -> T:
        """`work(conn)` on a pooled connection. On a lost connection the pool is discarded and,
        when `retry` (reads only: a write may have committed before the loss), the work runs
        once more on a fresh pool; otherwise `ConnectionLost` is raised from the cause."""
        attempts = 2 if retry else 1
        for attempt in range(attempts):
            pool = await self.pool()
            conn: psycopg.AsyncConnection | None = None
            try:
                async with pool.connection() as conn:
                    return await work(conn)
            except (PoolTimeout, psycopg.OperationalError) as exc:
                if not (isinstance(exc, PoolTimeout) or conn is None or conn.broken or conn.closed):
                    raise  # a statement-level error (query cancelled, lock timeout) on a live connection
                self.discard(pool, exc)
                if attempt + 1 == attempts:
                    raise ConnectionLost(str(exc)) from exc
                log.info("%s: connection lost (%s); retrying once on a fresh pool", self._name, type(exc).__name__)
        raise AssertionError("unreachable")

    def discard(self, pool: AsyncConnectionPool, cause: BaseException | None = None) -> None:
        """Forget `pool` (if still current) and close it in a task this object owns."""
        if self._pool is not pool:
            return
        self._pool = None
        self.discarded += 1
        log.warning("%s: lost the server (%s); the pool is discarded and reopened on the next request",
                    self._name, type(cause).__name__ if cause else "closed")
        task = asyncio.get_running_loop().create_task(pool.close(timeout=1.0), name=f"accel-{self._name}-close")
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """Cancel an opening attempt, close the pool and wait for discarded pools to close."""
        opening, self._opening = self._opening, None
        if opening is not None:
            opening.cancel()
            await asyncio.gather(opening, return_exceptions=True)
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
