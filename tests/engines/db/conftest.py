"""A real PostgreSQL + pgvector (pgserver) in a temporary directory, shared by the session.

Data dirs live in fresh `/tmp/accel-pg-*` directories, not pytest's `tmp_path`: as root,
pgserver runs postgres as the `pgserver` user, which must traverse the parents of its data
dir, and every pytest run (other test sessions included) resets `/tmp/pytest-of-<user>` to
mode 0700.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from accel.engines.vectordb import PgVectorEngine, start_local_postgres, stop_local_postgres


def _scratch() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="accel-pg-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_dir() -> Iterator[Path]:
    for root in _scratch():
        data_dir = root / "data"
        start_local_postgres(data_dir)
        try:
            yield data_dir
        finally:
            stop_local_postgres(data_dir)


@pytest.fixture
def scratch_dir() -> Iterator[Path]:
    """An empty directory where a test may start (and must stop) its own server."""
    yield from _scratch()


@pytest.fixture(scope="session")
def pg_dsn(pg_dir: Path) -> str:
    return start_local_postgres(pg_dir)  # idempotent: the DSN of the running server


@pytest.fixture
async def engine(pg_dsn: str) -> AsyncIterator[PgVectorEngine]:
    async with PgVectorEngine(pg_dsn) as eng:
        yield eng


@pytest.fixture
def collection_name() -> str:
    """A fresh own-collection name per test, so tests never see each other's rows."""
    return f"t_{uuid.uuid4().hex[:12]}"
