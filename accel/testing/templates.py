"""Teola's module templates, written by hand: `ModuleTemplate.transform` (GraphTransform,
Teola Algorithm 1) and the configuration-dependent decompositions `refine` and
`tree_summarize`.

A module template is an app's chain of components (T_N) with their module order (T_E). For a
query configuration C each component is decomposed into primitives (DecomposeComponent +
Configure); each template edge becomes an *order* edge from the tail primitive of one component
to the head primitives of the next, which dependency pruning (`prune_dependencies`) drops
where it carries no data. The adapters never need this: they capture the data flow an app
already has. Tests and experiments use it to build p-graphs the way the paper does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accel.engines.base import SamplingParams
from accel.ir import Graph, GraphBuilder, GraphError, Ref, config_key
from accel.ir.build import Prompt

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
