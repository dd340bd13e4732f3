"""PostgreSQL + pgvector: the embedded server and the batched vector-search engine."""

from .engine import PgVectorEngine
from .server import local_postgres_dsn, resolve_dsn, start_local_postgres, stop_local_postgres
from .tables import Row

__all__ = ["PgVectorEngine", "Row", "local_postgres_dsn", "resolve_dsn", "start_local_postgres", "stop_local_postgres"]
