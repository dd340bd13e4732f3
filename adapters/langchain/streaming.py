"""Stream chunks shaped as stock LangChain streams the same chain.

Stock `stream` of a chain ending in `ChatOpenAI` yields `AIMessageChunk`s (content deltas, then
a last chunk with the finish metadata and, when the model streams usage, the usage); with
`StrOutputParser()` after it, the chunks' `.text`; a completion LLM yields `str` deltas. A
chat stream opens with an empty chunk, as the server's first event (the assistant role, no
text) gives stock one. The runtime's `Delta`s become those chunks. A chain ending in a list
parser that streams (comma separated, numbered) yields `[item]` per item, as the parser does; a
model that does not stream (`disable_streaming`) gives its answer once. A chain whose output is
a dict of known parts (a parallel, an assign) streams them as `AddableDict`s, as stock's do. Any
other output comes once, as stock gives a final lambda's value.
"""

from __future__ import annotations

from typing import Any

from accel.adapters.langchain.messages import message_id
from accel.adapters.langchain.ops import ChatResult
from accel.types import Delta, Final, Part, StreamItem


Shape = Any
"""How a streamed output is shaped (`stream_shapes`): a chat model's result op; (the stock list
parser that streams it item by item, True when its model does not stream); or `ONCE`."""

ONCE = "once"
"""A model whose stock `stream` does not stream (`disable_streaming`, `streaming=False`): its
answer comes whole, as its `invoke` gives it."""


class Chunks:
    """One stream's shaper: `feed(item)` returns the chunks to yield for a runtime item.
    `shapes` says how each streamed output is shaped (`stream_shapes`): the output's own
    (path ()) or an output dict part's. A dict streamed by parts yields `AddableDict`s as
    stock's parallels and assigns do: `{key: chunk}` for each piece of a part, nested for
    nested dicts, so that the chunks add up to the output."""

    def __init__(self, shapes: dict[tuple[str, ...], Shape]) -> None:
        self._shapes = shapes
        self._streams: dict[tuple[str, ...], _Text | _Items | _Once] = {}
        self._keys: set[str] = set()  # the output dict's keys some chunk carried
        self._parted = False

    def feed(self, item: StreamItem) -> list[Any]:
        if isinstance(item, Final):
            if not self._parted:
                return self._stream(()).end(item.value)
            left = {k: v for k, v in item.value.items() if k not in self._keys} if isinstance(item.value, dict) else {}
            return [_addable(left)] if left else []
        self._parted = self._parted or bool(item.path) or isinstance(item, Part)
        if isinstance(item, Part) and item.merge:
            self._keys.update(item.value if not item.path else item.path[:1])
            return [_nested(item.path, _addable(item.value))] if item.value else []
        if item.path:
            self._keys.add(item.path[0])
        stream = self._stream(item.path)
        chunks = stream.delta(item.text, item.last) if isinstance(item, Delta) else stream.end(item.value)
        return [_nested(item.path, chunk) for chunk in chunks]

    def _stream(self, path: tuple[str, ...]) -> _Text | _Items | _Once:
        if path not in self._streams:
            shape = self._shapes.get(path)
            if shape is ONCE:
                self._streams[path] = _Once()
            elif isinstance(shape, tuple):
                self._streams[path] = _Items(*shape)
            else:
                self._streams[path] = _Text(shape)
        return self._streams[path]


class _Once:
    """A model that does not stream: no chunk until its whole answer."""

    def delta(self, text: str, last: bool = False) -> list[Any]:
        return []

    def end(self, value: Any) -> list[Any]:
        return [value]


class _Text:
    """The chunks of one streamed text, the output's own or a part's: its deltas as the stock
    model (with StrOutputParser: its parser) streams them, then its value once known."""

    def __init__(self, chat: ChatResult | None) -> None:
        self._chat = chat
        self._streamed: list[str] = []
        self._opened = False
        # stock's stream sets its run's id on every message chunk (a run nobody traces here)
        self._id = message_id(streamed=True) if chat is not None and not chat.text else None

    def _opening(self) -> list[Any]:
        opening = [self._chat.chunk("", self._id)] if self._chat is not None and not self._opened else []
        self._opened = True
        return opening

    def delta(self, text: str, last: bool = False) -> list[Any]:
        opening = self._opening()
        if last and self._chat is not None and not self._chat.text:
            return opening  # stock's last text chunk carries the finish metadata: it goes with the end
        self._streamed.append(text)
        return opening + [text if self._chat is None else self._chat.chunk(text, self._id)]

    def end(self, value: Any) -> list[Any]:
        opening = self._opening()
        if self._chat is not None and not self._chat.text:
            rest = value.content[len("".join(self._streamed)):]
            return opening + self._chat.closing_chunks(value, rest, self._id)
        return [] if self._streamed else opening + [value]


class _Items:
    """The chunks of a list a stock list parser streams: its own `transform` (`[item]` for each
    item complete in the text so far, the text after it kept; the last items at the end), over
    the model's text deltas. Stock also hands it the stream's empty events (role, finish),
    which can only matter to a field whose parsed text parses again into more."""

    def __init__(self, parser: Any, whole: bool = False) -> None:
        self._parser = parser
        self._buffer = ""
        self._fed = False
        self._whole = whole  # the model does not stream: its items come with its whole answer

    def delta(self, text: str, last: bool = False) -> list[Any]:
        if self._whole:
            return []
        self._buffer += text
        self._fed = True
        try:
            matches = list(self._parser.parse_iter(self._buffer))
        except NotImplementedError:
            parts = self._parser.parse(self._buffer)
            if len(parts) < 2:
                return []
            self._buffer = parts[-1]
            return [[part] for part in parts[:-1]]
        if len(matches) < 2:
            return []
        self._buffer = self._buffer[matches[-2].end():]
        return [[match.group(1)] for match in matches[:-1]]

    def end(self, value: Any) -> list[Any]:
        """The last items; the whole list's when no text streamed (a decode that did not)."""
        return [[part] for part in (self._parser.parse(self._buffer) if self._fed else value)]


def _nested(path: tuple[str, ...], value: Any) -> Any:
    """`value` under the keys `path`, as nested `AddableDict`s (stock's parallels' chunks)."""
    from langchain_core.runnables.utils import AddableDict

    for key in reversed(path):
        value = AddableDict({key: value})
    return value


def _addable(value: dict[str, Any]) -> Any:
    from langchain_core.runnables.utils import AddableDict

    return AddableDict(value)


def stream_shapes(template: Any, runs: Any, scope: int) -> dict[tuple[str, ...], Shape]:
    """How each streamed output of `template` (run scope `scope` of `runs`, a `RunPlan`) is
    shaped: by path, the output's own (()) and each output dict part's
    (`accel.ir.output_parts`): a chat model's result op (its message, or after StrOutputParser
    its text, as that model streams), the stock list parser whose items stream
    (`streams_items`), or `ONCE` for a model that does not stream; anything else streams as it
    comes."""
    from accel.ir.output_parts import dict_layout, through_identities

    parsers = {spec.output.node: spec.component for spec in runs.specs.values()
               if spec.kind == "parser" and spec.scope == scope and spec.output is not None}
    quiet = {spec.decode for spec in runs.specs.values()
             if spec.kind == "llm" and spec.scope == scope and not spec.binding.streams(called_by_stream=True)}
    heads = [((), through_identities(template, template.index[template.output], None))]
    heads += [(part.path, (part.node, part.key)) for part in dict_layout(template) if not part.merge]
    shapes: dict[tuple[str, ...], Shape] = {}
    for path, (node, key) in heads:
        op = template.nodes[node].op
        decodes = {template.order[src] for _, src, _ in template.port_refs[node]} | {template.order[node]}
        if key is not None:
            continue
        if getattr(op, "streams_items", False) and template.order[node] in parsers:
            shapes[path] = (parsers[template.order[node]], bool(decodes & quiet))
        elif decodes & quiet:
            shapes[path] = ONCE
        elif isinstance(op, ChatResult):
            shapes[path] = op
    return shapes


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
