"""Stream chunks shaped as stock LangChain streams the same chain.

Stock `stream` of a chain ending in `ChatOpenAI` yields `AIMessageChunk`s (content deltas, then
a last chunk with the finish metadata and, when the model streams usage, the usage); with
`StrOutputParser()` after it, the chunks' `.text`; a completion LLM yields `str` deltas. A
chat stream opens with an empty chunk, as the server's first event (the assistant role, no
text) gives stock one. The
runtime's `Delta`s become those chunks. A chain whose output is not a decode's text gets its
value once, as stock does for a final lambda returning a string.
"""

from __future__ import annotations

from typing import Any

from accel.adapters.langchain.ops import ChatResult
from accel.types import Delta, StreamItem


class Chunks:
    """One stream's shaper: `feed(item)` returns the chunks to yield for a runtime item."""

    def __init__(self, chat: ChatResult | None) -> None:
        self._chat = chat
        self._streamed: list[str] = []
        self._opened = False

    def feed(self, item: StreamItem) -> list[Any]:
        chat = self._chat
        opening = [chat.chunk("")] if chat is not None and not self._opened else []
        self._opened = True
        if isinstance(item, Delta):
            self._streamed.append(item.text)
            return opening + [item.text if chat is None else chat.chunk(item.text)]
        if chat is not None and not chat.text:
            rest = item.value.content[len("".join(self._streamed)):]
            return opening + [chat.last_chunk(item.value, rest)]
        return [] if self._streamed else opening + [item.value]


def chat_result(template: Any) -> ChatResult | None:
    """The chat-model result op feeding the template's Output, if the chain ends in one."""
    graph = template.graph
    source = graph.node(graph.output.inputs["value"].node)
    return source.op if isinstance(source.op, ChatResult) else None


# ---- handlers a lowered query cannot serve as stock does --------------------------------

STREAMING_HANDLER = "a streaming callback handler listens (e.g. LangGraph stream_mode='messages')"
ASYNC_HANDLER = "an async callback handler listens: stock awaits it on the caller's loop"


def stock_listener(config: Any, asynchronous: bool) -> str | None:
    """Why the call must run the stock chain (its engine calls still captured), or None.

    A streaming handler (`_StreamingCallbackHandler`: astream_events, astream_log, LangGraph's
    messages mode) makes stock stream every model (`BaseChatModel._should_stream`) and every
    step's output (`tap_output_aiter`), events a lowered query does not make. An async
    handler in an async call is awaited on the caller's loop by stock, in order; a lowered
    query makes its callbacks on accel's loop thread, where LangChain's sync manager runs a
    coroutine on a loop of its own (asyncio objects bound to the caller's loop break).
    """
    from langchain_core.callbacks import AsyncCallbackHandler
    from langchain_core.runnables.config import var_child_runnable_config
    from langchain_core.tracers._streaming import _StreamingCallbackHandler

    callbacks = (config or {}).get("callbacks")
    if callbacks is None:  # as `ensure_config`: the enclosing run's callbacks
        callbacks = (var_child_runnable_config.get() or {}).get("callbacks")
    handlers = getattr(callbacks, "handlers", callbacks) or []
    if any(isinstance(handler, _StreamingCallbackHandler) for handler in handlers):
        return STREAMING_HANDLER
    if asynchronous and any(isinstance(handler, AsyncCallbackHandler) for handler in handlers):
        return ASYNC_HANDLER
    return None
