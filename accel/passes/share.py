"""Halo pass, request sharing: a batch call's identical deterministic requests run once.

The graph itself does not change: which requests are identical is known only at run time, in
the engine schedulers (`accel.runtime.sharing`). The pass switches that sharing on for the
app, so it can be ablated by name like every other pass (`disabled_passes=["share_requests"]`),
and says in `explain()` which of the graph's engine nodes can be shared.
"""

from __future__ import annotations

from accel.ir.graph import Graph
from accel.passes.registry import PassContext
from accel.ir.marks import SHARE_REQUESTS as NAME


def share_requests(graph: Graph, context: PassContext) -> Graph:
    g = graph.copy()
    engines = sorted({n.engine for n in graph.nodes() if n.is_engine and n.engine})
    if engines:
        g.note(NAME, f"within one batch call, identical deterministic requests to {', '.join(engines)} run once")
    return g
