"""LangGraph adapter: `accel.wrap(compiled_graph)` keeps LangGraph's execution and makes each
call a program whose engine calls the floor captures (see `graph.py`).

Importing this package registers the adapter ahead of the generic LangChain one (a compiled
graph is also a LangChain `Runnable`).
"""

from __future__ import annotations

from typing import Any

from accel.options import WrapOptions
from accel.wrap import register_adapter


def _matches(obj: Any) -> bool:
    from langgraph.pregel import Pregel

    return isinstance(obj, Pregel)


def wrap_graph(graph: Any, options: WrapOptions | None = None) -> Any:
    """`accel.wrap` for a compiled LangGraph graph: its engine calls go through the floor (the
    batching policy applies), and nodes that are LCEL chains are wrapped by the LangChain
    adapter with the same options (their passes, their stock fallback); in a graph without
    such nodes those two options are logged as unused."""
    from accel.adapters.langgraph.graph import wrap_graph as wrap

    return wrap(graph, options or WrapOptions())


register_adapter(_matches, wrap_graph, name="langgraph", first=True, honours=("policy", "disabled_passes", "fallback"))

__all__ = ["wrap_graph"]
