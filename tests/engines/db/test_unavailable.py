"""Unreachable, silent and dead servers give a typed error quickly, never a hang."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accel.engines.base import VectorQuery
from accel.engines.errors import EngineUnavailable
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
    data_dir = scratch_dir / "pgdata"
    dsn = start_local_postgres(data_dir)
    try:
        async with PgVectorEngine(dsn, checkout_timeout_s=3) as engine:
            await engine.create_collection("doomed", 2)
            await engine.ingest("doomed", [Row("a", "a", [1.0, 0.0])])
            assert (await engine.run([VectorQuery([1.0, 0.0], 1, "doomed")]))[0][0].id == "a"
            stop_local_postgres(data_dir)
            for _ in range(2):  # the broken pooled connection, then a fresh checkout
                began = time.perf_counter()
                with pytest.raises(EngineUnavailable):
                    await engine.run([VectorQuery([1.0, 0.0], 1, "doomed")])
                assert time.perf_counter() - began < 20  # a bound against hanging, not a benchmark
    finally:
        stop_local_postgres(data_dir)
