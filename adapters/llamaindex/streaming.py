"""Streaming synthesis: the final LLM call's tokens as a `StreamingResponse`'s `response_gen`.

A streaming synthesizer's plan ends in one `StreamedRun`: a graph whose output is the final
call's text. Its tokens come from the runtime's stream of that graph (`Session.stream` /
`astream`), so intermediate refine calls and the final call run on accel's engines. The
generators start the graph at their first `next`, as stock's LLM stream sends its request then;
closing one early cancels the graph and aborts its request.

Failures read as the plan's non-streaming ones do: a plan that does not fit the query
(`PlanMismatch`, found before any token) is answered by the synthesizer's own streaming
`get_response`; a prompt longer than the context raises the stock client's error.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from contextlib import aclosing, closing
from dataclasses import dataclass
from typing import Any

from accel.engines.errors import PromptTooLong
from accel.types import Delta, Final, StreamItem

from .errors import stock_error
from .prompts import PlanMismatch


@dataclass(frozen=True)
class StreamedRun:
    """The last synthesis step when the synthesizer streams: `template` run on `inputs`, its
    output's tokens streamed; `stock` / `astock` are the synthesizer's own `get_response` /
    `aget_response` (a token generator) for a query the plan does not fit."""

    template: Any
    inputs: dict[str, Any]
    stock: Callable[[], Any]
    astock: Callable[[], Awaitable[Any]]

    def tokens(self, session: Any) -> Generator[str, None, None]:
        """The response's token generator for sync callers (any thread but the session loop's)."""
        texts = _Texts()
        try:
            with closing(session.stream(self.template, self.inputs)) as items:
                for item in items:
                    yield from texts.feed(item)
        except PlanMismatch:
            if texts.started:
                raise
            answer = self.stock()
            yield from [answer] if isinstance(answer, str) else answer
        except PromptTooLong as err:
            raise stock_error(err) from err

    async def atokens(self, session: Any) -> AsyncGenerator[str, None]:
        """The response's async token generator (any event loop)."""
        texts = _Texts()
        try:
            async with aclosing(session.astream(self.template, self.inputs)) as items:
                async for item in items:
                    for text in texts.feed(item):
                        yield text
        except PlanMismatch:
            if texts.started:
                raise
            answer = await self.astock()
            if isinstance(answer, str):
                yield answer
            else:
                async for text in answer:
                    yield text
        except PromptTooLong as err:
            raise stock_error(err) from err


class _Texts:
    """Runtime stream items to response tokens: the deltas; the value once if none came (a
    graph whose output could not be streamed still answers)."""

    def __init__(self) -> None:
        self.started = False

    def feed(self, item: StreamItem) -> list[str]:
        if isinstance(item, Delta):
            self.started = True
            return [item.text]
        if not isinstance(item, Final):
            return []  # a dict output's part: a response's text is no dict
        return [] if self.started or not item.value else [item.value]
