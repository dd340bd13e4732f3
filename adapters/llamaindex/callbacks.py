"""LlamaIndex's legacy callbacks: whether a `CallbackManager` handler listens to a lowered app.

Each LlamaIndex component reports to its own `callback_manager` from inside its stock methods:
EMBEDDING from `get_query_embedding`, LLM from `complete` / `chat` (`llm_completion_callback`),
TEMPLATING, RETRIEVE, SYNTHESIZE, RERANKING. Handlers read those events: the docs' token
counting (`TokenCountingHandler` on `Settings.callback_manager`), `LlamaDebugHandler`, tracing
integrations built on callbacks. A lowered stage does its engine work without those methods
and reports none of them (measured: a compact query's counter read 0 LLM and 0 embedding
tokens where stock's read 788 + 32 and 10). So a call whose components have a handler runs
the stock code, its engine calls captured by the floor (cross-query batching and priorities
kept), as a LangChain chain does for a streaming handler; each such call is counted and
`explain()` says so. Checked per call: handlers are added after wrapping, too.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("accel.adapters.llamaindex.callbacks")

stock_calls: Counter[str] = Counter()
"""Calls of lowered LlamaIndex components answered by stock code because a legacy callback
handler listened, per component class (process-wide)."""

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
        log.info("accel.wrap(%s): a LlamaIndex callback handler listens (%s); its calls run the stock code with "
                 "their engine calls captured, so the handler sees stock's events", component, ", ".join(handlers))
    stock_calls[component] += 1
    return True


def explain_lines() -> list[str]:
    """`explain()`'s line on calls that ran stock code for a listening callback handler."""
    if not stock_calls:
        return []
    return ["LlamaIndex callback handlers listened (e.g. TokenCountingHandler): stock code answered, engine calls "
            "captured (process-wide): " + ", ".join(f"{name} {n}" for name, n in sorted(stock_calls.items()))]
