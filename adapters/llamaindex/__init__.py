"""LlamaIndex adapter: `accel.wrap(query_engine)` for `RetrieverQueryEngine` apps.

Importing this package registers the adapter with `accel.wrap`; the dispatcher imports it
lazily once the app has imported `llama_index.core`.
"""

from __future__ import annotations

from typing import Any

from accel.wrap import register_adapter

from .query_engine import OpaqueQueryEngine, WrappedQueryEngine

__all__ = ["OpaqueQueryEngine", "WrappedQueryEngine", "wrap_query_engine"]


def _matches(obj: Any) -> bool:
    from llama_index.core.base.base_query_engine import BaseQueryEngine

    return isinstance(obj, BaseQueryEngine) and not isinstance(obj, (WrappedQueryEngine, OpaqueQueryEngine))


def wrap_query_engine(engine: Any, *, policy: str = "topology", disabled_passes: tuple[str, ...] = ()) -> Any:
    """A drop-in replacement for `engine`: a `RetrieverQueryEngine` is lowered to primitives;
    any other query engine is returned wrapped as-is (opaque), with `explain()` saying so."""
    from llama_index.core.query_engine import RetrieverQueryEngine

    if type(engine) is RetrieverQueryEngine:
        return WrappedQueryEngine(engine, policy=policy, disabled_passes=tuple(disabled_passes))
    return OpaqueQueryEngine(engine)


register_adapter(_matches, wrap_query_engine, name="llamaindex")
