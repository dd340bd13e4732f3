"""Unreachable, silent and dead servers give a typed error quickly, never a hang."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accel.engines.base import VectorQuery
from accel.engines.errors import EngineUnavailable, InvalidRequest
from accel.engines.vectordb import PgVectorEngine, Row, start_local_postgres, stop_local_postgres


async def test_unreachable_dsn_is_typed_fast_and_hides_the_password(tmp_path: Path) -> None:
    dsn = f"postgresql://postgres:s3cret@/postgres?host={tmp_path / 'no-server-here'}"
    began = time.perf_counter()
    with pytest.raises(EngineUnavailable) as caught:
        await PgVectorEngine(dsn).start()
    assert time.perf_counter() - began < 5
    assert "s3cret" not in str(caught.value) and "***" in caught.value.cause
    assert "accel up" in caught.value.remedy and "ACCEL_PG_DSN" in caught.value.remedy
    with pytest.raises(EngineUnavailable):  # run() starts lazily and fails the same way
        await PgVectorEngine(dsn).run([VectorQuery([1.0], 1, "x")])


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never answers: a hung server."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


async def test_silent_server_hits_the_connect_timeout(silent_server: int) -> None:
    engine = PgVectorEngine(f"postgresql://postgres:pw@127.0.0.1:{silent_server}/postgres", connect_timeout_s=2)
    began = time.perf_counter()
    with pytest.raises(EngineUnavailable):
        await engine.start()
    assert time.perf_counter() - began < 10


async def test_server_dying_under_a_started_engine(scratch_dir: Path) -> None:
    """Regression (issue 14): psycopg's pool made each query wait its 10 s checkout timeout
    while the server was down, and kept doing so for a while after it was back."""
    data_dir = scratch_dir / "pgdata"
    dsn = start_local_postgres(data_dir)
    query = [VectorQuery([1.0, 0.0], 1, "doomed")]
    try:
        async with PgVectorEngine(dsn) as engine:
            await engine.create_collection("doomed", 2)
            await engine.ingest("doomed", [Row("a", "a", [1.0, 0.0])])
            assert (await engine.run(query))[0][0].id == "a"
            stop_local_postgres(data_dir)
            for _ in range(3):  # the broken pooled connection, then fresh attempts
                began = time.perf_counter()
                with pytest.raises(EngineUnavailable) as caught:
                    await engine.run(query)
                assert time.perf_counter() - began < 2, "a down server must fail at once, not after the pool timeout"
                assert "accel up" in caught.value.remedy
            began = time.perf_counter()
            failures = await asyncio.gather(*(engine.run(query) for _ in range(24)), return_exceptions=True)
            assert all(isinstance(f, EngineUnavailable) for f in failures)
            assert time.perf_counter() - began < 2
            assert start_local_postgres(data_dir) == dsn
            began = time.perf_counter()
            assert (await engine.run(query))[0][0].id == "a"  # back at once, same engine object
            assert time.perf_counter() - began < 2
    finally:
        stop_local_postgres(data_dir)


async def test_restart_between_queries_is_invisible(scratch_dir: Path) -> None:
    """A read on a pooled connection the restart broke is retried once on a fresh pool."""
    data_dir = scratch_dir / "pgdata"
    start_local_postgres(data_dir)
    query = [VectorQuery([1.0, 0.0], 1, "kept")]
    try:
        async with PgVectorEngine(start_local_postgres(data_dir)) as engine:
            await engine.create_collection("kept", 2)
            await engine.ingest("kept", [Row("a", "a", [1.0, 0.0])])
            assert (await engine.run(query))[0][0].id == "a"
            stop_local_postgres(data_dir)
            start_local_postgres(data_dir)
            results = await asyncio.gather(*(engine.run(query) for _ in range(8)))
            assert all(r[0][0].id == "a" for r in results)
            with pytest.raises(InvalidRequest):  # statement errors are not connection losses
                await engine.run([VectorQuery([1.0, 0.0], 1, "missing_table")])
            assert (await engine.run(query))[0][0].id == "a"
    finally:
        stop_local_postgres(data_dir)
