"""`accel.wrap(compiled_graph)`: the same graph, run by LangGraph's own Pregel loop, as a program.

The drop-in is a copy of the compiled graph (`graph.copy()`, sharing nodes, channels and the
checkpointer) whose class is a subclass made for it: it is still a `Pregel` /
`CompiledStateGraph` (subgraph use, `get_state`, `update_state`, `with_config` work as stock)
and only its entry points differ. Each top-level call enters a `WrappedRun` whose
`remaining_depth` reads the node running in the calling context, so the engine calls that node
functions make are captured by the floor, batch across runs and carry depth priorities.
`invoke`/`ainvoke` run inside the run; `stream`/`astream`/`stream_events`/`astream_events` run
each step of the original iterator in a context holding the run (a copy of the caller's, so
nothing leaks into the consumer's context); `batch`/`abatch` are `Runnable`'s, over `invoke` /
`ainvoke`, so each input is a program of its own.

A node whose runnable is itself an LCEL composition with engine work (`add_node("generate",
prompt | llm | ...)`) is lowered by the LangChain adapter: the copy's node runs the wrapped
chain (one graph per call, the passes applied), everything else in the node is as stock.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Iterator
from typing import Any

from accel.adapters.langgraph.structure import GraphStructure, explain_structure, read_structure
from accel.options import WrapOptions
from accel.wrap import note_unused
from accel.scope import WrappedRun, context_with, wrapped_run


class _Accel:
    """What the drop-in class carries (class attributes: `Pregel.copy` passes every instance
    attribute to `__init__`)."""

    def __init__(self, original: Any, structure: GraphStructure, session: Any) -> None:
        self.original = original
        self.structure = structure
        self.session = session
        self.name = original.get_name()
        self.lowered: dict[str, Any] = {}  # node name -> its LCEL runnable, lowered

    def new_run(self) -> WrappedRun:
        return WrappedRun(app=self.name, session=self.session,
                          remaining_depth=_depth_reader(self.structure) if self.structure.known else None)


def _depth_reader(structure: GraphStructure):
    from langchain_core.runnables.config import var_child_runnable_config

    return lambda: structure.remaining_depth(var_child_runnable_config.get())


def wrap_graph(graph: Any, options: WrapOptions) -> Any:
    """The accelerated drop-in for a compiled LangGraph graph (a wrapped one is returned as is)."""
    from accel.adapters.common import floor
    from accel.session import get_session

    if getattr(type(graph), "_accel", None) is not None:
        return graph
    floor.install()
    accel = _Accel(graph, read_structure(graph), get_session(policy=options.policy))
    nodes, accel.lowered = lower_nodes(graph, options)
    if not accel.lowered:
        note_unused("langgraph", [name for name in options.non_default() if name != "policy"])
    fast = graph.copy({"nodes": nodes} if accel.lowered else None)
    fast.__class__ = _accelerated_class(type(graph), accel)
    return fast


def lower_nodes(graph: Any, options: WrapOptions) -> tuple[dict[str, Any], dict[str, Any]]:
    """The graph's nodes, those whose runnable is an LCEL composition with engine work
    replaced by a copy running it lowered (`accel.wrap` of it, with the graph's options); and
    those lowered chains by node name."""
    from langchain_core.runnables import Runnable

    from accel.adapters.langchain import wrap_runnable

    nodes, lowered = dict(graph.nodes), {}
    for name, node in graph.nodes.items():
        bound = getattr(node, "bound", None)
        if not isinstance(bound, Runnable) or not type(bound).__module__.startswith("langchain"):
            continue  # functions (RunnableCallable), subgraphs, LangGraph's own nodes
        wrapped = wrap_runnable(bound, options)
        if wrapped.lowered:
            nodes[name] = node.copy({"bound": wrapped})
            lowered[name] = wrapped
    return nodes, lowered


def _accelerated_class(base: type, accel: _Accel) -> type:
    def invoke(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        with wrapped_run(accel.new_run()):
            return base.invoke(self, input, config, **kwargs)

    async def ainvoke(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        with wrapped_run(accel.new_run()):
            return await base.ainvoke(self, input, config, **kwargs)

    def stream(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Iterator[Any]:
        context = context_with(accel.new_run())
        return _steps_in(context, context.run(base.stream, self, input, config, **kwargs))

    def astream(self: Any, input: Any, config: Any = None, **kwargs: Any) -> AsyncIterator[Any]:
        context = context_with(accel.new_run())
        return _asteps_in(context, context.run(base.astream, self, input, config, **kwargs))

    def stream_events(self: Any, *args: Any, **kwargs: Any) -> Any:
        context = context_with(accel.new_run())
        events = context.run(base.stream_events, self, *args, **kwargs)
        return _steps_in(context, events) if isinstance(events, Iterator) else events

    def astream_events(self: Any, *args: Any, **kwargs: Any) -> Any:
        context = context_with(accel.new_run())
        events = context.run(base.astream_events, self, *args, **kwargs)
        return _asteps_in(context, events) if isinstance(events, AsyncIterator) else events

    def explain(self: Any) -> str:
        """The graph's structure, how it runs, and what the floor captured so far."""
        from accel.adapters.common import floor

        title = f"accel.wrap({accel.name}) [LangGraph {base.__name__}]"
        return explain_structure(title, accel.structure, floor.stats.snapshot(), accel.lowered)

    def __repr__(self: Any) -> str:
        return f"accel.wrap({base.__repr__(self)})"

    namespace = {
        "_accel": accel, "invoke": invoke, "ainvoke": ainvoke, "stream": stream, "astream": astream,
        "stream_events": stream_events, "astream_events": astream_events, "explain": explain,
        "__repr__": __repr__, "original": property(lambda self: accel.original),
        "structure": property(lambda self: accel.structure), "__module__": __name__,
    }
    return type(f"Accelerated{base.__name__}", (base,), namespace)


def _steps_in(context: contextvars.Context, items: Iterator[Any]) -> Iterator[Any]:
    """Iterate `items` with each step (and the close) run in `context`."""
    try:
        while True:
            try:
                item = context.run(next, items)
            except StopIteration:
                return
            yield item
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            context.run(close)


async def _asteps_in(context: contextvars.Context, items: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """Async iteration of `items`, each step a task in `context` (cancelling the consumer
    cancels the step, as it would the stock iterator's await)."""
    loop = asyncio.get_running_loop()

    async def step() -> Any:
        return await anext(items)

    try:
        while True:
            try:
                item = await loop.create_task(step(), context=context)
            except StopAsyncIteration:
                return
            yield item
    finally:
        aclose = getattr(items, "aclose", None)
        if aclose is not None:
            await loop.create_task(aclose(), context=context)
