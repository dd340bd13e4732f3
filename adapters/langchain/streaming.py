"""Stream chunks shaped as stock LangChain streams the same chain.

Stock `stream` of a chain ending in `ChatOpenAI` yields `AIMessageChunk`s (content deltas, then
a last chunk with the finish metadata and, when the model streams usage, the usage); with
`StrOutputParser()` after it, the chunks' `.text`; a completion LLM yields `str` deltas. A
chat stream opens with an empty chunk, as the server's first event (the assistant role, no
text) gives stock one. The
runtime's `Delta`s become those chunks. A chain whose output is a dict of known parts (a
parallel, an assign) streams them as `AddableDict`s, as stock's do. Any other output comes
once, as stock gives a final lambda's value.
"""

from __future__ import annotations

from typing import Any

from accel.adapters.langchain.ops import ChatResult
from accel.types import Delta, Part, StreamItem


class Chunks:
    """One stream's shaper: `feed(item)` returns the chunks to yield for a runtime item. An
    output dict streamed by parts yields `AddableDict`s as stock's parallels and assigns do:
    `{key: chunk}` for each piece of a part, nested for nested dicts, so that the chunks add
    up to the output."""

    def __init__(self, chat: ChatResult | None, parts: dict[tuple[str, ...], ChatResult] | None = None) -> None:
        self._text = _Text(chat)
        self._chats = parts or {}
        self._parts: dict[tuple[str, ...], _Text] = {}
        self._keys: set[str] = set()  # the output dict's keys some chunk carried
        self._parted = False

    def feed(self, item: StreamItem) -> list[Any]:
        if isinstance(item, Delta) and not item.path:
            return self._text.delta(item.text)
        if isinstance(item, Delta | Part):
            self._parted = True
            return [_nested(item.path, chunk) for chunk in self._part(item)]
        if not self._parted:
            return self._text.end(item.value)
        left = {k: v for k, v in item.value.items() if k not in self._keys} if isinstance(item.value, dict) else {}
        return [_nested((), left)] if left else []

    def _part(self, item: Delta | Part) -> list[Any]:
        if isinstance(item, Part) and item.merge:
            self._keys.update(item.value if not item.path else item.path[:1])
            return [_nested((), item.value)] if item.value else []
        if item.path:
            self._keys.add(item.path[0])
        shaper = self._parts.get(item.path)
        if shaper is None:
            shaper = self._parts[item.path] = _Text(self._chats.get(item.path))
        return shaper.delta(item.text) if isinstance(item, Delta) else shaper.end(item.value)


class _Text:
    """The chunks of one streamed text, the output's own or a part's: its deltas as the stock
    model (with StrOutputParser: its parser) streams them, then its value once known."""

    def __init__(self, chat: ChatResult | None) -> None:
        self._chat = chat
        self._streamed: list[str] = []
        self._opened = False

    def _opening(self) -> list[Any]:
        opening = [self._chat.chunk("")] if self._chat is not None and not self._opened else []
        self._opened = True
        return opening

    def delta(self, text: str) -> list[Any]:
        opening = self._opening()
        self._streamed.append(text)
        return opening + [text if self._chat is None else self._chat.chunk(text)]

    def end(self, value: Any) -> list[Any]:
        opening = self._opening()
        if self._chat is not None and not self._chat.text:
            rest = value.content[len("".join(self._streamed)):]
            return opening + [self._chat.last_chunk(value, rest)]
        return [] if self._streamed else opening + [value]


def _nested(path: tuple[str, ...], value: Any) -> Any:
    """`value` under the keys `path`, as nested `AddableDict`s (a dict at the top becomes one)."""
    from langchain_core.runnables.utils import AddableDict

    chunk = value
    for key in reversed(path):
        chunk = AddableDict({key: chunk})
    return chunk if path or isinstance(chunk, AddableDict) else AddableDict(chunk)


def chat_result(template: Any) -> ChatResult | None:
    """The chat-model result op feeding the template's Output, if the chain ends in one."""
    graph = template.graph
    source = graph.node(graph.output.inputs["value"].node)
    return source.op if isinstance(source.op, ChatResult) else None


def part_chats(template: Any) -> dict[tuple[str, ...], ChatResult]:
    """Each output dict part that is a chat model's message or text (`accel.ir.output_parts`):
    its chunks are shaped as that model streams."""
    from accel.ir.output_parts import dict_layout

    return {part.path: op for part in dict_layout(template) if isinstance(op := template.nodes[part.node].op, ChatResult)}


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
