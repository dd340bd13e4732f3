"""Building p-graphs: `GraphBuilder` (what adapters use to lower a component into primitives)
and `ModuleTemplate.transform` (Teola Algorithm 1, GraphTransform).

A module template is the app's chain of components (T_N) with their module order (T_E). For a
query configuration C each component is decomposed into primitives (DecomposeComponent +
Configure); each template edge becomes an *order* edge from the tail primitive of one component
to the head primitives of the next. Dependency pruning later drops the order edges that carry
no data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accel.engines.base import SamplingParams
from accel.ir.errors import GraphError
from accel.ir.graph import Graph
from accel.ir.kinds import Kind
from accel.ir.node import Node, Op, Ref
from accel.ir.ops import DecodeOp, PickOp, PromptOp, PromptPart, Slot
from accel.ir.template import config_key

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
    ) -> Ref:
        """Add a primitive and return a ref to its output."""
        node = Node(self._name(name), Kind(kind), engine, dict(inputs or {}), dict(attrs or {}), op)
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


# ---- GraphTransform (Teola Algorithm 1) ---------------------------------------------------

Lower = Callable[[GraphBuilder, dict[str, Ref], Mapping[str, Any]], Ref]


@dataclass(frozen=True)
class Component:
    """A template component: `lower(builder, inputs, config)` adds its primitives and returns
    its output ref; `reads` names the template inputs or components it consumes (the port
    names are those names); `after` its module-order predecessors."""

    name: str
    lower: Lower
    reads: tuple[str, ...] = ()
    after: tuple[str, ...] = ()


class ModuleTemplate:
    """An app's module chain T = (T_N, T_E). `transform(config)` is GraphTransform: it builds
    the p-graph for one query configuration (per-component config dicts keyed by name)."""

    def __init__(self, name: str, inputs: Sequence[str]) -> None:
        self.name = name
        self.input_names = tuple(inputs)
        self.components: list[Component] = []

    def component(self, name: str, lower: Lower, *, reads: Sequence[str] = (), after: Sequence[str] | None = None) -> None:
        """Append a component; by default it follows the previous one in module order."""
        known = set(self.input_names) | {c.name for c in self.components}
        unknown = [r for r in reads if r not in known]
        if unknown or name in known:
            raise GraphError(name, f"unknown reads {unknown}" if unknown else "duplicate component name", "declare components in module order with unique names")
        if after is None:
            after = (self.components[-1].name,) if self.components else ()
        self.components.append(Component(name, lower, tuple(reads), tuple(after)))

    @property
    def structure_key(self) -> tuple[Any, ...]:
        return (
            self.name,
            self.input_names,
            tuple((c.name, _qualname(c.lower), c.reads, c.after) for c in self.components),
        )

    def cache_key(self, config: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[Any, str]:
        return (self.structure_key, config_key(config))

    def transform(self, config: Mapping[str, Mapping[str, Any]] | None = None) -> Graph:
        config = config or {}
        root = GraphBuilder()
        refs: dict[str, Ref] = {name: root.input(name) for name in self.input_names}
        heads: dict[str, list[str]] = {}
        for comp in self.components:
            sub = root.scope(comp.name)
            out = comp.lower(sub, {r: refs[r] for r in comp.reads}, config.get(comp.name, {}))
            own = set(sub.added)
            heads[comp.name] = [n for n in sub.added if not own.intersection(root.graph.preds(n))]
            refs[comp.name] = out
        for comp in self.components:
            for before in comp.after:
                tail = refs[before].node
                for head in heads[comp.name]:
                    if head != tail:
                        root.order(tail, head)
        out_ref = refs[self.components[-1].name] if self.components else refs[self.input_names[0]]
        root.output(out_ref)
        graph = root.build()
        graph.meta["template"] = self.name
        graph.meta["config_key"] = config_key(config)
        return graph


def _qualname(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


# ---- configuration-dependent decompositions ----------------------------------------------


def refine(
    b: GraphBuilder,
    *,
    question: Ref,
    chunks: Ref,
    n: int,
    qa_prompt: Prompt,
    refine_prompt: Prompt,
    engine: str = "llm",
    params: SamplingParams | None = None,
) -> Ref:
    """`refine` synthesis over `n` chunks: n chained Prefill/Decode pairs. The QA prompt reads
    slots `question` and `context`; the refine prompt also reads `answer` (the previous one)."""
    if n < 1:
        raise GraphError(b._name("refine"), "refine needs at least one chunk", "configure n >= 1")
    chunks = b.pick("chunks", chunks)
    answer = b.llm("qa0", qa_prompt, {"question": question, "context": Ref(chunks.node, 0)}, engine=engine, params=params)
    for i in range(1, n):
        inputs = {"question": question, "context": Ref(chunks.node, i), "answer": answer}
        answer = b.llm(f"refine{i}", refine_prompt, inputs, engine=engine, params=params)
    return answer


def tree_summarize(
    b: GraphBuilder,
    *,
    question: Ref,
    chunks: Ref,
    n: int,
    fanout: int,
    prompt: Callable[[int], Prompt],
    engine: str = "llm",
    params: SamplingParams | None = None,
) -> Ref:
    """`tree_summarize` over `n` chunks: each level summarises groups of `fanout` texts, until
    one call remains. Calls of one level are siblings (same depth), so they batch together.
    `prompt(k)` returns the prompt for k context texts, with slots `question` and `ctx0..ctx{k-1}`."""
    if n < 1 or fanout < 2:
        raise GraphError(b._name("tree"), f"tree_summarize needs n >= 1 and fanout >= 2 (got {n}, {fanout})", "fix the configuration")
    chunks = b.pick("chunks", chunks)
    texts = [Ref(chunks.node, i) for i in range(n)]
    level = 0
    while True:
        groups = [texts[i : i + fanout] for i in range(0, len(texts), fanout)]
        texts = []
        for j, group in enumerate(groups):
            inputs = {"question": question, **{f"ctx{k}": ref for k, ref in enumerate(group)}}
            texts.append(b.llm(f"l{level}.s{j}", prompt(len(group)), inputs, engine=engine, params=params))
        if len(texts) == 1:
            return texts[0]
        level += 1
