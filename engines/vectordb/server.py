"""The embedded PostgreSQL + pgvector server, and which server the engine talks to.

`pgserver` ships PostgreSQL with pgvector. Its handles stop the server when the last Python
process holding one exits; `accel up` must leave the server running after it returns and
`accel down` (another process) must stop it. So handles are made with `cleanup_mode=None`
(nothing happens at exit) and stopping reads `postmaster.pid` and runs `pg_ctl stop` directly,
without starting anything. `pgserver.get_server` caches one handle per directory for the
life of the process, which would hide a server stopped since; handles are built directly.
"""

from __future__ import annotations

import os
import subprocess
import warnings
from pathlib import Path

import psycopg

with warnings.catch_warnings():  # importing pgserver notes that XDG_RUNTIME_DIR is unset: harmless
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")
    from pgserver import PostgresServer
    from pgserver._commands import pg_ctl
    from pgserver.utils import PostmasterInfo

from accel.config import settings
from accel.engines.errors import EngineUnavailable

ENGINE = "vectordb"
# pgserver runs postgres as this system user when the caller is root (initdb refuses root).
_ROOT_SYSTEM_USER = "pgserver"


def _data_dir(data_dir: Path | str | None) -> Path:
    return Path(data_dir).expanduser().resolve() if data_dir else settings().pg_dir


def start_local_postgres(data_dir: Path | str | None = None) -> str:
    """Start (or find running) the embedded server in `data_dir` and return its socket DSN.

    Idempotent. The server outlives this process; stop it with `stop_local_postgres`.
    """
    pgdata = _data_dir(data_dir)
    dsn = local_postgres_dsn(pgdata)
    if dsn is None:
        dsn = _start(pgdata)
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return dsn


def _start(pgdata: Path) -> str:
    pgdata.mkdir(parents=True, exist_ok=True)
    try:
        server = PostgresServer(pgdata, cleanup_mode=None)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        raise EngineUnavailable(
            ENGINE,
            f"the embedded PostgreSQL in {pgdata} did not start ({exc}); see {pgdata / 'log'}",
            "free disk space or remove a corrupt data dir, then run `accel up` again",
        ) from exc
    return server.get_uri()


def local_postgres_dsn(data_dir: Path | str | None = None) -> str | None:
    """The DSN of the embedded server if it is running, else None. Starts nothing."""
    info = PostmasterInfo.read_from_pgdata(_data_dir(data_dir))
    if info is None or not info.is_running() or info.status != "ready":
        return None
    return info.get_uri()


def stop_local_postgres(data_dir: Path | str | None = None) -> None:
    """Stop the embedded server in `data_dir` (from any process). A stopped server is a no-op."""
    pgdata = _data_dir(data_dir)
    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        return
    user = _ROOT_SYSTEM_USER if os.geteuid() == 0 else None
    try:
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=60)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        raise EngineUnavailable(
            ENGINE,
            f"pg_ctl could not stop the server in {pgdata} ({exc}); see {pgdata / 'log'}",
            f"stop the postgres process (pid {info.pid}) by hand",
        ) from exc


def resolve_dsn(*, start: bool = False) -> str:
    """The DSN the vector engine should use: `ACCEL_PG_DSN` if set, else the embedded server.

    With `start=True` a stopped embedded server is started; otherwise it is an error, because
    starting a database is `accel up`'s job, not a side effect of a query.
    """
    cfg = settings()
    if cfg.pg_dsn:
        return cfg.pg_dsn
    running = local_postgres_dsn(cfg.pg_dir)
    if running is not None:
        return running
    if start:
        return start_local_postgres(cfg.pg_dir)
    raise EngineUnavailable(
        ENGINE,
        f"no PostgreSQL server: ACCEL_PG_DSN is unset and the embedded server in {cfg.pg_dir} is not running",
        "run `accel up`, or set ACCEL_PG_DSN to a PostgreSQL server with pgvector",
    )
