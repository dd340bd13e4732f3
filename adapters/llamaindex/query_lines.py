"""QueryFusionRetriever's query generation as a splittable decode (streamed by decode pipelining).

The retriever parses the completion as

    queries = [q.strip() for q in text.strip("`").split("\\n") if q.strip()][: num_queries - 1]

`QueryLines` is that parser fed incrementally: a line is final once its newline arrives (only
the first line loses leading backticks, only the last one trailing backticks), so the streamed
items are the stock queries however the text was cut into deltas.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from accel.engines.base import GenerationChunk, GenerationRequest, SamplingParams

from . import events, query_trace

QUERY_PORT = "query"


class QueryLines:
    """Incremental form of QueryFusionRetriever's line parsing (before the count limit)."""

    def __init__(self) -> None:
        self._line: list[str] = []
        self._first = True

    def _finish(self, line: str, last: bool) -> list[str]:
        if self._first:
            line, self._first = line.lstrip("`"), False
        if last:
            line = line.rstrip("`")
        return [line.strip()] if line.strip() else []

    def feed(self, delta: str) -> list[str]:
        out: list[str] = []
        for ch in delta:
            if ch == "\n":
                out += self._finish("".join(self._line), last=False)
                self._line = []
            else:
                self._line.append(ch)
        return out

    def close(self) -> list[str]:
        line, self._line = "".join(self._line), []
        return self._finish(line, last=True)


def parse_queries(text: str, limit: int) -> list[str]:
    lines = QueryLines()
    return (lines.feed(text) + lines.close())[:limit]


def query_prompt(retriever: Any, query: str, chat: bool) -> str | list[dict[str, str]]:
    """What `retriever._get_queries` sends through `llm.complete` (a user message for chat
    models, as LlamaIndex's completion-to-chat wrapper builds it)."""
    prompt = retriever.query_gen_prompt.format(num_queries=retriever.num_queries - 1, query=query)
    return [{"role": "user", "content": prompt}] if chat else prompt


@dataclass(frozen=True)
class QueryLinesOp:
    """Decode of the query-generation call; its value is the query list the retriever uses:
    the original query, then at most `limit` generated ones. `llm` (the retriever's) names the
    `complete` call in LlamaIndex's events. Splittable: `streamed()` is its PartialDecode form
    (the decode-pipelining pass decides to use it)."""

    params: SamplingParams
    limit: int
    llm: Any

    async def requests(self, values: dict[str, Any]) -> list[GenerationRequest]:
        prompt = values["prompt"]
        events.llm_started(self.llm, prompt, parent="retrieve")
        if isinstance(prompt, str):
            return [GenerationRequest(prompt=prompt, params=self.params)]
        return [GenerationRequest(messages=list(prompt), params=self.params)]

    def output(self, values: dict[str, Any], results: list[Any]) -> list[str]:
        (generation,) = results
        events.llm_ended(values["prompt"], generation.text, generation)
        return [values[QUERY_PORT], *parse_queries(generation.text, self.limit)]

    def streamed(self) -> StreamedQueryLinesOp:
        return StreamedQueryLinesOp(self)


@dataclass(frozen=True)
class StreamedQueryLinesOp:
    """PartialDecode of the query-generation call. Items (one-element slices): the original
    query first, then each generated query as its line completes, at most `limit` of them; the
    stream is closed (the request aborted) once the retriever has all the lines it keeps, and its
    `complete` end event carries the text generated until then; unless a legacy callback handler
    listens (`query_trace.counted`: token counters read every call's text and usage), which then
    gets the whole answer and its usage, as stock's call makes them."""

    inner: QueryLinesOp

    async def requests(self, values: dict[str, Any]) -> list[GenerationRequest]:
        return await self.inner.requests(values)

    async def stream(self, values: dict[str, Any], chunks: AsyncIterator[GenerationChunk]) -> AsyncIterator[list[str]]:
        yield [values[QUERY_PORT]]
        lines, emitted, text, limit, final = QueryLines(), 0, [], self.inner.limit, None
        async with aclosing(chunks) as source:
            async for chunk in source:
                text.append(chunk.delta)
                final = chunk.generation or final
                if emitted == limit:
                    continue  # a callback handler counts the call whole, as stock makes it
                for item in lines.feed(chunk.delta):
                    yield [item]
                    emitted += 1
                    if emitted == limit and not query_trace.counted():
                        events.llm_ended(values["prompt"], "".join(text))
                        return
        events.llm_ended(values["prompt"], "".join(text), final)
        for item in lines.close()[: limit - emitted]:
            yield [item]

    def output(self, values: dict[str, Any], results: list[Any]) -> list[list[str]]:
        return [[query] for query in self.inner.output(values, results)]
