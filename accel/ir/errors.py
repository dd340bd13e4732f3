"""Typed graph errors: each names the node (or graph), the cause and a remedy."""

from __future__ import annotations


class GraphError(ValueError):
    """A graph that cannot be built, optimised or run as given.

    `str(err)` reads: "graph node '<node>': <cause>. Remedy: <remedy>".
    """

    def __init__(self, node: str | None, cause: str, remedy: str = "fix the graph construction") -> None:
        self.node = node
        self.cause = cause
        self.remedy = remedy
        where = f"graph node {node!r}" if node is not None else "graph"
        super().__init__(f"{where}: {cause}. Remedy: {remedy}")

    def __reduce__(self):
        return (type(self), (self.node, self.cause, self.remedy))


class CycleError(GraphError):
    """The graph has a dependency cycle."""


class MissingInput(GraphError):
    """A query did not bind one of the template's Input nodes."""


class PassError(GraphError):
    """An optimisation pass is unknown, misregistered or produced an invalid graph."""
