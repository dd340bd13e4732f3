"""`Graph`: a thin typed wrapper over `networkx.DiGraph` holding one `Node` per vertex.

Edges are either data edges (one per input port, implied by `Node.inputs`) or order edges
(`data=False`) that carry no value: they come from the template's module order, or make a node
wait for a side effect (a prefix-cache warm-up). Dependency pruning removes the order edges
that are not needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import networkx as nx

from accel.ir.errors import CycleError, GraphError
from accel.ir.kinds import Kind
from accel.ir.node import Node, Ref, Role


class Graph:
    """A primitive dataflow graph. `meta["passes"]` lists the passes applied and
    `meta["notes"]` what each did (for `explain()` and pictures)."""

    def __init__(self) -> None:
        self._g = nx.DiGraph()
        self.meta: dict[str, Any] = {"passes": [], "notes": []}

    # ---- construction ------------------------------------------------------------------

    def add(self, node: Node) -> Node:
        """Add `node` and a data edge for every input port whose source already exists
        (edges to sources added later are completed when those are added)."""
        if node.name in self._g:
            raise GraphError(node.name, "a node with this name already exists", "give every node a unique name")
        self._g.add_node(node.name, node=node)
        for ref in node.inputs.values():
            if ref.node in self._g:
                self._mark_data(ref.node, node.name)
        for other in list(self._g.nodes):
            if other != node.name and any(r.node == node.name for r in self.node(other).inputs.values()):
                self._mark_data(node.name, other)
        return node

    def _mark_data(self, src: str, dst: str) -> None:
        self._g.add_edge(src, dst, data=True)

    def add_edge(self, src: str, dst: str, *, data: bool = False, pinned: bool = False) -> None:
        """Add an edge. A data edge requires `dst` to read `src` through one of its ports.
        A `pinned` order edge is a deliberate dependency (a warm-up before the request that
        uses it) that dependency pruning keeps."""
        for name in (src, dst):
            if name not in self._g:
                raise GraphError(name, "edge endpoint is not in the graph", "add the node before its edges")
        if data and not any(r.node == src for r in self.node(dst).inputs.values()):
            raise GraphError(dst, f"data edge from {src!r} but no input port reads it", "bind a port with Ref")
        if self._g.has_edge(src, dst):
            self._g.edges[src, dst]["data"] |= data
            self._g.edges[src, dst]["pinned"] = self._g.edges[src, dst].get("pinned", False) or pinned
        else:
            self._g.add_edge(src, dst, data=data, pinned=pinned)

    def remove_edge(self, src: str, dst: str) -> None:
        """Remove an order edge; data edges follow `Node.inputs` and cannot be removed here."""
        if self.is_data_edge(src, dst):
            raise GraphError(dst, f"edge from {src!r} carries data", "rebind the input port instead")
        self._g.remove_edge(src, dst)

    def replace(self, node: Node) -> Node:
        """Swap in a new version of an existing node (same name), keeping order edges and
        re-deriving data edges from its inputs."""
        name = node.name
        if name not in self._g:
            raise GraphError(name, "cannot replace a node that is not in the graph", "add it first")
        for src in list(self._g.predecessors(name)):
            if self.is_data_edge(src, name):
                self._g.remove_edge(src, name)
        self._g.nodes[name]["node"] = node
        for ref in node.inputs.values():
            if ref.node in self._g:
                self.add_edge(ref.node, name, data=True)
        return node

    def remove(self, name: str) -> None:
        """Remove a node that no other node reads."""
        readers = [s for s in self._g.successors(name) if self.is_data_edge(name, s)]
        if readers:
            raise GraphError(name, f"still read by {readers}", "rebind the readers first")
        self._g.remove_node(name)

    # ---- queries -----------------------------------------------------------------------

    def node(self, name: str) -> Node:
        try:
            return self._g.nodes[name]["node"]
        except KeyError:
            raise GraphError(name, "no such node", "check the node name") from None

    def __contains__(self, name: object) -> bool:
        return name in self._g

    def __len__(self) -> int:
        return self._g.number_of_nodes()

    def nodes(self) -> list[Node]:
        return [self._g.nodes[n]["node"] for n in self._g.nodes]

    def edges(self) -> Iterator[tuple[str, str, bool]]:
        """All edges as (src, dst, is_data)."""
        for src, dst, data in self._g.edges(data="data"):
            yield src, dst, bool(data)

    def derived(self, origin: str, role: Role) -> list[Node]:
        """The nodes a pass made from `origin` in `role` (micro-batches in index order)."""
        found = [n for n in self.nodes() if n.derived is not None and n.derived.origin == origin and n.derived.role is role]
        return sorted(found, key=lambda n: n.derived.index or 0)

    def is_pinned(self, src: str, dst: str) -> bool:
        return bool(self._g.edges[src, dst].get("pinned")) if self._g.has_edge(src, dst) else False

    def is_data_edge(self, src: str, dst: str) -> bool:
        return bool(self._g.edges[src, dst].get("data")) if self._g.has_edge(src, dst) else False

    def preds(self, name: str) -> list[str]:
        return list(self._g.predecessors(name))

    def succs(self, name: str) -> list[str]:
        return list(self._g.successors(name))

    def readers(self, name: str) -> list[tuple[str, str]]:
        """(consumer, port) pairs whose port is bound to `name`'s output."""
        return [
            (succ, port)
            for succ in self._g.successors(name)
            for port, ref in self.node(succ).inputs.items()
            if ref.node == name
        ]

    @property
    def inputs(self) -> list[str]:
        """Names of the Input nodes, in insertion order."""
        return [n.name for n in self.nodes() if n.kind is Kind.INPUT]

    @property
    def output(self) -> Node:
        """The single Output node."""
        outs = [n for n in self.nodes() if n.kind is Kind.OUTPUT]
        if len(outs) != 1:
            raise GraphError(None, f"expected exactly one Output node, found {len(outs)}", "call output() once")
        return outs[0]

    @property
    def nx(self) -> nx.DiGraph:
        """The underlying DiGraph (read-only use: layouts, analyses)."""
        return self._g

    def topo_order(self) -> list[str]:
        """Node names in a deterministic topological order (ties broken by insertion order)."""
        position = {name: i for i, name in enumerate(self._g.nodes)}
        try:
            return list(nx.lexicographical_topological_sort(self._g, key=position.__getitem__))
        except nx.NetworkXUnfeasible:
            cycle = nx.find_cycle(self._g)
            raise CycleError(cycle[0][0], f"dependency cycle {cycle}", "remove an edge of the cycle") from None

    def compute_depths(self) -> dict[str, int]:
        """Set `Node.depth` = longest path length (edges) to the Output node; Output is 0, and
        siblings at the same distance share a depth so a scheduler can batch them. Nodes that
        cannot reach Output (side branches) get the depth of their deepest successor + 1, or 0."""
        depths: dict[str, int] = {}
        for name in reversed(self.topo_order()):
            succ_depths = [depths[s] + 1 for s in self._g.successors(name)]
            depths[name] = max(succ_depths, default=0)
            self.node(name).depth = depths[name]
        return depths

    def validate(self) -> Graph:
        """Check: exactly one Output, every ref resolves, data edges match ports, acyclic,
        engine-bound nodes name an engine. Returns self so calls chain."""
        out = self.output
        for node in self.nodes():
            for port, ref in node.inputs.items():
                if ref.node not in self._g:
                    raise GraphError(node.name, f"port {port!r} reads unknown node {ref.node!r}", "bind it to an existing node")
                if not self.is_data_edge(ref.node, node.name):
                    raise GraphError(node.name, f"port {port!r} has no data edge from {ref.node!r}", "add nodes through Graph.add")
            if node.is_engine and not node.engine:
                raise GraphError(node.name, f"{node.kind} node has no engine", "set Node.engine to a logical engine name")
            if node.kind is Kind.INPUT and node.inputs:
                raise GraphError(node.name, "an Input node cannot read other nodes", "drop its inputs")
            if node.map_port is not None and node.map_port not in node.inputs:
                raise GraphError(node.name, f"map_port {node.map_port!r} is not an input port", "map an existing port")
        if self._g.out_degree(out.name):
            raise GraphError(out.name, "the Output node has successors", "make Output the sink")
        self.topo_order()
        return self

    def copy(self) -> Graph:
        """A copy whose nodes can be replaced or mutated without touching this graph
        (node objects are copied; ops are shared, they are stateless)."""
        new = Graph()
        for name in self._g.nodes:
            new._g.add_node(name, node=self.node(name).replace())
        for src, dst, attrs in self._g.edges(data=True):
            new._g.add_edge(src, dst, **attrs)
        new.meta = {k: list(v) if isinstance(v, list) else v for k, v in self.meta.items()}
        return new

    def note(self, pass_name: str, text: str) -> None:
        """Record what a pass changed."""
        self.meta["notes"].append(f"{pass_name}: {text}")

    def __repr__(self) -> str:
        return f"Graph({len(self)} nodes, passes={self.meta['passes']})"


def ref(node: Node | str, key: str | int | None = None) -> Ref:
    """Shorthand for `Ref(node.name, key)`."""
    return Ref(node if isinstance(node, str) else node.name, key)
