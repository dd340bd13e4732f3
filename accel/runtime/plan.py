"""How the graph scheduler runs each node of a template, decided once per template.

The template already holds topological arrays (pred counts, successors, port refs, depth); the
plan adds the run-time decisions that depend only on node kinds, ops and schedules: which nodes
run inline on the loop, which need a task, which stream, and which are mapped over a stream. It is
cached per template, so instantiating a query does no graph work.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field

from accel.ir.expand import engines_of
from accel.ir.kinds import Kind
from accel.ir.node import Node
from accel.ir.output_parts import DictPart, dict_layout, through_identities
from accel.ir.schedule import Streams
from accel.ir.template import Template


class Mode(enum.Enum):
    INPUT = "input"  # the query's binding
    INLINE = "inline"  # cheap sync local op: computed on the loop without a task
    ASYNC = "async"  # `async def compute`: its own task on the loop
    THREAD = "thread"  # blocking sync local op: its own task, computed in a worker thread
    ENGINE = "engine"  # requests to the node's engine scheduler
    STREAM = "stream"  # one LLM request streamed and parsed into items (PartialDecode)
    MICRO = "micro"  # itemwise engine node run in micro-batch slices, each slice an item
    EXPAND = "expand"  # runs a sub-template picked at run time inside the query


@dataclass(frozen=True)
class Plan:
    template: Template
    modes: tuple[Mode, ...]
    mapped_src: tuple[int, ...]
    """Index of the streaming producer a node is mapped over, or -1."""
    pending: tuple[int, ...]
    """Predecessors to wait for (a mapped consumer does not wait for its stream's end)."""
    readers: tuple[int, ...]
    produces_stream: tuple[bool, ...]
    engines: frozenset[str]
    roots: tuple[int, ...]
    output: int
    text_source: int = -1
    """Index of the Decode whose generated text the Output carries unchanged, or -1: the node
    `Runtime.stream` streams deltas from (see the text streaming contract in `accel.ir.ops`)."""
    item_source: int = -1
    """Index of the split Decode whose streamed items the Output is (its text deltas stream), or -1."""
    output_taps: Mapping[int, tuple[tuple[str, ...], ...]] = field(default_factory=dict, hash=False)
    """What `Runtime.stream` streams deltas from: Decode index -> the output paths its deltas go
    to (() the output itself: the text or item source; else an output dict's text parts)."""
    parts_at: Mapping[int, tuple[DictPart, ...]] = field(default_factory=dict, hash=False)
    """Node index -> the parts of an Output dict its value makes (`accel.ir.output_parts`),
    streamed as soon as it finishes instead of the value once."""


def _base_mode(node: Node) -> Mode:
    if node.kind is Kind.INPUT:
        return Mode.INPUT
    if node.kind is Kind.EXPAND:
        return Mode.EXPAND
    if node.is_engine:
        streams = node.schedule.streams
        if streams is Streams.DECODE:
            return Mode.STREAM
        if streams is Streams.SLICES and node.batch_port:
            return Mode.MICRO
        return Mode.ENGINE
    compute = getattr(node.op, "compute", None)
    if compute is None:
        return Mode.INLINE
    if inspect.iscoroutinefunction(compute):
        return Mode.ASYNC
    return Mode.THREAD if getattr(node.op, "blocking", False) else Mode.INLINE


def build_plan(template: Template) -> Plan:
    """Decide, once, how each node of `template` runs."""
    nodes = template.nodes
    modes = [_base_mode(node) for node in nodes]
    produces = [mode in (Mode.STREAM, Mode.MICRO) for mode in modes]
    mapped = [-1] * len(nodes)
    for i, node in enumerate(nodes):  # topological order: producers are decided first
        port = node.map_port
        refs = {p: src for p, src, _ in template.port_refs[i]}
        if port is not None and port in refs and produces[refs[port]]:
            mapped[i] = refs[port]
            produces[i] = node.streams
    pending = [count - (1 if mapped[i] >= 0 else 0) for i, count in enumerate(template.pred_count)]
    output = template.index[template.output]
    text_source = _text_source(template, modes, mapped, output)
    item_source = _item_source(template, modes, mapped, through_identities(template, output, None)[0])
    taps, parts_at = _output_points(template, modes, mapped, text_source if text_source >= 0 else item_source)
    return Plan(
        template=template,
        modes=tuple(modes),
        mapped_src=tuple(mapped),
        pending=tuple(pending),
        readers=tuple(len(s) for s in template.data_succs),
        produces_stream=tuple(produces),
        engines=frozenset(engines_of(nodes)),
        roots=tuple(i for i, count in enumerate(pending) if count == 0),
        output=output,
        text_source=text_source,
        item_source=item_source,
        output_taps=taps,
        parts_at=parts_at,
    )


def _output_points(template: Template, modes: list[Mode], mapped: list[int],
                   source: int) -> tuple[dict[int, tuple[tuple[str, ...], ...]], dict[int, tuple[DictPart, ...]]]:
    """(`Plan.output_taps`, `Plan.parts_at`): an Output dict's parts, each text part's Decode
    among the taps; else the output's own text or item source."""
    parts = dict_layout(template)
    if not parts:
        return ({source: ((),)} if source >= 0 else {}), {}
    taps: dict[int, tuple[tuple[str, ...], ...]] = {}
    parts_at: dict[int, tuple[DictPart, ...]] = {}
    for part in parts:
        decode = -1 if part.merge or part.key is not None else _stream_source(template, modes, mapped, part.node)
        if decode >= 0:
            taps[decode] = (*taps.get(decode, ()), part.path)
        parts_at[part.node] = (*parts_at.get(part.node, ()), part)
    return taps, parts_at


def _text_source(template: Template, modes: list[Mode], mapped: list[int], i: int) -> int:
    """Walk back from node i through nodes that carry their input's text unchanged to a Decode
    that produces that text; -1 when the chain ends anywhere else."""
    while True:
        node = template.nodes[i]
        if node.kind is Kind.DECODE and modes[i] is Mode.ENGINE and mapped[i] < 0:
            return i if getattr(node.op, "streams_text", False) else -1
        if node.is_engine:
            return -1
        port = getattr(node.op, "text_port", None) if node.op is not None else node.passthrough_port
        sources = [(src, key) for p, src, key in template.port_refs[i] if p == port]
        if port is None or len(sources) != 1 or sources[0][1] is not None:
            return -1
        i = sources[0][0]


def _item_source(template: Template, modes: list[Mode], mapped: list[int], i: int) -> int:
    """i, when it is a split Decode that streams its items (run whole, not pipelined), else -1."""
    node = template.nodes[i]
    plain = node.kind is Kind.DECODE and modes[i] is Mode.ENGINE and mapped[i] < 0
    return i if plain and getattr(node.op, "streams_items", False) else -1


def _stream_source(template: Template, modes: list[Mode], mapped: list[int], i: int) -> int:
    """The Decode whose items or text node i carries unchanged, or -1."""
    items = _item_source(template, modes, mapped, i)
    return items if items >= 0 else _text_source(template, modes, mapped, i)
