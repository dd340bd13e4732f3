"""Turn psycopg failures into the typed engine errors, without leaking passwords."""

from __future__ import annotations

import re

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from accel.engines.errors import DimensionMismatch, EngineError, EngineUnavailable, InvalidRequest

ENGINE = "vectordb"
UNAVAILABLE_REMEDY = "run `accel up` for the embedded server, or fix ACCEL_PG_DSN"

_URI_PASSWORD = re.compile(r"(?P<head>postgres(?:ql)?://[^:/@?]*):[^@/?]+@")
_KV_PASSWORD = re.compile(r"(?P<head>password\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s&]+)")


def redact_dsn(dsn: str) -> str:
    """The DSN with any password replaced by `***`, fit for error messages and logs."""
    dsn = _URI_PASSWORD.sub(r"\g<head>:***@", dsn)
    return _KV_PASSWORD.sub(lambda m: f"{m['head']}***", dsn)


def unavailable(dsn: str, cause: object) -> EngineUnavailable:
    detail = str(cause).strip().replace(dsn, redact_dsn(dsn)) or type(cause).__name__
    return EngineUnavailable(ENGINE, f"cannot reach PostgreSQL at {redact_dsn(dsn)}: {detail}", UNAVAILABLE_REMEDY)


def unknown_collection(collection: str, detail: str) -> InvalidRequest:
    return InvalidRequest(
        ENGINE,
        f"unknown collection {collection!r} ({detail})",
        "create it with PgVectorEngine.create_collection, or describe a framework's table with a "
        "TableLayout (its adapter does: accel.adapters.langchain.tables, accel.adapters.llamaindex.tables)",
    )


def translate(exc: BaseException, *, dsn: str, collection: str) -> EngineError:
    """The typed error for a failure while talking to the database."""
    if isinstance(exc, EngineError):
        return exc
    if isinstance(exc, (PoolTimeout, psycopg.OperationalError)):
        return unavailable(dsn, exc)
    if isinstance(exc, pg_errors.UndefinedTable):
        return unknown_collection(collection, "its table does not exist")
    message = str(exc).strip()
    if isinstance(exc, pg_errors.DataException) and "different vector dimensions" in message:
        return DimensionMismatch(ENGINE, f"{collection!r}: {message}", "query and store vectors of the table's dimension")
    if isinstance(exc, pg_errors.UniqueViolation):
        return InvalidRequest(ENGINE, f"{collection!r}: duplicate id ({message})", "use ids not yet stored in the collection")
    if isinstance(exc, pg_errors.DataException):
        return InvalidRequest(ENGINE, f"{collection!r}: {message}", "fix the values sent to the database")
    return EngineError(ENGINE, f"{collection!r}: {type(exc).__name__}: {message}", "see the PostgreSQL log")
