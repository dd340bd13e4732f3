"""Metadata filters compiled to SQL, one function per dialect a table's writer uses.

Fidelity: a filtered search must select the rows the writing library's own search selects, so
the dialects are reproduced, not unified: "jsonpath" (a JSONB column, `jsonb_path_match`, the
Mongo-style `$eq`/`$in`/`$and`... operators) and "text_compare" (`column->>'key'` compared as
float when the value is numeric, as text otherwise). Adapters name the dialect of their
framework's tables (`TableLayout.filter_dialect`); own collections store JSONB metadata and use
"jsonpath".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from accel.engines.errors import InvalidRequest

ENGINE = "vectordb"

_JSONPATH_OPS = {"$eq": "==", "$ne": "!=", "$lt": "<", "$lte": "<=", "$gt": ">", "$gte": ">="}
_SQL_OPS = {"$eq": "=", "$ne": "!=", "$lt": "<", "$lte": "<=", "$gt": ">", "$gte": ">="}
_TEXT_OPS = {"$like": "LIKE", "$ilike": "ILIKE"}


def _bad(cause: str) -> InvalidRequest:
    return InvalidRequest(ENGINE, f"bad metadata filter: {cause}", "use {field: value} or {field: {'$op': value}} with $and/$or/$not")


def filter_key(filter_: Mapping[str, Any] | None) -> str:
    """A hashable, order-independent key, so equal filters share one batched query."""
    return json.dumps(filter_, sort_keys=True, default=str) if filter_ else ""


def _field(name: object) -> str:
    if not isinstance(name, str) or name.startswith("$") or not name.isidentifier():
        raise _bad(f"{name!r} is not a field name")
    return name


def _field_and_op(field: str, value: Any) -> tuple[str, Any]:
    if isinstance(value, Mapping):
        if len(value) != 1:
            raise _bad(f"{field!r} needs exactly one operator, got {list(value)}")
        return next(iter(value.items()))
    return "$eq", value


def _combine(parts: list[sql.Composable], joiner: str) -> sql.Composable:
    if not parts:
        raise _bad("empty condition")
    return sql.SQL("(") + sql.SQL(f" {joiner} ").join(parts) + sql.SQL(")")


def _logical(filter_: Mapping[str, Any], leaf) -> sql.Composable:
    """Walk `$and`/`$or`/`$not` and implicit AND of several fields; `leaf` compiles one field."""
    if not isinstance(filter_, Mapping) or not filter_:
        raise _bad(f"expected a non-empty dict, got {filter_!r}")
    if len(filter_) > 1:
        return _combine([leaf(_field(k), v) for k, v in filter_.items()], "AND")
    key, value = next(iter(filter_.items()))
    lowered = key.lower() if isinstance(key, str) else key
    if lowered in ("$and", "$or"):
        if not isinstance(value, list):
            raise _bad(f"{key} needs a list")
        return _combine([_logical(item, leaf) for item in value], lowered[1:].upper())
    if lowered == "$not":
        items = value if isinstance(value, list) else [value]
        return _combine([sql.SQL("NOT ") + _logical(item, leaf) for item in items], "AND")
    return leaf(_field(key), value)


def jsonpath_filter(filter_: Mapping[str, Any], column: sql.Composable) -> sql.Composable:
    """SQL for a "jsonpath" filter on the JSONB `column`."""

    def leaf(field: str, value: Any) -> sql.Composable:
        op, operand = _field_and_op(field, value)
        as_text = sql.SQL("({} ->> {})").format(column, sql.Literal(field))
        if op in _JSONPATH_OPS:
            return _path_match(column, field, _JSONPATH_OPS[op], operand)
        if op == "$between":
            low, high = operand
            return _combine([_path_match(column, field, ">=", low), _path_match(column, field, "<=", high)], "AND")
        if op in ("$in", "$nin"):
            values = [str(v) for v in operand]
            if any(isinstance(v, bool) or not isinstance(v, (str, int, float)) for v in operand):
                raise _bad(f"{op} takes strings and numbers, got {operand!r}")
            test = sql.SQL("{} = ANY({}::text[])").format(as_text, sql.Literal(values))
            return test if op == "$in" else sql.SQL("NOT ") + test
        if op in _TEXT_OPS:
            return sql.SQL("{} {} {}").format(as_text, sql.SQL(_TEXT_OPS[op]), sql.Literal(str(operand)))
        if op == "$exists":
            if not isinstance(operand, bool):
                raise _bad("$exists takes true or false")
            test = sql.SQL("jsonb_exists({}, {})").format(column, sql.Literal(field))
            return test if operand else sql.SQL("NOT ") + test
        raise _bad(f"unknown operator {op!r}")

    return _logical(filter_, leaf)


def _path_match(column: sql.Composable, field: str, native: str, value: Any) -> sql.Composable:
    return sql.SQL("jsonb_path_match({}, {}::jsonpath, {})").format(
        column, sql.Literal(f"$.{field} {native} $value"), sql.Literal(Jsonb({"value": value}))
    )


def text_compare_filter(filter_: Mapping[str, Any], column: sql.Composable) -> sql.Composable:
    """SQL for a "text_compare" filter on the JSON `column`."""

    def leaf(field: str, value: Any) -> sql.Composable:
        op, operand = _field_and_op(field, value)
        as_text = sql.SQL("({} ->> {})").format(column, sql.Literal(field))
        if op in ("$in", "$nin"):
            test = sql.SQL("{} = ANY({}::text[])").format(as_text, sql.Literal([str(v) for v in operand]))
            return test if op == "$in" else sql.SQL("NOT ") + test
        if op not in _SQL_OPS:
            raise _bad(f"operator {op!r} is not supported for llama-index tables")
        try:
            number = float(operand)
        except (TypeError, ValueError):
            return sql.SQL("{} {} {}").format(as_text, sql.SQL(_SQL_OPS[op]), sql.Literal(str(operand)))
        return sql.SQL("{}::float {} {}").format(as_text, sql.SQL(_SQL_OPS[op]), sql.Literal(number))

    return _logical(filter_, leaf)
