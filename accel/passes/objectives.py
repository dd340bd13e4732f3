"""Parrot pass, performance-objective deduction (Parrot §5.2): which LLM work the query's
latency waits on, and which only has to be done as a group.

Walking back from the Output over the LLM decodes (other nodes are transparent):

- the *final* decodes (no LLM decode after them on the way to the Output) are latency-critical;
- their nearest LLM predecessors form a *task group* when there are several of them side by
  side (map steps before a reduce, experts before an aggregator): only the group's completion
  time matters, so they are marked throughput; a single predecessor (a chain) stays
  latency-critical, as Parrot marks the immediate predecessor of a latency-critical request;
- everything else keeps no mark.

A prefix warm-up takes the mark of the decode it serves. The marks go to `schedule.objective`;
the graph scheduler hands them to the engine schedulers with each node's requests, and those
use them (`accel.runtime.objectives`): latency-critical requests are admitted before others and
carry a higher LLM priority; throughput groups are admitted whole.
"""

from __future__ import annotations

from dataclasses import replace

import networkx as nx

from accel.ir.graph import Graph
from accel.ir.kinds import Kind
from accel.passes.registry import PassContext
from accel.ir.marks import LATENCY, THROUGHPUT

NAME = "deduce_objectives"
_DECODES = (Kind.DECODE, Kind.PARTIAL_DECODE)


def _nearest_decodes(graph: Graph, start: str, forward: bool) -> set[str]:
    """The LLM decodes reached from `start` (exclusive) through non-decode nodes only."""
    step = graph.succs if forward else graph.preds
    found: set[str] = set()
    seen = {start}
    stack = list(step(start))
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if graph.node(name).kind in _DECODES:
            found.add(name)
        else:
            stack.extend(step(name))
    return found


def deduce_objectives(graph: Graph, context: PassContext) -> Graph:
    g = graph.copy()
    decodes = [n.name for n in graph.nodes() if n.kind in _DECODES and n.engine]
    marks: dict[str, str] = {}
    finals = [d for d in decodes if not _nearest_decodes(graph, d, forward=True)]
    for final in finals:
        marks[final] = LATENCY
    for final in finals:
        before = _nearest_decodes(graph, final, forward=False)
        # a decode upstream of another one the final reads (a planner whose plan is passed
        # along beside the experts' notes) is an earlier stage, not part of the group
        side_by_side = {d for d in before if not (nx.descendants(graph.nx, d) & (before - {d}))}
        for d in side_by_side:
            marks.setdefault(d, THROUGHPUT if len(side_by_side) > 1 else LATENCY)
    for node in graph.nodes():  # warm-ups serve the decode their prefill feeds
        if node.kind is Kind.PARTIAL_PREFILL and node.name not in marks:
            served = _nearest_decodes(graph, node.name, forward=True)
            objectives = {marks.get(d) for d in served}
            if len(objectives) == 1 and None not in objectives:
                marks[node.name] = objectives.pop()
    for name, objective in marks.items():
        node = g.node(name)
        g.replace(node.replace(schedule=replace(node.schedule, objective=objective)))
    latency = sorted(n for n, o in marks.items() if o == LATENCY and g.node(n).kind in _DECODES)
    group = sorted(n for n, o in marks.items() if o == THROUGHPUT and g.node(n).kind in _DECODES)
    if marks:
        g.note(NAME, f"latency-critical: {', '.join(latency) or 'none'}; throughput task group: {', '.join(group) or 'none'}")
    return g
