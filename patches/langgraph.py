"""LangGraph patch: a compiled graph's `invoke/ainvoke/stream/astream` run through `accel.wrap`
(`batch`/`abatch` are `Runnable`'s, over `invoke`/`ainvoke`).

Caching and the stock paths are those of `MethodPatch`: inside a wrapped run (the accelerated
graph's own Pregel loop, a graph used as a subgraph or called from a node) the originals run.
"""

from __future__ import annotations

from typing import Any

from accel.patches.methods import MethodPatch

METHODS = ("invoke", "ainvoke", "stream", "astream")


def _pregel_class() -> type:
    from langgraph.pregel.main import Pregel  # the hooked module (its package is still importing)

    return Pregel


def _make(name: str, original: Any) -> Any:
    if name == "ainvoke":
        async def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            fast = _PATCH.accelerated(self)
            if fast is None:
                return await original(self, *args, **kwargs)
            return await fast.ainvoke(*args, **kwargs)
    else:  # invoke, and the streams (returning the accelerated graph's iterator)
        def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            fast = _PATCH.accelerated(self)
            if fast is None:
                return original(self, *args, **kwargs)
            return getattr(fast, name)(*args, **kwargs)
    return patched


def _accept(graph: Any) -> bool:
    from accel.adapters.common.dropin import state_of

    return state_of(graph) is None  # an accelerated graph is already wrapped


_PATCH = MethodPatch(_pregel_class, METHODS, _make, accept=_accept)
patch, unpatch, patched = _PATCH.patch, _PATCH.unpatch, _PATCH.patched
