"""Pass 4, decode pipelining: stream a splittable decode into its batchable consumers.

A Decode annotated `attrs["splittable"]` (its output is a list: lines, a numbered list, comma
separated values, a JSON array) that feeds itemwise consumers becomes a PartialDecode whose
`StreamDecodeOp` parses complete items from the decode deltas; each item goes downstream at
once (query expansion -> embed -> search, item by item, Teola Fig. 3c).
"""

from __future__ import annotations

from accel.ir.graph import Graph
from accel.ir.kinds import Kind
from accel.ir.ops import DecodeOp, StreamDecodeOp
from accel.passes.registry import PassContext
from accel.ir.splitters import SPLITTERS
from accel.passes.streams import pipeline_from, pipelinable

NAME = "decode_pipeline"


def decode_pipeline(graph: Graph, context: PassContext) -> Graph:
    g = graph.copy()
    for node in graph.nodes():
        split = node.attrs.get("splittable")
        if node.kind is not Kind.DECODE or split is None:
            continue
        if split not in SPLITTERS or not isinstance(node.op, DecodeOp) or node.op.split != split:
            g.note(NAME, f"{node.name} not pipelined: splitter {split!r} unknown or not the op's parser")
            continue
        if not any(pipelinable(g.node(c), p, node.name) for c, p in g.readers(node.name)):
            continue
        streaming = node.replace(
            kind=Kind.PARTIAL_DECODE,
            op=StreamDecodeOp(node.op, split),
            attrs={**node.attrs, "streams": True},
        )
        g.replace(streaming)
        g.note(NAME, f"{node.name} decodes as a stream of {split} items")
        pipeline_from(g, node.name, NAME)
    g.compute_depths()
    return g
