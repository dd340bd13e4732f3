"""LlamaIndex's legacy callbacks: whether a `CallbackManager` handler listens to a lowered app,
and the events it hears from the lowered stages.

Each LlamaIndex component reports to its own `callback_manager` from inside its stock methods:
EMBEDDING from `get_query_embedding`, LLM from `complete` / `chat` (`llm_completion_callback`),
TEMPLATING from `predict`, RETRIEVE, SYNTHESIZE, RERANKING, QUERY. Handlers read those events:
the docs' token counting (`TokenCountingHandler` on `Settings.callback_manager`),
`LlamaDebugHandler`, tracing integrations built on callbacks. A lowered stage does its engine
work without those methods, so the lowered query fires them itself where the stock method
would (`query_trace.QueryTrace`, which opens the instrumentation spans at the same points): on the
component's own manager, with stock's payloads, nested under the event stock nests them in.
Each event starts and ends in a copy of the caller's context, so the managers' context stack
(`global_stack_trace`) of the query's own code is never touched by stages running elsewhere.
A streamed response's LLM events fire while its tokens are read, after the query returned:
there the stock code answers, its engine calls captured. Both are counted, per call (handlers
are added after wrapping, too), and `explain()` says so.
"""

from __future__ import annotations

import contextvars
import logging
from collections import Counter
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("accel.adapters.llamaindex.callbacks")

stock_calls: Counter[str] = Counter()
"""Calls of lowered LlamaIndex components answered by stock code because a legacy callback
handler listened to a streamed response, per component class (process-wide)."""

reported_calls: Counter[str] = Counter()
"""Lowered calls whose stages fired stock's callback events to a listening handler, per
component class (process-wide)."""

_DEPTH = 4
_MAX_ITEMS = 64  # a list longer than this holds data (nodes), not components


def components(*roots: Any) -> list[Any]:
    """The LlamaIndex components reachable from `roots` through their attributes (a retriever's
    embedding model, a synthesizer's LLM, a fusion retriever's sub-retrievers ...): every object
    with a `callback_manager`, found a few links deep, each once."""
    found: dict[int, Any] = {}

    def visit(value: Any, depth: int) -> None:
        if isinstance(value, (list, tuple)):
            if len(value) <= _MAX_ITEMS:
                for item in value:
                    visit(item, depth)
            return
        if id(value) in found or not _has_manager(value):
            return
        found[id(value)] = value
        if depth < _DEPTH:
            for attribute in _attributes(value):
                visit(attribute, depth + 1)

    for root in roots:
        visit(root, 0)
    return list(found.values())


def _has_manager(value: Any) -> bool:
    from llama_index.core.callbacks import CallbackManager

    if isinstance(value, (str, bytes, int, float, CallbackManager)) or value is None:
        return False
    try:
        return isinstance(getattr(value, "callback_manager", None), CallbackManager)
    except Exception:  # a property that needs state the component lacks
        return False


def _attributes(value: Any) -> Iterable[Any]:
    yield from getattr(value, "__dict__", {}).values()
    yield from (getattr(value, "__pydantic_private__", None) or {}).values()


def listeners(parts: Iterable[Any]) -> list[str]:
    """The handler classes listening on the parts' callback managers, by name (none: [])."""
    names: set[str] = set()
    for part in parts:
        manager = getattr(part, "callback_manager", None)
        names.update(type(handler).__name__ for handler in getattr(manager, "handlers", ()) or ())
    return sorted(names)


def stock_answers(component: str, handlers: list[str]) -> bool:
    """Whether `handlers` (listening on a call of `component`) need the stock code; each such
    call is counted (and logged the first time per component)."""
    if not handlers:
        return False
    if not stock_calls[component]:
        log.info("accel.wrap(%s): a LlamaIndex callback handler listens to a streamed response (%s); its calls run the "
                 "stock code with their engine calls captured, so the handler sees stock's events as the tokens are read",
                 component, ", ".join(handlers))
    stock_calls[component] += 1
    return True


def reports_to(component: str, handlers: list[str]) -> bool:
    """Whether the lowered stages of a call of `component` fire callback events (some handler
    listens); each such call is counted."""
    if handlers:
        reported_calls[component] += 1
    return bool(handlers)


def event_started(manager: Any, event_type: Any, payload: dict[str, Any] | None, parent: str) -> str:
    """`manager.on_event_start` as the stock method calls it, nested under event `parent`."""
    return contextvars.copy_context().run(manager.on_event_start, event_type, payload, parent_id=parent)


def event_ended(manager: Any, event_type: Any, payload: dict[str, Any] | None, event_id: str) -> None:
    contextvars.copy_context().run(manager.on_event_end, event_type, payload, event_id=event_id)


def event_failed(manager: Any, event_type: Any, event_id: str, parent: str, err: BaseException | None) -> None:
    """End an event whose stock method raised `err`, as stock does: the LLM callback wrapper
    reports the exception in the LLM event, then its `as_trace` in an EXCEPTION event (under
    the LLM event's parent) unless an inner one did; an `event()` context reports it in its end
    payload only if no inner one did. Both mark it reported (`event_added`), as stock's do."""
    from llama_index.core.callbacks import CBEventType, EventPayload

    reported = err is None or hasattr(err, "event_added")
    if event_type is CBEventType.LLM:
        event_ended(manager, event_type, None if err is None else {EventPayload.EXCEPTION: err}, event_id)
        if not reported:
            event_started(manager, CBEventType.EXCEPTION, {EventPayload.EXCEPTION: err}, parent)
    else:
        event_ended(manager, event_type, None if reported else {EventPayload.EXCEPTION: err}, event_id)
    if not reported:
        try:
            err.event_added = True  # type: ignore[union-attr]
        except AttributeError:  # an exception type without a __dict__
            pass


def current_event() -> str:
    """The callback event the caller's code runs in (stock nests the next one under it)."""
    from llama_index.core.callbacks.base import global_stack_trace

    stack = global_stack_trace.get()
    return stack[-1] if stack else "root"


def explain_lines() -> list[str]:
    """`explain()`'s lines on calls whose callback handlers listened."""
    lines = []
    if reported_calls:
        lines.append("LlamaIndex callback handlers listened (e.g. TokenCountingHandler): the lowered stages fired "
                     "stock's events (process-wide): " + ", ".join(f"{name} {n}" for name, n in sorted(reported_calls.items())))
    if stock_calls:
        lines.append("LlamaIndex callback handlers listened to streamed responses: stock code answered, engine calls "
                     "captured (process-wide): " + ", ".join(f"{name} {n}" for name, n in sorted(stock_calls.items())))
    return lines
