"""LlamaIndex adapter: `accel.wrap(query_engine)` for `RetrieverQueryEngine` apps, and
`accel.wrap(IngestionPipeline(...))` / `accel.wrap(VectorStoreIndex).from_documents(...)` for
ingestion.

Importing this package registers the adapter with `accel.wrap`; the dispatcher imports it
lazily once the app has imported `llama_index.core`.
"""

from __future__ import annotations

from typing import Any

from accel.wrap import register_adapter

from .indexing import WrappedIndexClass, WrappedIngestionPipeline
from .query_engine import OpaqueQueryEngine, WrappedQueryEngine

__all__ = [
    "OpaqueQueryEngine",
    "WrappedIndexClass",
    "WrappedIngestionPipeline",
    "WrappedQueryEngine",
    "wrap_llamaindex",
    "wrap_query_engine",
]


def _is_index_class(obj: Any) -> bool:
    from llama_index.core import VectorStoreIndex

    return isinstance(obj, type) and issubclass(obj, VectorStoreIndex)


def _matches(obj: Any) -> bool:
    from llama_index.core.base.base_query_engine import BaseQueryEngine
    from llama_index.core.ingestion import IngestionPipeline

    if isinstance(obj, (WrappedQueryEngine, OpaqueQueryEngine)):
        return False
    return isinstance(obj, (BaseQueryEngine, IngestionPipeline)) or _is_index_class(obj)


def wrap_llamaindex(obj: Any, *, policy: str = "topology", disabled_passes: tuple[str, ...] = ()) -> Any:
    """The drop-in for a query engine, an `IngestionPipeline` or the `VectorStoreIndex` class."""
    from llama_index.core.ingestion import IngestionPipeline

    if isinstance(obj, IngestionPipeline):
        return WrappedIngestionPipeline(obj, policy=policy, disabled_passes=tuple(disabled_passes))
    if _is_index_class(obj):
        return WrappedIndexClass(obj, policy=policy, disabled_passes=tuple(disabled_passes))
    return wrap_query_engine(obj, policy=policy, disabled_passes=disabled_passes)


def wrap_query_engine(engine: Any, *, policy: str = "topology", disabled_passes: tuple[str, ...] = ()) -> Any:
    """A drop-in replacement for `engine`: a `RetrieverQueryEngine` is lowered to primitives;
    any other query engine is returned wrapped as-is (opaque), with `explain()` saying so."""
    from llama_index.core.query_engine import RetrieverQueryEngine

    if type(engine) is RetrieverQueryEngine:
        return WrappedQueryEngine(engine, policy=policy, disabled_passes=tuple(disabled_passes))
    return OpaqueQueryEngine(engine)


register_adapter(_matches, wrap_llamaindex, name="llamaindex")
