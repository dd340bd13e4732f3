"""The embedded server outlives the process that started it and stops from another one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from accel.engines.errors import EngineUnavailable
from accel.engines.vectordb import local_postgres_dsn, resolve_dsn, start_local_postgres, stop_local_postgres

_START_IN_CHILD = "import sys; from accel.engines.vectordb import start_local_postgres; print(start_local_postgres(sys.argv[1]))"


def test_server_survives_its_starter_and_stops_from_here(scratch_dir: Path) -> None:
    data_dir = scratch_dir / "pgdata"
    child = subprocess.run([sys.executable, "-c", _START_IN_CHILD, str(data_dir)], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    dsn = child.stdout.strip().splitlines()[-1]
    assert dsn == f"postgresql://postgres:@/postgres?host={data_dir}"
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:  # the starter has exited
            assert conn.execute("SELECT extname FROM pg_extension WHERE extname = 'vector'").fetchone() == ("vector",)
        assert local_postgres_dsn(data_dir) == dsn
        assert start_local_postgres(data_dir) == dsn  # idempotent while running
    finally:
        stop_local_postgres(data_dir)
    assert local_postgres_dsn(data_dir) is None
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, connect_timeout=2).close()
    stop_local_postgres(data_dir)  # stopping a stopped server is a no-op
    assert start_local_postgres(data_dir) == dsn  # the same process can start it again
    stop_local_postgres(data_dir)


def test_local_dsn_of_the_session_server(pg_dir: Path, pg_dsn: str) -> None:
    assert local_postgres_dsn(pg_dir) == pg_dsn
    assert local_postgres_dsn(pg_dir / "missing") is None


def test_resolve_dsn_prefers_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACCEL_HOME", str(tmp_path))
    monkeypatch.setenv("ACCEL_PG_DSN", "postgresql://someone@db.example/x")
    assert resolve_dsn() == "postgresql://someone@db.example/x"


def test_resolve_dsn_without_a_server_names_the_remedy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACCEL_HOME", str(tmp_path))
    monkeypatch.delenv("ACCEL_PG_DSN", raising=False)
    with pytest.raises(EngineUnavailable) as caught:
        resolve_dsn()
    assert "accel up" in caught.value.remedy and "ACCEL_PG_DSN" in caught.value.remedy
