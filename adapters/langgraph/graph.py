"""`accel.wrap(compiled_graph)`: the same graph, run by LangGraph's own Pregel loop, as a program.

The drop-in (`accel.adapters.common.dropin`) is a copy of the compiled graph (`graph.copy()`,
sharing nodes, channels and the checkpointer, plus the instance attributes `copy()` drops)
whose class is a subclass made for it, named as the original's class: it is still a `Pregel` /
`CompiledStateGraph` (subgraph use, `get_state`, `update_state`, `with_config`, drawing and
serialising work as stock) and only its entry points differ. Each top-level call enters a `WrappedRun` whose
`remaining_depth` reads the node running in the calling context, so the engine calls that node
functions make are captured by the floor, batch across runs and carry depth priorities.
`invoke`/`ainvoke` run inside the run (the stream their stock body opens needs no program of
its own); `stream`/`stream_events` run each step of the original iterator in a context holding
the run (a copy of the caller's, so nothing leaks into the consumer's context), and
`astream`/`astream_events` each step awaited by the consumer with the run held only while it
runs; `batch`/`abatch` are `Runnable`'s, over `invoke` / `ainvoke`, so each input is a program
of its own.

A node whose runnable is itself an LCEL composition with engine work (`add_node("generate",
prompt | llm | ...)`) is lowered by the LangChain adapter: the copy's node runs the wrapped
chain (one graph per call, the passes applied), everything else in the node is as stock.

The drop-in keeps one learned-prefill model (`Session.learner`): each run
records its engine calls by node and task (LangGraph's `langgraph_checkpoint_ns`), and prompts
seen in earlier runs are warmed as soon as the run has produced what they open with.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from accel.adapters.common.dropin import DropInState, make_dropin, state_of
from accel.adapters.common.floor import values
from accel.adapters.langchain import sync_code
from accel.adapters.langgraph.sync_nodes import pool_sync_nodes
from accel.adapters.langgraph.structure import GraphStructure, explain_structure, read_structure, task_of
from accel.options import WrapOptions
from accel.passes import learned_prefill
from accel.wrap import note_unused
from accel.scope import WrappedRun, context_with, current_run, wrapped_run


class _Accel:
    """How the drop-in runs its calls as programs (its `DropInState`'s helper, on the class:
    `Pregel.copy` passes every instance attribute to `__init__`)."""

    def __init__(self, original: Any, structure: GraphStructure, session: Any, options: WrapOptions) -> None:
        self.original = original
        self.structure = structure
        self.session = session
        self.name = original.get_name()
        self.lowered: dict[str, Any] = {}  # node name -> its LCEL runnable, lowered
        self.pooled: list[str] = []  # sync function nodes whose async side runs in accel's pool
        self.model = session.learner(self.name, options.disabled_passes)

    def new_run(self) -> WrappedRun:
        return WrappedRun(app=self.name, session=self.session,
                          remaining_depth=_depth_reader(self.structure) if self.structure.known else None)

    def record(self, run: WrappedRun, fresh: WrappedRun, input: Any) -> Callable[[], None]:
        """Start learning from `run` when it is this call's own program (not an outer app's);
        the returned function ends it."""
        if self.model is None or run is not fresh:
            return _nothing
        return self.model.start(run, _task_locator(), values.of_input(input))

    @contextlib.contextmanager
    def program(self, input: Any) -> Iterator[WrappedRun]:
        """This call's program, learned from while it runs."""
        fresh = self.new_run()
        with wrapped_run(fresh) as run:
            end = self.record(run, fresh, input)
            try:
                yield run
            finally:
                end()

    def program_context(self, input: Any) -> tuple[contextvars.Context, Callable[[], None]]:
        """A context holding this call's program (for iterators driven step by step), and the
        function that ends it."""
        fresh = self.new_run()
        context = context_with(fresh)
        return context, self.record(context.run(current_run), fresh, input)


def _nothing() -> None:
    return None


def _depth_reader(structure: GraphStructure):
    from langchain_core.runnables.config import var_child_runnable_config

    return lambda: structure.remaining_depth(var_child_runnable_config.get())


def _task_locator():
    from langchain_core.runnables.config import var_child_runnable_config

    return lambda: task_of(var_child_runnable_config.get())


def wrap_graph(graph: Any, options: WrapOptions) -> Any:
    """The accelerated drop-in for a compiled LangGraph graph (a wrapped one is returned as is)."""
    from accel.adapters.common import floor
    from accel.session import get_session

    if state_of(graph) is not None:
        return graph
    floor.install()
    sync_code.install()  # sync code of its async runs in accel's pool (idempotent; inert outside wrapped runs)
    accel = _Accel(graph, read_structure(graph), get_session(policy=options.policy), options)
    nodes, accel.lowered = lower_nodes(graph, options)
    if not accel.lowered:
        note_unused("langgraph", [name for name in options.non_default() if name != "policy"
                                  and (name != "disabled_passes" or set(options.disabled_passes) - {learned_prefill.NAME})])
    accel.pooled = pool_sync_nodes(nodes)
    update = {"nodes": nodes} if accel.lowered or accel.pooled else {}

    def copy(original: Any) -> Any:
        fast = original.copy(update)
        _carry_state(original, fast, update)
        return fast

    state = DropInState(accel.name, accel.session, lowered=sorted(accel.lowered), model=accel.model, helper=accel,
                        own_batch=True)
    return make_dropin(graph, state, namespace=_entry_points(type(graph), accel), copy=copy)


def _carry_state(graph: Any, fast: Any, update: dict[str, Any]) -> None:
    """Give `fast` the instance attributes `graph.copy()` dropped or reset: `copy()` rebuilds
    the graph through `__init__`, which drops what `compile()` set afterwards (the v2 output
    and state mappers that make results the state schema's type, the serde allowlist,
    `__orig_class__`). An attribute the copy holds an equal value of keeps the copy's own. A
    method set on the instance (a test's spy over `graph.astream`) stays the original's: the
    drop-in's entry points are reached through it, and carrying it made them call themselves."""
    for name, value in graph.__dict__.items():
        if name in update or (name in fast.__dict__ and _same(fast.__dict__[name], value)):
            continue
        if callable(value) and callable(getattr(type(graph), name, None)):
            continue
        fast.__dict__[name] = value


def _same(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # an object whose equality cannot be decided: take the original's
        return False


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
        if state_of(wrapped).helper.lowered:
            nodes[name] = node.copy({"bound": wrapped})
            lowered[name] = wrapped
    return nodes, lowered


_invoking: contextvars.ContextVar[Any] = contextvars.ContextVar("accel_graph_invoking", default=None)
"""The drop-in whose `invoke` / `ainvoke` is running its stock body in this context: that body
streams through `self.stream` / `self.astream`, which then need no program of their own."""


def _entry_points(base: type, accel: _Accel) -> dict[str, Any]:
    """The drop-in class's own attributes: `base`'s entry points run as programs."""
    def invoke(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        with accel.program(input):
            token = _invoking.set(self)
            try:
                return base.invoke(self, input, config, **kwargs)
            finally:
                _invoking.reset(token)

    async def ainvoke(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        with accel.program(input):
            token = _invoking.set(self)
            try:
                return await base.ainvoke(self, input, config, **kwargs)
            finally:
                _invoking.reset(token)

    def stream(self: Any, input: Any, config: Any = None, **kwargs: Any) -> Iterator[Any]:
        if _own_stream(self):  # `invoke`'s own stream, driven by it inside its program
            return base.stream(self, input, config, **kwargs)
        context, end = accel.program_context(input)
        return _steps_in(context, context.run(base.stream, self, input, config, **kwargs), end)

    def astream(self: Any, input: Any, config: Any = None, **kwargs: Any) -> AsyncIterator[Any]:
        if _own_stream(self):
            return base.astream(self, input, config, **kwargs)
        context, end = accel.program_context(input)
        return _asteps_in(context, context.run(base.astream, self, input, config, **kwargs), end)

    def stream_events(self: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        return _events_in(accel, base.stream_events, self, input, args, kwargs)

    def astream_events(self: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        return _events_in(accel, base.astream_events, self, input, args, kwargs)

    def explain(self: Any) -> str:
        """The graph's structure, how it runs, and what the floor captured so far."""
        from accel.adapters.common import floor

        title = f"accel.wrap({accel.name}) [LangGraph {base.__name__}]"
        learned = accel.model.explain() if accel.model is not None else ["learned prefill: off (disabled_passes)"]
        return explain_structure(title, accel.structure, floor.stats.snapshot(), accel.lowered, learned, accel.pooled)

    def __repr__(self: Any) -> str:
        return f"accel.wrap({base.__repr__(self)})"

    return {
        "invoke": invoke, "ainvoke": ainvoke, "stream": stream, "astream": astream,
        "stream_events": stream_events, "astream_events": astream_events, "explain": explain,
        "__repr__": __repr__, "original": property(lambda self: accel.original),
        "structure": property(lambda self: accel.structure),
    }


def _own_stream(graph: Any) -> bool:
    """Whether this stream call is the one `graph.invoke` / `ainvoke` makes of its own stock
    body (each makes one; a stream that body's nodes open is another call)."""
    if _invoking.get() is not graph:
        return False
    _invoking.set(None)  # reset by `invoke` when it returns
    return True


def _events_in(accel: _Accel, method: Any, graph: Any, input: Any, args: tuple, kwargs: dict) -> Any:
    """`method` (stream_events / astream_events) inside this call's program: its iterator
    driven step by step in the program's context; anything else (an error value) as is."""
    context, end = accel.program_context(input)
    events = context.run(method, graph, input, *args, **kwargs)
    if isinstance(events, AsyncIterator):
        return _asteps_in(context, events, end)
    if isinstance(events, Iterator):
        return _steps_in(context, events, end)
    end()
    return events


def _steps_in(context: contextvars.Context, items: Iterator[Any], end: Callable[[], None]) -> Iterator[Any]:
    """Iterate `items` with each step (and the close) run in `context`; `end()` once done."""
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
        end()


async def _asteps_in(context: contextvars.Context, items: AsyncIterator[Any], end: Callable[[], None]) -> AsyncIterator[Any]:
    """Async iteration of `items`, each step awaited by the consumer (its task, as stock's
    steps are) inside the program `context` holds, which is not held across yields; `end()`
    once done. (Not a task per step in `context`: that cost a task per chunk.)"""
    run = context.run(current_run)
    try:
        while True:
            with wrapped_run(run):
                try:
                    item = await anext(items)
                except StopAsyncIteration:
                    return
            yield item
    finally:
        aclose = getattr(items, "aclose", None)
        try:
            if aclose is not None:
                with wrapped_run(run):
                    await aclose()
        finally:
            end()
