"""Where a collection's rows live: accel's own tables and the frameworks' table layouts.

A collection string names the layout:
  - `"<name>"`: a table this engine created (`accel_<name>`: id, text, metadata JSONB, embedding);
  - `"langchain:<collection_name>"`: langchain-postgres `PGVector` (`langchain_pg_embedding`
    rows of that `langchain_pg_collection`);
  - `"llamaindex:<table_name>"` or `"llamaindex:<schema>.<table_name>"`: llama-index
    `PGVectorStore` (`data_<table_name>`, names lower-cased as llama-index does).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from psycopg import AsyncConnection, sql

from accel.engines.errors import InvalidRequest

from .failures import ENGINE, unknown_collection
from .filters import langchain_filter, llamaindex_filter

Layout = Literal["accel", "langchain", "llamaindex"]

OWN_PREFIX = "accel_"
_OWN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,50}$")
_LC_EMBEDDING = "langchain_pg_embedding"
_LC_COLLECTION = "langchain_pg_collection"

FilterCompiler = Callable[[Mapping[str, Any], sql.Composable], sql.Composable]


@dataclass(frozen=True)
class Target:
    """A resolved collection: the table to scan, its columns, its scope and its dimension."""

    collection: str
    layout: Layout
    schema: str
    table: str
    id_column: str
    text_column: str
    metadata_column: str
    dim: int | None  # None: an unconstrained column with no rows yet (langchain without embedding_length)
    scope_name: str | None = None  # the langchain collection name rows are restricted to

    @property
    def relation(self) -> sql.Composable:
        return sql.Identifier(self.schema, self.table)

    @property
    def compile_filter(self) -> FilterCompiler:
        return llamaindex_filter if self.layout == "llamaindex" else langchain_filter


@dataclass(frozen=True)
class Address:
    """A parsed collection string, before the database is asked about it."""

    collection: str
    layout: Layout
    schema: str
    table: str
    scope_name: str | None = None


def own_table(name: str) -> str:
    if not _OWN_NAME.match(name):
        raise InvalidRequest(
            ENGINE,
            f"collection name {name!r} is not a plain identifier",
            "use letters, digits and '_' (at most 51), starting with a letter or '_'",
        )
    return OWN_PREFIX + name


def parse(collection: str) -> Address:
    """Split a collection string into layout and table; raise InvalidRequest if malformed."""
    layout, sep, rest = collection.partition(":")
    if not sep:
        return Address(collection, "accel", "public", own_table(collection))
    if not rest:
        raise unknown_collection(collection, "nothing after the layout prefix")
    if layout == "langchain":
        return Address(collection, "langchain", "public", _LC_EMBEDDING, scope_name=rest)
    if layout == "llamaindex":
        schema, dot, table = rest.lower().rpartition(".")
        return Address(collection, "llamaindex", schema if dot else "public", f"data_{table}")
    raise unknown_collection(collection, f"unknown layout {layout!r}; use 'langchain:' or 'llamaindex:'")


_EMBEDDING_TYPMOD = sql.SQL(
    "SELECT a.atttypmod FROM pg_attribute a"
    " JOIN pg_class c ON a.attrelid = c.oid JOIN pg_namespace n ON c.relnamespace = n.oid"
    " WHERE n.nspname = %s AND c.relname = %s AND a.attname = 'embedding' AND NOT a.attisdropped"
)
_LC_SCOPE = sql.SQL("SELECT uuid FROM {} WHERE name = %s").format(sql.Identifier(_LC_COLLECTION))
_LC_SAMPLE_DIM = sql.SQL(
    "SELECT vector_dims(e.embedding) FROM {} e JOIN {} c ON e.collection_id = c.uuid WHERE c.name = %s LIMIT 1"
).format(sql.Identifier(_LC_EMBEDDING), sql.Identifier(_LC_COLLECTION))


async def resolve(conn: AsyncConnection, address: Address) -> Target:
    """Ask the catalog whether the collection exists and what dimension its vectors have."""
    row = await (await conn.execute(_EMBEDDING_TYPMOD, (address.schema, address.table))).fetchone()
    if row is None:
        raise unknown_collection(address.collection, f"no table {address.schema}.{address.table} with an embedding column")
    dim: int | None = row[0] if row[0] > 0 else None
    if address.layout == "langchain":
        if await (await conn.execute(_LC_SCOPE, (address.scope_name,))).fetchone() is None:
            raise unknown_collection(address.collection, f"no langchain collection named {address.scope_name!r}")
        if dim is None:
            sample = await (await conn.execute(_LC_SAMPLE_DIM, (address.scope_name,))).fetchone()
            dim = sample[0] if sample else None
        return Target(address.collection, "langchain", address.schema, address.table,
                      "id", "document", "cmetadata", dim, address.scope_name)
    if address.layout == "llamaindex":
        return Target(address.collection, "llamaindex", address.schema, address.table,
                      "node_id", "text", "metadata_", dim)
    return Target(address.collection, "accel", address.schema, address.table, "id", "text", "metadata", dim)
