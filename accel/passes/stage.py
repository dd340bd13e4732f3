"""Pass 2, stage decomposition: split an oversized batchable primitive into micro-batches.

A batchable node whose input exceeds its engine's measured maximum efficient batch size for
its input class (`context.profiles["<engine>/<class>"]`, else `[engine]`; never a constant:
`accel.profiles`) is split into micro-batches of that size that
pipeline with the downstream batchable nodes, micro-batch by micro-batch, plus an Aggregate.
Without a batchable consumer there is nothing to overlap, and a query-time node stays whole
(its engine scheduler caps batch sizes anyway); bulk chunk embedding (an Embed whose vectors
are ingested) is still cut, so that an upload's micro-batches interleave on the shared
embedder with the query embeddings of concurrent apps instead of holding it for the upload.

- Size known from the configuration (`attrs["size"]`): explicit nodes `name#mb0..k` running
  `SliceOp`s, with the downstream chain duplicated per micro-batch; the original names become
  concatenating Aggregates, so every other reader is unchanged.
- Size known only at run time: the node's schedule streams its slices of at most m items
  (`Schedule(streams=Streams.SLICES, micro_batch=m)`, see `accel.ir.ops`); downstream nodes
  are mapped onto it.
"""

from __future__ import annotations

from dataclasses import replace

from accel.ir.graph import Graph
from accel.ir.kinds import Kind
from accel.ir.node import Derived, Node, Ref, Role
from accel.ir.ops import GatherOp, SliceOp
from accel.ir.schedule import Streams
from accel.passes.registry import PassContext
from accel.passes.streams import feeds_engine, is_elementwise, pipeline_from, pipelinable

NAME = "stage_decompose"


def stage_decompose(graph: Graph, context: PassContext) -> Graph:
    g = graph.copy()
    for name in graph.topo_order():
        if name not in g:
            continue
        node = g.node(name)
        if not is_elementwise(node) or node.streams or node.map_port or _is_micro_batch(node):
            continue
        cls = input_class(g, node)
        limit = context.profiles.get(f"{node.engine}/{cls}", context.profiles.get(node.engine or ""))
        if limit is None:
            continue
        if limit < 1:
            g.note(NAME, f"ignored profile {limit} for engine {node.engine} (must be >= 1)")
            continue
        if cls != "chunk" and not feeds_engine(g, name):
            g.note(NAME, f"{name} left whole: no batchable consumer to pipeline with")
            continue
        size = node.attrs.get("size")
        if size is None:
            _micro_batch_at_run_time(g, node, limit)
        elif size > limit:
            _explicit_micro_batches(g, node, limit, size)
    g.compute_depths()
    return g


def input_class(g: Graph, node: Node) -> str:
    """What a node's items are, for its engine's per-class profile: rerank pairs, searches,
    chunk texts (an Embed feeding an Ingest, directly or through local plumbing that attaches
    the vectors to their nodes) or query texts (any other Embed)."""
    if node.kind is Kind.RERANK:
        return "pairs"
    if node.kind is Kind.SEARCH:
        return "search"
    if node.kind is Kind.EMBED and _feeds_ingest(g, node.name):
        return "chunk"
    return "query"


def _feeds_ingest(g: Graph, name: str) -> bool:
    """Whether `name`'s value reaches an Ingest through local nodes only."""
    stack, seen = list(g.succs(name)), set()
    while stack:
        succ = stack.pop()
        if succ in seen:
            continue
        seen.add(succ)
        node = g.node(succ)
        if node.kind is Kind.INGEST:
            return True
        if not node.is_engine:
            stack.extend(g.succs(succ))
    return False


def _is_micro_batch(node: Node) -> bool:
    """A micro-batch copy this pass made (it is cut already)."""
    return node.derived is not None and node.derived.role is Role.MICRO_BATCH


def _micro_batch_at_run_time(g: Graph, node: Node, limit: int) -> None:
    g.replace(node.replace(schedule=replace(node.schedule, streams=Streams.SLICES, micro_batch=limit)))
    g.note(NAME, f"{node.name} runs in micro-batches of {limit} (profile of {node.engine})")
    pipeline_from(g, node.name, NAME)


def _explicit_micro_batches(g: Graph, head: Node, limit: int, size: int) -> None:
    port = head.batch_port
    bounds = [(a, min(a + limit, size)) for a in range(0, size, limit)]
    # parts[name] = names of that node's per-micro-batch copies, in order
    parts: dict[str, list[str]] = {}
    parts[head.name] = []
    for j, (a, b) in enumerate(bounds):
        derived = Derived(head.name, Role.MICRO_BATCH, j)
        copy = head.replace(
            name=derived.name,
            derived=derived,
            op=SliceOp(head.op, port, a, b),
            attrs={**head.attrs, "size": b - a},
        )
        g.add(copy)
        parts[head.name].append(copy.name)
    chain = [head.name]
    i = 0
    while i < len(chain):
        source = chain[i]
        i += 1
        for consumer, cport in g.readers(source):
            node = g.node(consumer)
            if consumer in parts or not (is_elementwise(node) and pipelinable(node, cport, source)):
                continue
            parts[consumer] = []
            for j, src_part in enumerate(parts[source]):
                a, b = bounds[j]
                derived = Derived(consumer, Role.MICRO_BATCH, j)
                copy = node.replace(
                    name=derived.name,
                    derived=derived,
                    inputs={**node.inputs, cport: Ref(src_part)},
                    attrs={**node.attrs, "size": b - a},
                )
                g.add(copy)
                parts[consumer].append(copy.name)
            chain.append(consumer)
    for name in chain:
        _become_aggregate(g, name, parts[name])
    for name in chain:
        if not g.succs(name):
            g.remove(name)
    g.note(NAME, f"{head.name} ({size} items) split into {len(bounds)} micro-batches of <= {limit}, pipelined through {chain[1:] or 'nothing'}")


def _become_aggregate(g: Graph, name: str, part_names: list[str]) -> None:
    """Replace `name` by an Aggregate concatenating its micro-batch copies; incoming order
    edges move to every copy."""
    for pred in g.preds(name):
        if not g.is_data_edge(pred, name):
            for part in part_names:
                g.add_edge(pred, part, pinned=g.is_pinned(pred, name))
            g.remove_edge(pred, name)
    inputs = {f"part{j}": Ref(p) for j, p in enumerate(part_names)}
    old = g.node(name)
    g.replace(Node(name, Kind.AGGREGATE, inputs=inputs, attrs={"concat_of": old.kind.value}, op=GatherOp("concat")))
