"""Pass 4, decode pipelining: stream a splittable decode into its batchable consumers.

A Decode annotated `attrs["splittable"]` (its output is a list: lines, a numbered list, comma
separated values, a JSON array) that feeds itemwise consumers becomes a PartialDecode whose
`StreamDecodeOp` parses complete items from the decode deltas; each item goes downstream at
once (query expansion -> embed -> search, item by item, Teola Fig. 3c).

An op whose output a framework parses its own way (e.g. LlamaIndex's query-generation lines,
cut to the number of queries it keeps) offers its streaming form itself: `op.streamed()`
returns the PartialDecode's `StreamOp`, whose items are the one-element slices of the plain
op's list output. Adapters only mark the Decode splittable; this pass decides to stream it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from accel.ir.graph import Graph
from accel.ir.kinds import Kind
from accel.ir.ops import DecodeOp, StreamDecodeOp
from accel.ir.schedule import Streams
from accel.passes.registry import PassContext
from accel.ir.splitters import SPLITTERS
from accel.passes.streams import feeds_engine, pipeline_from

NAME = "decode_pipeline"


def decode_pipeline(graph: Graph, context: PassContext) -> Graph:
    g = graph.copy()
    for node in graph.nodes():
        split = node.attrs.get("splittable")
        if node.kind is not Kind.DECODE or split is None:
            continue
        op = _streaming_op(node.op, split)
        if op is None:
            g.note(NAME, f"{node.name} not pipelined: splitter {split!r} unknown or not the op's parser")
            continue
        if not feeds_engine(g, node.name):
            continue
        streaming = node.replace(kind=Kind.PARTIAL_DECODE, op=op, schedule=replace(node.schedule, streams=Streams.DECODE))
        g.replace(streaming)
        g.note(NAME, f"{node.name} decodes as a stream of {split} items")
        pipeline_from(g, node.name, NAME)
    g.compute_depths()
    return g


def _streaming_op(op: Any, split: str) -> Any:
    """The PartialDecode op for a splittable decode's op, or None when it cannot stream."""
    if isinstance(op, DecodeOp):
        return StreamDecodeOp(op, split) if split in SPLITTERS and op.split == split else None
    streamed = getattr(op, "streamed", None)
    return streamed() if callable(streamed) else None
