"""A compiled LangGraph graph's structure, read from its builder: nodes, edges (fan-in waits
included), conditional edges with their possible targets, `Send` fan-out and `Command` gotos.

The structure gives each node its remaining depth: the longest path, in nodes, from it to END
(back edges of loops left out, so a cycle does not make it infinite). A run's LLM requests
carry the remaining depth of the node that makes them (`accel.runtime.programs.priority`):
runs close to the end go first. Which node is running is read from LangGraph's own config
metadata (`langgraph_node`, `langgraph_checkpoint_ns`), which it sets for every task and which
every LangChain call made inside the node inherits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

START = "__start__"
END = "__end__"


@dataclass(frozen=True)
class Branch:
    """A conditional edge: `start` runs `path` and goes to one or more of `targets`
    (None: any node, the path's result is not declared); `sends` when it may fan out `Send`s."""

    start: str
    name: str
    targets: tuple[str, ...] | None


@dataclass
class GraphStructure:
    nodes: dict[str, str] = field(default_factory=dict)  # name -> what runs there
    edges: list[tuple[str, str]] = field(default_factory=list)
    branches: list[Branch] = field(default_factory=list)
    gotos: dict[str, tuple[str, ...]] = field(default_factory=dict)  # Command(goto=...) destinations
    depth: dict[str, int] = field(default_factory=dict)
    known: bool = True

    def successors(self, node: str) -> set[str]:
        out = {end for start, end in self.edges if start == node}
        for branch in self.branches:
            if branch.start == node:
                out |= set(branch.targets) if branch.targets is not None else {*self.nodes, END}
        out |= set(self.gotos.get(node, ()))
        return out

    def remaining_depth(self, config: dict[str, Any] | None) -> int | None:
        """The remaining depth of the node a LangGraph task config belongs to (its outermost
        node, for code inside a subgraph), or None outside any node of this graph."""
        metadata = (config or {}).get("metadata") or {}
        namespace = metadata.get("langgraph_checkpoint_ns") or ""
        outer = namespace.split("|", 1)[0].split(":", 1)[0] if namespace else metadata.get("langgraph_node")
        return self.depth.get(outer) if outer else None


def task_of(config: dict[str, Any] | None) -> tuple[str, str] | None:
    """(node, task) of a LangGraph task config: the node's path through subgraphs and the
    task's own checkpoint namespace (unique per task, so two visits of a node differ)."""
    metadata = (config or {}).get("metadata") or {}
    namespace = metadata.get("langgraph_checkpoint_ns") or ""
    if not namespace:
        return None
    return "|".join(part.split(":", 1)[0] for part in namespace.split("|")), namespace


def read_structure(graph: Any) -> GraphStructure:
    """The structure of a compiled graph; a Pregel without a builder (functional API) has
    only its node names (`known=False`: no depths, priorities fall back to PLAS)."""
    builder = getattr(graph, "builder", None)
    if builder is None or not hasattr(builder, "nodes"):
        names = [n for n in getattr(graph, "nodes", {}) if n != START]
        return GraphStructure(nodes={n: "node" for n in names}, known=False)
    structure = GraphStructure()
    for name, spec in builder.nodes.items():
        structure.nodes[name] = _label(spec.runnable)
        ends = getattr(spec, "ends", None)
        if ends:
            structure.gotos[name] = tuple(ends.values() if isinstance(ends, dict) else ends)
    edges = getattr(builder, "_all_edges", None) or builder.edges
    structure.edges = sorted(edges)
    for start, branches in builder.branches.items():
        for name, spec in branches.items():
            targets = tuple(spec.ends.values()) if spec.ends else None
            structure.branches.append(Branch(start, name, targets))
    structure.depth = _depths(structure)
    return structure


def _depths(structure: GraphStructure) -> dict[str, int]:
    """Longest path to END per node, counting nodes, on the graph without its back edges."""
    order: list[str] = []
    state: dict[str, int] = {}  # 1 on the DFS stack, 2 done
    back: set[tuple[str, str]] = set()

    def visit(node: str) -> None:
        state[node] = 1
        for succ in sorted(structure.successors(node)):
            if state.get(succ) == 1:
                back.add((node, succ))
            elif succ not in state:
                visit(succ)
        state[node] = 2
        order.append(node)

    for root in [START, *structure.nodes]:
        if root not in state:
            visit(root)
    depth: dict[str, int] = {END: 0}
    for node in order:  # post-order: successors first
        if node == END:
            continue
        succs = [s for s in structure.successors(node) if (node, s) not in back]
        depth[node] = (0 if node == START else 1) + max((depth.get(s, 0) for s in succs), default=0)
    return {n: d for n, d in depth.items() if n in structure.nodes}


def _label(runnable: Any) -> str:
    func = getattr(runnable, "func", None) or getattr(runnable, "afunc", None)
    if func is not None:
        return f"function {getattr(func, '__qualname__', getattr(func, '__name__', repr(func)))}"
    return type(runnable).__name__


def explain_structure(title: str, structure: GraphStructure, floor_counts: dict[str, Any],
                      lowered: dict[str, Any] | None = None, learned: list[str] | None = None,
                      pooled: list[str] | None = None) -> str:
    """`lowered`: node name -> its LCEL chain wrapped by the LangChain adapter (its explain());
    `learned`: what learned prefill knows of the nodes' LLM calls; `pooled`: the sync function
    nodes whose async side the drop-in rebound to accel's `run_in_executor` (`sync_nodes`)."""
    lowered = lowered or {}
    lines = [title, "", "execution: LangGraph's own Pregel loop (checkpointers, interrupts, stream modes as stock)",
             "", f"nodes ({len(structure.nodes)}):"]
    for name, what in structure.nodes.items():
        depth = structure.depth.get(name)
        how = "  [lowered: runs as one accel graph]" if name in lowered else ""
        lines.append(f"  {name}: {what}" + (f"  [remaining depth {depth}]" if depth is not None else "") + how)
    lines.append("edges:")
    lines += [f"  {start} -> {end}" for start, end in structure.edges]
    for branch in structure.branches:
        targets = ", ".join(branch.targets) if branch.targets is not None else "any node (undeclared)"
        lines.append(f"  {branch.start} -?-> {targets}  (conditional: {branch.name}; may fan out with Send)")
    for node, ends in structure.gotos.items():
        lines.append(f"  {node} -goto-> {', '.join(ends)}  (Command)")
    lines += ["", "engine calls inside nodes: captured (accel.adapters.common.floor); LLM priority = "
              + ("remaining depth of the calling node" if structure.known else "least attained service (PLAS)")]
    if floor_counts.get("routed"):
        lines.append("  routed so far: " + ", ".join(f"{k} {v}" for k, v in sorted(floor_counts["routed"].items())))
    for (component, reason), n in sorted(floor_counts.get("stock", {}).items()):
        lines.append(f"  stock: {component}: {reason} ({n}x)")
    for (component, error), n in sorted(floor_counts.get("fallback", {}).items()):
        lines.append(f"  fallback: {component} after {error} ({n}x)")
    lines.append("sync code of async runs (function nodes, tools, retrievers without async code): accel's worker "
                 "pool, not the loop's default executor (unless the user set one)"
                 + (f"; function nodes rebound to it: {', '.join(pooled)}" if pooled else ""))
    if learned:
        lines += ["", *learned]
    for name, chain in lowered.items():
        lines += ["", f"node {name!r}, lowered:", *("  " + line for line in chain.explain().splitlines())]
    return "\n".join(lines)
