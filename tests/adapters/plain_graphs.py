"""What an adapter may put in a p-graph: primitives and what they mean, never a scheduling
decision. Micro-batching, streaming, mapping, warm-ups, partial prefill / decode and the
objectives belong to the passes (docs/design.md: adapters lower, passes optimise), so that
`disabled_passes` switches each of them off and a pass sees every graph unoptimised."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from accel.ir import Graph, Kind, Schedule

SCHEDULING_ATTRS = frozenset({"concat_of", "flattens", "warms", "prefix_parts", "shared_prefix"})
"""Notes the passes leave on the nodes they make or change; their decisions live in `Node.schedule`."""
PASS_KINDS = frozenset({Kind.PARTIAL_DECODE, Kind.PARTIAL_PREFILL, Kind.FULL_PREFILL})


def scheduling_in(graph: Graph) -> list[str]:
    """Each node of `graph` that carries a pass's decision, with what it carries."""
    found = []
    for node in graph.nodes():
        attrs = sorted(SCHEDULING_ATTRS & set(node.attrs))
        if attrs or node.schedule != Schedule() or node.kind in PASS_KINDS or node.derived is not None:
            found.append(f"{node.name} [{node.kind.value}] {attrs} {node.schedule}")
    return found


def p_graphs(templates: Iterable[Any]) -> list[tuple[Any, Graph]]:
    """(key, p-graph) of every template built with the passes (a template built without them
    has no separate p-graph to check)."""
    return [(t.key, t.p_graph) for t in templates if t.p_graph is not None]


def assert_plain(templates: Iterable[Any]) -> int:
    """Fail naming every template whose p-graph carries scheduling; return how many were checked."""
    checked = p_graphs(templates)
    bad = {repr(key): found for key, graph in checked if (found := scheduling_in(graph))}
    assert not bad, f"adapters emitted scheduling decisions (a pass's job): {bad}"
    return len(checked)
