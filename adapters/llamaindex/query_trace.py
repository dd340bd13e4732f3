"""The per-query trace of a lowered LlamaIndex query: the synthetic spans it has open, and the
legacy callback events they fire, found by the lowered stages through a contextvar.

`traced` opens a `QueryTrace` for one query when a handler listens; the session's task for the
query inherits it (and blocking nodes too: the runtime runs them in the query's context), so
the hooks of `events` find it (`current_trace`) and report as the nodes run. A span is opened
where the stock method would open it (`enter`, on the dispatcher of the module defining the
method, the async twin in an async query), with the callback event that method fires when a
legacy handler listens: on the component's own manager, nested under the callback event of the
nearest enclosing span that fired one (the caller's QUERY or RETRIEVE at the root). Spans still
open when the query fails are dropped, innermost first, their events ended as stock's are.
Stock code run as-is inside a node nests under the span (and callback event) it would have run
in (`under`).
"""

from __future__ import annotations

import inspect
import threading
import uuid
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import llama_index.core.instrumentation as instrument
from llama_index.core.callbacks import CBEventType
from llama_index.core.callbacks.base import global_stack_trace
from llama_index.core.instrumentation import NullEventHandler, NullSpanHandler
from llama_index.core.instrumentation.dispatcher import active_instrument_tags
from llama_index.core.instrumentation.events.span import SpanDropEvent
from llama_index.core.instrumentation.span import active_span_id
from llama_index.core.schema import QueryBundle

from . import callbacks

_ASYNC_TWINS = frozenset({"retrieve", "get_query_embedding", "synthesize", "get_response", "predict", "complete", "chat"})
_current: ContextVar[QueryTrace | None] = ContextVar("accel_llamaindex_trace", default=None)


@dataclass(frozen=True)
class Span:
    """An open synthetic span: what its exit or drop must repeat to its handlers."""

    id: str
    dispatcher: Any
    bound: inspect.BoundArguments
    instance: Any


Callback = tuple[Any, CBEventType, dict[str, Any]]
"""A legacy callback event a span's stock method fires: (its component's manager, type, start payload)."""


class QueryTrace:
    """The synthetic spans of one query: those still open (dropped if the query fails) and
    those a later hook closes, found by key (the latest kept under a key comes first).
    `callback_root`: the legacy callback event the query's events nest under (None: no
    callback handler listens, no callback event fires)."""

    def __init__(self, bundle: QueryBundle, asynchronous: bool, root: str | None, *, retrieval: bool = True,
                 callback_root: str | None = None) -> None:
        self.bundle = bundle
        self.asynchronous = asynchronous
        self.root = root
        self.retrieval = retrieval  # False: the retriever's own `retrieve` reports itself (a lowered retriever)
        self.callback_root = callback_root
        self._open: dict[str, Span] = {}
        self._keyed: dict[Hashable, list[Any]] = {}
        self._nest: dict[str | None, str] = {}  # span id -> the callback event what runs inside it nests under
        self._fired: dict[str, tuple[Any, CBEventType, str, str]] = {}  # span id -> its callback event (and its parent)
        self._lock = threading.Lock()

    def enter(self, instance: Any, method: str, args: tuple[Any, ...], parent: str | None,
              kwargs: dict[str, Any] | None = None, callback: Callback | None = None) -> Span:
        """Open the span `instance.method(*args, **kwargs)` would open (its async twin in
        an async query), and the callback event that method starts, if any."""
        if self.asynchronous and method in _ASYNC_TWINS:
            method = f"a{method}"
        fn = getattr(instance, method)
        dispatcher = instrument.get_dispatcher(fn.__module__)
        span = Span(f"{type(instance).__name__}.{method}-{uuid.uuid4()}", dispatcher,
                    inspect.signature(fn).bind(*args, **(kwargs or {})), instance)
        self.open_span(span, parent)
        if callback is not None and self.callback_root is not None:
            manager, event_type, payload = callback
            parent_event = self.nesting(span.id)
            event_id = callbacks.event_started(manager, event_type, payload, parent_event)
            with self._lock:
                self._nest[span.id] = event_id
                self._fired[span.id] = (manager, event_type, event_id, parent_event)
        return span

    def open_span(self, span: Span, parent: str | None) -> None:
        span.dispatcher.span_enter(id_=span.id, bound_args=span.bound, instance=span.instance, parent_id=parent,
                                   tags=active_instrument_tags.get())
        with self._lock:
            self._open[span.id] = span
            if self.callback_root is not None:
                self._nest[span.id] = self._nest.get(parent, self.callback_root)

    def nesting(self, span_id: str | None) -> str:
        """The callback event stock code running inside span `span_id` nests under."""
        with self._lock:
            return self._nest.get(span_id, self.callback_root or "root")

    def leaf(self, span: Span, callback: Callback) -> None:
        """A callback event that starts and ends at once inside `span` (`predict`'s TEMPLATING)."""
        if self.callback_root is not None:
            manager, event_type, payload = callback
            event_id = callbacks.event_started(manager, event_type, payload, self.nesting(span.id))
            callbacks.event_ended(manager, event_type, None, event_id)

    def exit(self, span: Span, result: Any, ended: dict[str, Any] | None = None) -> None:
        """Close the span with `result`, and its callback event with payload `ended`."""
        with self._lock:
            if self._open.pop(span.id, None) is None:
                return
            fired = self._fired.pop(span.id, None)
        span.dispatcher.span_exit(id_=span.id, bound_args=span.bound, instance=span.instance, result=result)
        if fired is not None:
            manager, event_type, event_id, _ = fired
            callbacks.event_ended(manager, event_type, ended, event_id)

    def drop(self, span: Span, err: BaseException | None) -> None:
        with self._lock:
            if self._open.pop(span.id, None) is None:
                return
            fired = self._fired.pop(span.id, None)
        if err is not None:
            span.dispatcher.event(SpanDropEvent(span_id=span.id, err_str=str(err)))
        span.dispatcher.span_drop(id_=span.id, bound_args=span.bound, instance=span.instance, err=err)
        if fired is not None:
            callbacks.event_failed(*fired, err)

    def parent(self, *keys: Hashable) -> str | None:
        """The id of the latest span kept under the first of `keys` holding one, else the
        query's root span."""
        for key in keys:
            span = self.peek(key)
            if span is not None:
                return span.id
        return self.root

    def event(self, span: Span, event: type, **fields: Any) -> None:
        span.dispatcher.event(event(span_id=span.id, **fields))

    def keep(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._keyed.setdefault(key, []).append(value)

    def peek(self, key: Hashable) -> Any:
        with self._lock:
            found = self._keyed.get(key)
            return found[-1] if found else None

    def take(self, key: Hashable) -> Any:
        with self._lock:
            found = self._keyed.get(key)
            return found.pop() if found else None

    def close(self, err: BaseException | None) -> None:
        """Drop what is still open, innermost first (a failed or abandoned query)."""
        with self._lock:
            spans = list(self._open.values())
            self._keyed.clear()
        for span in reversed(spans):
            self.drop(span, err)


def counted() -> bool:
    """Whether a legacy callback handler listens to the current query (token counters read
    every LLM call's text and usage)."""
    trace = _current.get()
    return trace is not None and trace.callback_root is not None


def listening() -> bool:
    """Whether any dispatcher has a handler that is not a null one."""
    return any(not isinstance(h, (NullEventHandler, NullSpanHandler))
               for d in instrument.root_manager.dispatchers.values() for h in (*d.event_handlers, *d.span_handlers))


@contextmanager
def traced(bundle: QueryBundle, *, asynchronous: bool, retrieval: bool = True, reported: bool = False) -> Iterator[None]:
    """Trace the query run inside, under the caller's active span (the engine's `_query`).
    `retrieval=False`: the top-level retriever's span and events are stock code's own.
    `reported`: a legacy callback handler listens; its events nest under the caller's
    current one (the engine's QUERY, the retriever's RETRIEVE)."""
    if not reported and not listening():
        yield
        return
    trace = QueryTrace(bundle, asynchronous, active_span_id.get(), retrieval=retrieval,
                       callback_root=callbacks.current_event() if reported else None)
    token = _current.set(trace)
    try:
        yield
    except BaseException as err:
        trace.close(err)
        raise
    finally:
        _current.reset(token)
    trace.close(None)


@contextmanager
def under(key: Hashable) -> Iterator[None]:
    """Stock code run as-is nests under the synthetic span `key` (e.g. an opaque embedding
    inside a lowered retriever), and its callback events under that span's."""
    trace = _current.get()
    span = trace.peek(key) if trace is not None else None
    if span is None:
        yield
        return
    token = active_span_id.set(span.id)
    stack = global_stack_trace.set([*global_stack_trace.get(), trace.nesting(span.id)]) if trace.callback_root else None
    try:
        yield
    finally:
        if stack is not None:
            global_stack_trace.reset(stack)
        active_span_id.reset(token)


def current_trace() -> QueryTrace | None:
    """The trace of the query running here (None: no handler listens, or no lowered query)."""
    return _current.get()
