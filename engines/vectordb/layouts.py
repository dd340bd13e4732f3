"""Where a collection's rows live: accel's own tables, or a table another library wrote.

A collection is either
  - a name (`str`): a table this engine created (`accel_<name>`: id, text, metadata JSONB,
    embedding);
  - a `TableLayout` (`accel.engines.base`): a framework's table, described by the adapter that
    knows the framework (table, columns, the group of rows it is, its filter dialect).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, sql

from accel.engines.base import TableLayout, TableScope
from accel.engines.errors import InvalidRequest

from .failures import ENGINE, unknown_collection
from .filters import jsonpath_filter, text_compare_filter

Collection = str | TableLayout

OWN_PREFIX = "accel_"
_OWN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,50}$")

FilterCompiler = Callable[[Mapping[str, Any], sql.Composable], sql.Composable]
_DIALECTS: dict[str, FilterCompiler] = {"jsonpath": jsonpath_filter, "text_compare": text_compare_filter}


@dataclass(frozen=True)
class Target:
    """A resolved collection: the table to scan, its columns, its scope and its dimension."""

    collection: str  # its display name
    own: bool
    schema: str
    table: str
    id_column: str
    text_column: str
    metadata_column: str
    dim: int | None  # None: an unconstrained column with no rows yet
    scope: TableScope | None = None
    filter_dialect: str = "jsonpath"

    @property
    def relation(self) -> sql.Composable:
        return sql.Identifier(self.schema, self.table)

    @property
    def compile_filter(self) -> FilterCompiler:
        return _DIALECTS[self.filter_dialect]


def name_of(collection: Collection) -> str:
    return collection if isinstance(collection, str) else collection.name


def own_table(name: str) -> str:
    if not _OWN_NAME.match(name):
        raise InvalidRequest(
            ENGINE,
            f"collection name {name!r} is not a plain identifier",
            "use letters, digits and '_' (at most 51), starting with a letter or '_'",
        )
    return OWN_PREFIX + name


def check(collection: Collection) -> None:
    """Raise InvalidRequest for a collection no statement can be built for."""
    if isinstance(collection, str):
        own_table(collection)
        return
    if not isinstance(collection, TableLayout):
        raise unknown_collection(repr(collection), "neither an own collection's name nor a TableLayout")
    if collection.filter_dialect not in _DIALECTS:
        raise unknown_collection(collection.name, f"unknown filter dialect {collection.filter_dialect!r}; use one of {sorted(_DIALECTS)}")


_EMBEDDING_TYPMOD = sql.SQL(
    "SELECT a.atttypmod FROM pg_attribute a"
    " JOIN pg_class c ON a.attrelid = c.oid JOIN pg_namespace n ON c.relnamespace = n.oid"
    " WHERE n.nspname = %s AND c.relname = %s AND a.attname = 'embedding' AND NOT a.attisdropped"
)


def _scope_row(scope: TableScope) -> sql.Composable:
    return sql.SQL("SELECT {key} FROM {table} WHERE {name} = %s").format(
        key=sql.Identifier(scope.key), table=sql.Identifier(scope.table), name=sql.Identifier(scope.name_column))


def _scope_sample_dim(layout: TableLayout, scope: TableScope) -> sql.Composable:
    return sql.SQL("SELECT vector_dims(e.embedding) FROM {rows} e JOIN {groups} g ON e.{fk} = g.{key} WHERE g.{name} = %s LIMIT 1").format(
        rows=sql.Identifier(layout.schema, layout.table), groups=sql.Identifier(scope.table), fk=sql.Identifier(scope.foreign_key),
        key=sql.Identifier(scope.key), name=sql.Identifier(scope.name_column))


async def resolve(conn: AsyncConnection, collection: Collection) -> Target:
    """Ask the catalog whether the collection exists and what dimension its vectors have."""
    check(collection)
    if isinstance(collection, str):
        schema, table = "public", own_table(collection)
    else:
        schema, table = collection.schema, collection.table
    row = await (await conn.execute(_EMBEDDING_TYPMOD, (schema, table))).fetchone()
    name = name_of(collection)
    if row is None:
        raise unknown_collection(name, f"no table {schema}.{table} with an embedding column")
    dim: int | None = row[0] if row[0] > 0 else None
    if isinstance(collection, str):
        return Target(name, True, schema, table, "id", "text", "metadata", dim)
    scope = collection.scope
    if scope is not None:
        if await (await conn.execute(_scope_row(scope), (scope.value,))).fetchone() is None:
            raise unknown_collection(name, f"no row named {scope.value!r} in {scope.table}")
        if dim is None:
            sample = await (await conn.execute(_scope_sample_dim(collection, scope), (scope.value,))).fetchone()
            dim = sample[0] if sample else None
    return Target(name, False, schema, table, collection.id_column, collection.text_column, collection.metadata_column, dim,
                  scope, collection.filter_dialect)
