"""The batched nearest-neighbour query: many query vectors, one statement, one round trip.

The query vectors travel as one `vector[]` parameter, are `unnest`ed WITH ORDINALITY, and each
drives a LATERAL sub-select that is exactly the framework's own single search (same distance
operator, WHERE, `ORDER BY distance`, `LIMIT k`), so per query the rows and their order are
those of a one-by-one search and an HNSW index is used per query vector as it would be alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from psycopg import sql

from accel.engines.errors import InvalidRequest

from .failures import ENGINE
from .layouts import Target

Metric = Literal["cosine", "l2", "ip"]

# pgvector distance operators. `SearchHit.score` is this raw distance: cosine distance
# (1 - cosine similarity), Euclidean distance, and the *negative* inner product for "ip".
OPERATORS: dict[str, str] = {"cosine": "<=>", "l2": "<->", "ip": "<#>"}
INDEX_OPCLASSES: dict[str, str] = {"cosine": "vector_cosine_ops", "l2": "vector_l2_ops", "ip": "vector_ip_ops"}


def operator(metric: str) -> str:
    try:
        return OPERATORS[metric]
    except KeyError:
        raise InvalidRequest(ENGINE, f"unknown metric {metric!r}", f"use one of {sorted(OPERATORS)}") from None


def batched_search(target: Target, metric: str, k: int, filter_: Mapping[str, Any] | None) -> sql.Composed:
    """SQL taking one parameter (the `vector[]` of queries) and returning rows
    `(ord, id, text, metadata, distance)` ordered by query ordinal, then rank within the query."""
    column = lambda name: sql.Identifier("t", name)  # noqa: E731 - a local shorthand
    joins: sql.Composable = sql.SQL("")
    conditions: list[sql.Composable] = []
    if target.scope is not None:  # the rows of one named group of a shared table
        scope = target.scope
        joins = sql.SQL(" JOIN {groups} g ON t.{fk} = g.{key}").format(
            groups=sql.Identifier(scope.table), fk=sql.Identifier(scope.foreign_key), key=sql.Identifier(scope.key))
        conditions.append(sql.SQL("g.{name} = {value}").format(name=sql.Identifier(scope.name_column), value=sql.Literal(scope.value)))
    if filter_:
        conditions.append(target.compile_filter(filter_, column(target.metadata_column)))
    where = sql.SQL(" WHERE ") + sql.SQL(" AND ").join(conditions) if conditions else sql.SQL("")
    single = sql.SQL(
        "SELECT {id}::text AS id, {text} AS text, {meta} AS metadata, t.embedding {op} q.vec AS distance"
        " FROM {relation} t{joins}{where} ORDER BY distance LIMIT {k}"
    ).format(
        id=column(target.id_column),
        text=column(target.text_column),
        meta=column(target.metadata_column),
        op=sql.SQL(operator(metric)),
        relation=target.relation,
        joins=joins,
        where=where,
        k=sql.Literal(k),
    )
    return sql.SQL(
        "SELECT q.ord, r.id, r.text, r.metadata, r.distance"
        " FROM unnest(%s::vector[]) WITH ORDINALITY AS q(vec, ord)"
        " CROSS JOIN LATERAL (SELECT s.*, row_number() OVER () AS rank FROM ({single}) s) r"
        " ORDER BY q.ord, r.rank"
    ).format(single=single)
