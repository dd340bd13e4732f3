"""Shared rewiring for pipelining passes: map consumers item by item, restore whole values.

In accel's streaming contract (see `accel.ir.ops`) stream items are slices. A pipelinable
consumer reads the streaming node's whole value on its batch port and can run on each slice:
an itemwise, elementwise engine node (its op is list-in/list-out, unchanged on a slice), or a
local positional op (a prefix window of the list, given each slice's offset), passed through
only on the way to such an engine node. Every node whose value became a list of slices gets a
flattening Aggregate for its other readers, so they still see the value of the unsplit graph.
"""

from __future__ import annotations

from dataclasses import replace

from accel.ir.graph import Graph
from accel.ir.kinds import ITEMWISE_KINDS, Kind
from accel.ir.node import Derived, Node, Ref, Role
from accel.ir.ops import GatherOp
from accel.ir.schedule import Streams


def is_elementwise(node: Node) -> bool:
    """Output over a slice of the batch port == that slice of the output."""
    return node.kind in ITEMWISE_KINDS and bool(getattr(node.op, "elementwise", False))


def is_positional(node: Node) -> bool:
    """A local op that runs on a slice at a known element offset (`accel.ir.getters`)."""
    return node.kind is Kind.CALL and bool(getattr(node.op, "positional", False))


def pipelinable(consumer: Node, port: str, source: str) -> bool:
    return (
        (is_elementwise(consumer) or is_positional(consumer))
        and consumer.batch_port == port
        and consumer.inputs[port] == Ref(source)
        and consumer.map_port is None
    )


def feeds_engine(g: Graph, source: str) -> bool:
    """Some engine node would run item by item if `source` streamed: through positional local
    ops to an elementwise engine consumer. A stream that reaches none only delays its readers."""
    for consumer, port in g.readers(source):
        node = g.node(consumer)
        if pipelinable(node, port, source) and (is_elementwise(node) or feeds_engine(g, consumer)):
            return True
    return False


def pipeline_from(g: Graph, head: str, pass_name: str) -> list[str]:
    """`head` streams: map its pipelinable consumers (transitively), mark the mapped nodes that
    feed further mapped nodes as streaming, and route all other readers through flattening
    Aggregates. Returns the mapped node names."""
    chain = [head]
    mapped: list[str] = []
    i = 0
    while i < len(chain):
        source = chain[i]
        i += 1
        for consumer, port in g.readers(source):
            node = g.node(consumer)
            if not pipelinable(node, port, source) or (is_positional(node) and not feeds_engine(g, consumer)):
                continue
            if node.schedule.micro_batch is not None:
                g.note(pass_name, f"{consumer} now runs per item of {source} instead of in micro-batches")
            g.replace(node.replace(schedule=replace(node.schedule, streams=None, micro_batch=None, map_port=port)))
            chain.append(consumer)
            mapped.append(consumer)
    for name in chain:
        node = g.node(name)
        feeds_mapped = any(g.node(c).map_port == p for c, p in g.readers(name))
        if feeds_mapped and not node.streams:
            g.replace(node.replace(schedule=replace(node.schedule, streams=Streams.MAPPED)))
        flatten_readers(g, name, pass_name)
    if mapped:
        g.note(pass_name, f"{head} streams item by item into {mapped}")
    return mapped


def flatten_readers(g: Graph, name: str, pass_name: str) -> str | None:
    """Route readers of `name` that are not mapped onto it through `name#agg` (flatten)."""
    derived = Derived(name, Role.AGGREGATE)
    agg_name = derived.name
    readers = [
        (c, p)
        for c, p in g.readers(name)
        if c != agg_name and not (g.node(c).map_port == p and g.node(c).inputs[p].key is None)
    ]
    if not readers:
        return None
    if agg_name not in g:
        g.add(Node(agg_name, Kind.AGGREGATE, inputs={"items": Ref(name)}, attrs={"flattens": name}, op=GatherOp("flatten"),
                   derived=derived))
    for consumer, port in readers:
        node = g.node(consumer)
        old = node.inputs[port]
        g.replace(node.replace(inputs={**node.inputs, port: Ref(agg_name, old.key)}))
    g.note(pass_name, f"{[c for c, _ in readers]} read {name} whole through {agg_name}")
    return agg_name
