"""Pass 3, prefill split: warm the prefix cache with the ready part of a prompt.

A prompt's parts (`attrs["prompt_parts"]`: static text and `Slot`s) are often partly ready at
query start (instructions, the question) while later parts are still in flight (retrieved
context). The longest ready prefix is prefilled early by a PartialPrefill: on stock vLLM a
`max_tokens=1` request whose token ids are that prefix cut at a block boundary (`WarmupOp`),
so the real request later hits the prefix cache. The Prefill becomes a FullPrefill that waits
for the warm-up through a pinned order edge; the Decode is unchanged, so the engine sees the
same prompt as without the pass.

An Expand node whose sub-templates open with a known prompt (`attrs["prompt_parts"]`, the
LLM engine in `attrs["prefill_engine"]`; slots name the Expand node's input ports, and a slot
it has no port for is late) gets the same warm-up, pinned before it: the answer prompt's static
head is prefilled while retrieval runs although its Prefill lives in a sub-template.

A slot is ready when its source needs no engine: no node at or above it is engine-bound.
"""

from __future__ import annotations

import networkx as nx

from accel.ir.graph import Graph
from accel.ir.kinds import Kind
from accel.ir.node import Derived, Node, Role
from accel.ir.ops import DecodeOp, PromptPart, Slot, WarmupOp
from accel.passes.registry import PassContext

NAME = "prefill_split"


def _ready_ports(graph: Graph, node: Node) -> set[str]:
    ready = set()
    for port, ref in node.inputs.items():
        upstream = nx.ancestors(graph.nx, ref.node) | {ref.node}
        if not any(graph.node(n).is_engine for n in upstream):
            ready.add(port)
    return ready


def _ready_prefix(parts: list[PromptPart], ready: set[str]) -> tuple[list[PromptPart], bool]:
    """The leading parts that are ready, and whether a late part follows them."""
    for i, part in enumerate(parts):
        if isinstance(part, Slot) and part.port not in ready:
            return parts[:i], True
    return parts, False


def _decode_of(graph: Graph, prefill: str) -> Node | None:
    for consumer, port in graph.readers(prefill):
        node = graph.node(consumer)
        if node.kind in (Kind.DECODE, Kind.PARTIAL_DECODE) and isinstance(node.op, DecodeOp) and node.op.port == port:
            return node
        inner = getattr(node.op, "inner", None)
        if node.kind is Kind.PARTIAL_DECODE and isinstance(inner, DecodeOp) and inner.port == port:
            return node
    return None


def _warmed_engine(graph: Graph, node: Node) -> tuple[str | None, str] | None:
    """(LLM engine, what the warm-up serves) for a node whose prompt can be split, else None."""
    if "prompt_parts" not in node.attrs:
        return None
    if node.kind is Kind.EXPAND:
        engine = node.attrs.get("prefill_engine")
        return None if engine is None else (engine, node.name)
    if node.kind is not Kind.PREFILL:
        return None
    decode = _decode_of(graph, node.name)
    return None if decode is None else (decode.engine, decode.name)


def prefill_split(graph: Graph, context: PassContext) -> Graph:
    g = graph.copy()
    for node in graph.nodes():
        target = _warmed_engine(graph, node)
        if target is None:
            continue
        engine, serves = target
        prefix, has_late = _ready_prefix(list(node.attrs["prompt_parts"]), _ready_ports(graph, node))
        messages = node.attrs.get("messages") or ()
        llm = context.llm(engine) if engine is not None else None
        reason = (
            "every part is ready at once" if not has_late
            else "the first part is late" if not prefix
            else f"no tokenizer in the pass context for engine {engine}" if llm is None
            else f"no chat template renderer in the pass context for engine {engine}" if messages and llm.render_chat is None
            else None
        )
        if reason is not None:
            g.note(NAME, f"{node.name} not split: {reason}")
            continue
        assert llm is not None  # else a reason above names its absence
        ports = {p.port for p in prefix if isinstance(p, Slot)}
        derived = Derived(node.name, Role.WARM_UP)
        warm = Node(
            derived.name,
            Kind.PARTIAL_PREFILL,
            engine=engine,
            inputs={port: node.inputs[port] for port in sorted(ports)},
            attrs={"prefix_parts": len(prefix), "warms": serves},
            op=WarmupOp(
                prefix=tuple(prefix),
                tokenize=llm.tokenize,
                block_size=llm.block_size,
                safety_tail=context.safety_tail,
                messages=tuple(messages),
                render_chat=llm.render_chat,
            ),
            derived=derived,
        )
        g.add(warm)
        if node.kind is Kind.PREFILL:
            g.replace(g.node(node.name).replace(kind=Kind.FULL_PREFILL))
        g.add_edge(warm.name, node.name, pinned=True)
        g.note(NAME, f"{node.name}: first {len(prefix)} prompt part(s) prefilled early by {warm.name}")
    g.compute_depths()
    return g
