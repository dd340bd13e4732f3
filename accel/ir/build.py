"""Building p-graphs: `GraphBuilder`, what adapters use to lower a component into primitives.

Teola's hand-written module templates (GraphTransform, Algorithm 1) live in
`accel.testing.templates`: adapters capture the data flow an app already has, so only tests and
experiments write templates by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from accel.engines.base import SamplingParams
from accel.ir.errors import GraphError
from accel.ir.graph import Graph
from accel.ir.kinds import Kind
from accel.ir.node import Node, Op, Ref
from accel.ir.ops import DecodeOp, PickOp, PromptOp, PromptPart, Slot
from accel.ir.schedule import WHOLE, Schedule

Prompt = Sequence[PromptPart] | Sequence[tuple[str, Sequence[PromptPart]]]


class GraphBuilder:
    """Adds nodes to one graph. `scope(prefix)` returns a builder on the same graph whose
    node names are prefixed `prefix.`, so components can use short local names."""

    def __init__(self, graph: Graph | None = None, prefix: str = "") -> None:
        self.graph = graph if graph is not None else Graph()
        self.prefix = prefix
        self.added: list[str] = []

    def scope(self, prefix: str) -> GraphBuilder:
        return GraphBuilder(self.graph, f"{self.prefix}{prefix}.")

    def _name(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def input(self, name: str) -> Ref:
        """An Input node; its value is the query's binding for `name` (not prefixed)."""
        node = self.graph.add(Node(name, Kind.INPUT))
        self.added.append(node.name)
        return Ref(node.name)

    def add(
        self,
        kind: Kind,
        name: str,
        *,
        engine: str | None = None,
        inputs: Mapping[str, Ref] | None = None,
        attrs: Mapping[str, Any] | None = None,
        op: Op | None = None,
        schedule: Schedule = WHOLE,
    ) -> Ref:
        """Add a primitive and return a ref to its output. `schedule` is the passes' business
        (adapters leave it whole); runtime tests set it to run a scheduled graph directly."""
        node = Node(self._name(name), Kind(kind), engine, dict(inputs or {}), dict(attrs or {}), op, schedule=schedule)
        for port, ref in node.inputs.items():
            if ref.node not in self.graph:
                raise GraphError(node.name, f"port {port!r} reads {ref.node!r}, which is not built yet", "add upstream nodes first")
        self.graph.add(node)
        self.added.append(node.name)
        return Ref(node.name)

    def order(self, before: Ref | str, after: Ref | str) -> None:
        """A template order edge: `after` runs after `before` without reading its value."""
        src = before.node if isinstance(before, Ref) else before
        dst = after.node if isinstance(after, Ref) else after
        self.graph.add_edge(src, dst, data=False)

    def output(self, value: Ref, *, name: str = "output", op: Op | None = None) -> Ref:
        """The single Output node; its value is `value` (or `op.compute({"value": ...})`)."""
        return self.add(Kind.OUTPUT, name, inputs={"value": value}, op=op or PickOp("value"))

    def pick(self, name: str, value: Ref) -> Ref:
        """A whole-value ref for `value` (materialises a keyed ref so it can be indexed again)."""
        if value.key is None:
            return value
        return self.add(Kind.CALL, name, inputs={"value": value}, op=PickOp("value"))

    def llm(
        self,
        name: str,
        prompt: Prompt,
        inputs: Mapping[str, Ref],
        *,
        engine: str = "llm",
        params: SamplingParams | None = None,
        split: str | None = None,
        attrs: Mapping[str, Any] | None = None,
    ) -> Ref:
        """One LLM call as a Prefill (renders the prompt from static text and `Slot`s bound to
        `inputs`) followed by a Decode on `engine`. `prompt` is a list of parts, or a list of
        (role, parts) messages for chat models. `split` marks the output as splittable."""
        params = params or SamplingParams()
        chat = bool(prompt) and isinstance(prompt[0], tuple)
        if chat:
            messages = tuple((role, tuple(parts)) for role, parts in prompt)  # type: ignore[misc]
            op = PromptOp(messages=messages)
            prefill_attrs = {"prompt_parts": list(op.flat_parts), "messages": messages}
        else:
            op = PromptOp(parts=tuple(prompt))  # type: ignore[arg-type]
            prefill_attrs = {"prompt_parts": list(op.parts)}
        slots = {p.port for p in op.flat_parts if isinstance(p, Slot)}
        if slots - set(inputs):
            raise GraphError(self._name(name), f"prompt slots {sorted(slots - set(inputs))} are not bound", "pass them in inputs")
        prefill = self.add(Kind.PREFILL, f"{name}.prefill", inputs=inputs, attrs=prefill_attrs, op=op)
        decode_attrs = {"params": params, **(attrs or {})}
        if split is not None:
            decode_attrs["splittable"] = split
        return self.add(
            Kind.DECODE,
            f"{name}.decode",
            engine=engine,
            inputs={"prompt": prefill},
            attrs=decode_attrs,
            op=DecodeOp(params=params, split=split),
        )

    def build(self) -> Graph:
        """Validate the graph and compute depths."""
        self.graph.validate()
        self.graph.compute_depths()
        return self.graph
