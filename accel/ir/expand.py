"""Dynamic sub-graphs: an Expand node runs one of several sub-templates, picked from values
known only at run time, inside the same query run.

A query stays one graph run even when its shape is decided while it runs (a `RunnableBranch`'s
taken branch, a refine loop over a variable number of chunks, a LangGraph super-step): the
Expand node's op picks a sub-template (each built and optimised by the passes ahead of time)
and the inputs to bind, and the graph scheduler runs it as part of the query (same query id,
engine schedulers, trace and cancellation; its depths continue below the Expand node's).
An `ExpandEachOp` runs one sub-template once per item of a list known only at run time (a
`.map()` over the chunks a retriever returned), the runs side by side (at most its
`max_concurrency(values)` at once where it has that method and it says so), and its value is
the list of their outputs in item order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from accel.ir.graph import Graph
from accel.ir.kinds import Kind
from accel.ir.node import Node
from accel.ir.template import Template


@runtime_checkable
class ExpandOp(Protocol):
    templates: tuple[Template, ...]
    """Every sub-template the op may pick (their engines are made ready before the query)."""

    async def expand(self, values: dict[str, Any]) -> tuple[Template, dict[str, Any]]:
        """The sub-template to run for these input values, and its input bindings."""


@dataclass(frozen=True)
class Expansion:
    """One sub-run of an `ExpandEachOp`."""

    template: Template
    inputs: dict[str, Any]
    watcher: Any = None
    """The `QueryWatcher` of this sub-run's values (None: the query's own)."""
    on_end: Callable[[BaseException | None], None] | None = None
    """Told how the sub-run ended (None: it answered), before the Expand node finishes."""


@runtime_checkable
class ExpandEachOp(Protocol):
    templates: tuple[Template, ...]

    async def expand_each(self, values: dict[str, Any]) -> list[Expansion]:
        """The sub-runs to run side by side for these input values, in output order."""


def max_concurrency(op: ExpandEachOp, values: dict[str, Any]) -> int | None:
    """How many of `op`'s sub-runs may run at once for these values (None: all). An op that
    mirrors a framework's batch says so through an optional `max_concurrency(values)` method:
    a user's cap (LangChain's `max_concurrency` config) binds the accelerated app as it binds
    the stock one."""
    limit = getattr(op, "max_concurrency", None)
    found = limit(values) if callable(limit) else None
    return max(1, int(found)) if found else None


def sub_templates(nodes: Iterable[Node]) -> list[Template]:
    expanding = (ExpandOp, ExpandEachOp)
    return [t for node in nodes if node.kind is Kind.EXPAND and isinstance(node.op, expanding) for t in node.op.templates]


def engines_of(nodes: Iterable[Node]) -> set[str]:
    """The engines `nodes` use, those of their Expand nodes' sub-templates included."""
    nodes = list(nodes)
    found = {node.engine for node in nodes if node.is_engine and node.engine}
    for template in sub_templates(nodes):
        found |= engines_of(template.nodes)
    return found


def has_engine_work(graph: Graph) -> bool:
    """Whether running `graph` may send work to an engine (directly or in a sub-template)."""
    return bool(engines_of(graph.nodes()))
