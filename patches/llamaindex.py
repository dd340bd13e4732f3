"""LlamaIndex patch: `BaseQueryEngine.query/aquery` of a `RetrieverQueryEngine` run through
`accel.wrap`.

Other query engines (accel's own wrappers among them, whose `query` is the same
`BaseQueryEngine.query`) stay stock; caching and the other stock paths are those of
`MethodPatch`.
"""

from __future__ import annotations

from typing import Any

from accel.patches.methods import MethodPatch

METHODS = ("query", "aquery")


def _query_engine_class() -> type:
    from llama_index.core.base.base_query_engine import BaseQueryEngine

    return BaseQueryEngine


def _is_retriever_query_engine(engine: Any) -> bool:
    from llama_index.core.query_engine import RetrieverQueryEngine

    return type(engine) is RetrieverQueryEngine


def _make(name: str, original: Any) -> Any:
    if name == "aquery":
        async def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            fast = _PATCH.accelerated(self)
            if fast is None:
                return await original.__get__(self, type(self))(*args, **kwargs)
            return await fast.aquery(*args, **kwargs)
    else:
        def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            fast = _PATCH.accelerated(self)
            if fast is None:
                return original.__get__(self, type(self))(*args, **kwargs)
            return fast.query(*args, **kwargs)
    return patched


_PATCH = MethodPatch(_query_engine_class, METHODS, _make, accept=_is_retriever_query_engine)
patch, unpatch, patched = _PATCH.patch, _PATCH.unpatch, _PATCH.patched
