"""Pass 1, dependency pruning: keep only edges that carry data or order a side effect.

Template order edges say "module A ran before module B", not "B needs A". Dropping them frees
independent branches (query expansion and indexing run side by side, Teola Fig. 3c). A side
effect is the exception: an Ingest must still precede the Search of the same vector store.
Its order edge moves to the nearest downstream nodes on the same engine, so the query's
embedding can run during ingestion while the search still waits for it.
"""

from __future__ import annotations

from accel.ir.graph import Graph
from accel.ir.kinds import Kind
from accel.ir.node import Node

NAME = "prune_dependencies"

EFFECT_KINDS = frozenset({Kind.INGEST, Kind.PARTIAL_PREFILL})


def has_effect(node: Node) -> bool:
    """Does the node change engine state that later nodes may observe?"""
    return node.kind in EFFECT_KINDS or bool(node.attrs.get("side_effect"))


def _same_engine_targets(graph: Graph, src: Node, start: str) -> list[str]:
    """Nearest nodes at or below `start` that use `src`'s engine (the search stops at each)."""
    found: list[str] = []
    seen = {start}
    frontier = [start]
    while frontier:
        name = frontier.pop(0)
        if graph.node(name).engine == src.engine:
            found.append(name)
            continue
        for succ in graph.succs(name):
            if succ not in seen:
                seen.add(succ)
                frontier.append(succ)
    return found


def prune_dependencies(graph: Graph, context: object) -> Graph:
    g = graph.copy()
    for src, dst, is_data in list(graph.edges()):
        if is_data or graph.is_pinned(src, dst):
            continue
        g.remove_edge(src, dst)
        node = graph.node(src)
        if not has_effect(node):
            g.note(NAME, f"dropped order edge {src} -> {dst}")
            continue
        if node.engine is None:
            g.add_edge(src, dst)
            continue
        targets = _same_engine_targets(graph, node, dst)
        for target in targets:
            g.add_edge(src, target)
        g.note(NAME, f"effect edge {src} -> {dst} now orders only {targets or 'nothing'} ({node.engine})")
    g.compute_depths()
    return g
