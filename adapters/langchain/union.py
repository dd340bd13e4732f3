"""MultiQueryRetriever's unique union, as stock computes it, without its quadratic cost."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def unique_union(line_docs: list[list[Any]], original: list[Any] | None = None) -> list[Any]:
    """MultiQueryRetriever.unique_union over the documents of every query, in query order:
    each document kept unless it equals one before it. Stock compares each with every earlier
    one (pydantic `__eq__`, a few microseconds each: ~1,000 pairs for 48 hits). When every
    document has pydantic's own equality, equal ones share a model and a text, so only those
    are compared (the same `in` test on fewer candidates); else all, as stock does."""
    documents = [doc for docs in line_docs for doc in docs] + list(original or [])
    classes = [_equality_class(doc) for doc in documents]
    if None in classes:
        return [doc for i, doc in enumerate(documents) if doc not in documents[:i]]
    earlier: dict[Any, list[Any]] = {}
    kept = []
    for doc, key in zip(documents, classes, strict=True):
        candidates = earlier.setdefault(key, [])
        if doc not in candidates:
            kept.append(doc)
        candidates.append(doc)
    return kept


def _equality_class(doc: Any) -> tuple[type, str] | None:
    """(model, text) for a document compared by pydantic's `__eq__`, which holds two models
    equal only if they are the same model with equal fields; None for anything else."""
    text = getattr(doc, "page_content", None)
    if not isinstance(doc, BaseModel) or type(doc).__eq__ is not BaseModel.__eq__ or not isinstance(text, str):
        return None
    return (doc.__pydantic_generic_metadata__["origin"] or type(doc), text)
