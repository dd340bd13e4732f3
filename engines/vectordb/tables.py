"""accel's own collections: creating, dropping and transactionally filling them.

Framework tables are only read: LangChain and LlamaIndex write their own rows (with their own
id schemes and metadata encodings), and accel must not second-guess them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from psycopg import AsyncConnection, sql
from psycopg.types.json import Jsonb

from accel.engines.errors import DimensionMismatch, InvalidRequest

from .failures import ENGINE
from .layouts import Target, own_table
from .query import INDEX_OPCLASSES, operator


@dataclass(frozen=True)
class Row:
    """One record to store: its id, its text, its embedding and JSON-serialisable metadata."""

    id: str
    text: str
    vector: Sequence[float]
    metadata: Mapping[str, Any] = field(default_factory=dict)


def as_vector(values: Sequence[float], dim: int | None, collection: str) -> np.ndarray:
    """A float32 vector checked against the table's dimension (before anything is sent)."""
    try:
        vector = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(ENGINE, f"{collection!r}: a vector is not numeric ({exc})", "pass sequences of floats") from exc
    if vector.ndim != 1 or vector.size == 0:
        raise DimensionMismatch(ENGINE, f"{collection!r}: expected a flat vector, got shape {vector.shape}", "pass one flat vector per item")
    if dim is not None and vector.size != dim:
        raise DimensionMismatch(
            ENGINE,
            f"{collection!r} holds {dim}-dimensional vectors, got {vector.size}",
            "embed with the model the collection was built with",
        )
    if not np.isfinite(vector).all():
        raise InvalidRequest(ENGINE, f"{collection!r}: a vector contains NaN or infinity", "check the embedder's output")
    return vector


def _check_rows(rows: Sequence[Row], dim: int | None, collection: str) -> list[tuple[str, str, Jsonb, np.ndarray]]:
    seen: set[str] = set()
    params = []
    for position, row in enumerate(rows):
        where = f"row {position} (id {row.id!r})"
        if not isinstance(row.id, str) or not row.id:
            raise InvalidRequest(ENGINE, f"{collection!r}: {where} has no string id", "give every row a non-empty string id")
        if row.id in seen:
            raise InvalidRequest(ENGINE, f"{collection!r}: {where} repeats an id of this batch", "give every row a distinct id")
        seen.add(row.id)
        try:
            json.dumps(dict(row.metadata), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidRequest(ENGINE, f"{collection!r}: {where} metadata is not JSON ({exc})", "store JSON-serialisable metadata") from exc
        try:
            vector = as_vector(row.vector, dim, collection)
        except InvalidRequest as exc:
            raise type(exc)(ENGINE, f"{exc.cause} at {where}", exc.remedy) from exc
        params.append((row.id, row.text, Jsonb(dict(row.metadata)), vector))
    return params


async def create(conn: AsyncConnection, name: str, dim: int, metric: str, hnsw: bool, *, m: int, ef_construction: int) -> None:
    """Create table (and HNSW index) if missing; an existing table must have the same dimension."""
    if not isinstance(dim, int) or dim < 1:
        raise InvalidRequest(ENGINE, f"collection {name!r}: dimension {dim!r} is not a positive integer", "pass the embedder's dimension")
    operator(metric)  # validates the metric name
    table = sql.Identifier("public", own_table(name))
    async with conn.transaction():
        existing = await (await conn.execute(
            "SELECT a.atttypmod FROM pg_attribute a JOIN pg_class c ON a.attrelid = c.oid"
            " JOIN pg_namespace n ON c.relnamespace = n.oid"
            " WHERE n.nspname = 'public' AND c.relname = %s AND a.attname = 'embedding'",
            (own_table(name),),
        )).fetchone()
        if existing is not None and existing[0] != dim:
            raise DimensionMismatch(
                ENGINE, f"collection {name!r} exists with dimension {existing[0]}, not {dim}", "drop it first or use another name"
            )
        await conn.execute(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (id text PRIMARY KEY, text text NOT NULL,"
            " metadata jsonb NOT NULL DEFAULT '{{}}'::jsonb, embedding vector({}) NOT NULL)"
        ).format(table, sql.Literal(dim)))
        if hnsw:
            await conn.execute(sql.SQL(
                "CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding {}) WITH (m = {}, ef_construction = {})"
            ).format(
                sql.Identifier(f"{own_table(name)}_hnsw_{metric}"), table, sql.SQL(INDEX_OPCLASSES[metric]),
                sql.Literal(m), sql.Literal(ef_construction),
            ))


async def drop(conn: AsyncConnection, name: str) -> None:
    await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier("public", own_table(name))))


async def insert(conn: AsyncConnection, target: Target, rows: Sequence[Row]) -> int:
    """Insert all rows in one transaction: every row is checked first, and a database error
    on any row rolls back the whole batch, so a failed ingest leaves nothing behind."""
    params = _check_rows(rows, target.dim, target.collection)
    statement = sql.SQL("INSERT INTO {} (id, text, metadata, embedding) VALUES (%s, %s, %s, %s)").format(target.relation)
    async with conn.transaction():
        async with conn.cursor() as cursor:
            await cursor.executemany(statement, params)
    return len(params)
