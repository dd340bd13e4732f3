"""Templates: an optimised e-graph frozen into arrays, bound to a query in well under 1 ms.

`Template.instantiate` does no graph work: the runtime walks `order`, `pred_count`, `succs`
and `port_refs` by index. `TemplateCache` builds a template once per (structure, config).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accel.ir.errors import MissingInput
from accel.ir.graph import Graph
from accel.ir.kinds import Kind
from accel.ir.node import Node


@dataclass(frozen=True, eq=False)
class Template:
    """An e-graph in topological order. Index i refers to `order[i]` everywhere.

    - `pred_count[i]`: number of distinct predecessors (data and order edges) of node i;
    - `succs[i]`: indices of its successors; `data_succs[i]`: those that read its value;
    - `port_refs[i]`: (port, predecessor index, key) for each input port;
    - `depth[i]`: longest path length to Output (topology-aware batching priority)."""

    graph: Graph
    order: tuple[str, ...]
    index: Mapping[str, int]
    nodes: tuple[Node, ...]
    pred_count: tuple[int, ...]
    succs: tuple[tuple[int, ...], ...]
    data_succs: tuple[tuple[int, ...], ...]
    port_refs: tuple[tuple[tuple[str, int, str | int | None], ...], ...]
    depth: tuple[int, ...]
    inputs: tuple[str, ...]
    output: str
    p_graph: Graph | None = None
    key: tuple[Hashable, Hashable] | None = None

    @classmethod
    def from_graph(cls, graph: Graph, *, p_graph: Graph | None = None, key: tuple[Hashable, Hashable] | None = None) -> Template:
        graph.validate()
        graph.compute_depths()
        order = tuple(graph.topo_order())
        index = {name: i for i, name in enumerate(order)}
        nodes = tuple(graph.node(name) for name in order)
        return cls(
            graph=graph,
            order=order,
            index=index,
            nodes=nodes,
            pred_count=tuple(len(graph.preds(name)) for name in order),
            succs=tuple(tuple(sorted(index[s] for s in graph.succs(name))) for name in order),
            data_succs=tuple(
                tuple(sorted(index[s] for s in graph.succs(name) if graph.is_data_edge(name, s))) for name in order
            ),
            port_refs=tuple(
                tuple((port, index[ref.node], ref.key) for port, ref in node.inputs.items()) for node in nodes
            ),
            depth=tuple(node.depth for node in nodes),
            inputs=tuple(n.name for n in nodes if n.kind is Kind.INPUT),
            output=graph.output.name,
            p_graph=p_graph,
            key=key,
        )

    def __len__(self) -> int:
        return len(self.order)

    def instantiate(self, inputs: Mapping[str, Any], query_id: str) -> GraphInstance:
        """Bind a query's inputs (by Input node name). No graph copying."""
        missing = [name for name in self.inputs if name not in inputs]
        if missing:
            raise MissingInput(missing[0], f"query {query_id!r} binds no value for input(s) {missing}", f"pass values for {list(self.inputs)}")
        extra = [name for name in inputs if name not in self.index or self.nodes[self.index[name]].kind is not Kind.INPUT]
        if extra:
            raise MissingInput(extra[0], f"query {query_id!r} binds unknown input(s) {extra}", f"the template's inputs are {list(self.inputs)}")
        return GraphInstance(self, query_id, dict(inputs))


@dataclass(eq=False)
class GraphInstance:
    """One query's view of a template: its id and bound inputs; the runtime keeps per-query
    state (values, pending counts) next to it."""

    template: Template
    query_id: str
    inputs: dict[str, Any]
    values: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.values.update(self.inputs)


def config_key(config: Mapping[str, Any] | None) -> str:
    """A stable key for a query configuration (order-insensitive over mapping keys)."""
    return hashlib.sha1(_canonical(config or {}).encode()).hexdigest()[:16]


def _canonical(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k!r}:{_canonical(value[k])}" for k in sorted(value, key=repr)) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_canonical(v) for v in value) + "]"
    return repr(value)


TEMPLATE_CACHE_SIZE = 512
"""Templates a cache keeps, least recently used first out. A wrapper holds its own templates,
so an evicted one costs only a rebuild when the same structure is wrapped again."""


class TemplateCache:
    """Templates keyed by `(structure_key, config_key)`: the p-graph builder and the passes
    run once per key; later lookups return the cached template. Each key builds under a lock
    of its own: concurrent callers for one key wait for its first builder, other keys build
    meanwhile, and a failed build caches nothing (the next caller builds again)."""

    def __init__(self, size: int = TEMPLATE_CACHE_SIZE) -> None:
        self._templates: OrderedDict[tuple[Hashable, Hashable], Template] = OrderedDict()
        self._building: dict[tuple[Hashable, Hashable], threading.Lock] = {}
        self._lock = threading.Lock()
        self._size = size
        self.hits = 0
        self.misses = 0

    def _cached(self, key: tuple[Hashable, Hashable]) -> Template | None:
        """Under `_lock`: the cached template, now the most recently used, counted as a hit."""
        found = self._templates.get(key)
        if found is not None:
            self._templates.move_to_end(key)
            self.hits += 1
        return found

    def get(
        self,
        structure_key: Hashable,
        config: Hashable,
        build: Callable[[], Graph],
        optimize: Callable[[Graph], Graph] | None = None,
    ) -> Template:
        """The template for this key, building `optimize(build())` on the first request.
        `optimize=None` leaves the p-graph as is (no passes)."""
        key = (structure_key, config)
        with self._lock:
            found = self._cached(key)
            if found is not None:
                return found
            building = self._building.setdefault(key, threading.Lock())
        with building:
            with self._lock:
                found = self._cached(key)
                if found is not None:
                    return found
                self.misses += 1
            try:
                p_graph = build()
                e_graph = optimize(p_graph) if optimize is not None else p_graph
                template = Template.from_graph(e_graph, p_graph=p_graph, key=key)
            except BaseException:
                self._done(key, building)
                raise
            self._done(key, building, template)
            return template

    def _done(self, key: tuple[Hashable, Hashable], building: threading.Lock, template: Template | None = None) -> None:
        """Keep a built template (evicting the least recently used beyond the size) and drop
        the key's build lock, in one step, so a later caller finds one or the other."""
        with self._lock:
            if template is not None:
                self._templates[key] = template
                while len(self._templates) > self._size:
                    self._templates.popitem(last=False)
            if self._building.get(key) is building:
                del self._building[key]

    def __len__(self) -> int:
        return len(self._templates)

    def clear(self) -> None:
        with self._lock:
            self._templates.clear()
