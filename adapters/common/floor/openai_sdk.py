"""The floor's LLM plug-in: the `openai` SDK's HTTP send, shared by every framework client on
an OpenAI-compatible server (LangChain `ChatOpenAI`, `OpenAI`, `VLLMOpenAI`; LlamaIndex
`OpenAILike`, `OpenAI`).

`SyncAPIClient._send_request` / `AsyncAPIClient._send_request` are the SDK's one place where a
built `httpx.Request` leaves for the server. During a wrapped run a generation request (POST
.../completions, .../chat/completions) goes instead to the session's LLM engine scheduler as
an `APICall`: the same body (plus the program's `priority` when the server schedules by
priority), and the server's response comes back as the `httpx.Response` the SDK expects, so
everything above this point (payload building, callbacks, parsing, retries, stock exception
types) is the SDK's and the framework's own. Hosted APIs (api.openai.com) are left alone.

An embedding request (POST .../embeddings: LangChain `OpenAIEmbeddings`, LlamaIndex
`OpenAIEmbedding` / `OpenAILikeEmbedding`) goes to the server's embedding engine, which merges
the requests of concurrent programs into one (`accel.engines.embed_server`); each client gets
its own inputs' slice of the answer. Its body is the client's own: token ids where the client
tokenized (`OpenAIEmbeddings(check_embedding_ctx_length=True)`), texts where it did not.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from accel.adapters.common import bindings
from accel.adapters.common.floor import route, values
from accel.adapters.common.floor.plugins import Plugin, register
from accel.adapters.common.server_encoders import embed_server
from accel.engines.errors import EngineError
from accel.engines.llm.api_call import APICall, APIChunk, APIResponse
from accel.ir.dynamic import Site
from accel.scope import WrappedRun

COMPONENT = "openai-sdk"
EMBED_COMPONENT = "openai-sdk:embeddings"
_GENERATION_PATHS = ("/completions", "/chat/completions")
_EMBEDDING_PATH = "/embeddings"
_HOSTED = ("api.openai.com",)


def _routable(client: Any, request: Any, kwargs: dict[str, Any]) -> bool:
    return (
        not kwargs  # custom auth / redirect options: keep the SDK's own send
        and isinstance(request, httpx.Request)
        and isinstance(client._client, (httpx.Client, httpx.AsyncClient))
        and request.method == "POST"
        and request.url.path.endswith((*_GENERATION_PATHS, _EMBEDDING_PATH))
        and request.url.host not in _HOSTED
    )


def _embedding(request: httpx.Request) -> bool:
    return request.url.path.endswith(_EMBEDDING_PATH)


def _call(client: Any, request: httpx.Request) -> tuple[bindings.EngineSpec, APICall]:
    body = request.read()
    call = APICall(request.method, str(request.url), tuple(request.headers.multi_items()), body,
                   timeout=request.extensions.get("timeout"))
    api_key = str(getattr(client, "api_key", None) or "EMPTY")
    if _embedding(request):
        return embed_server(str(client.base_url), api_key), call
    spec = bindings.openai_server(str(client.base_url).rstrip("/"), call.model or "", api_key)
    return spec, call


def _response(request: httpx.Request, answer: APIResponse) -> httpx.Response:
    return httpx.Response(answer.status, headers=list(answer.headers), content=answer.content, request=request)


class _SyncBody(httpx.SyncByteStream):
    def __init__(self, chunks: Iterator[APIChunk]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            if chunk.data:
                yield chunk.data

    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()  # an unfinished stream is aborted in the engine


class _AsyncBody(httpx.AsyncByteStream):
    def __init__(self, chunks: AsyncIterator[APIChunk]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._chunks:
            if chunk.data:
                yield chunk.data

    async def aclose(self) -> None:
        aclose = getattr(self._chunks, "aclose", None)
        if aclose is not None:
            await aclose()


def _send_sync(original: Any) -> Any:
    @functools.wraps(original)
    def _send_request(self: Any, request: Any, *, stream: bool, **kwargs: Any) -> Any:
        run = route.active_run()
        if run is None or not _routable(self, request, kwargs):
            return original(self, request, stream=stream, **kwargs)
        spec, call = _call(self, request)
        if _embedding(request):
            try:
                [answer] = route.submit_sync(run, spec, [call], EMBED_COMPONENT)
            except (EngineError, route.OnSessionLoop) as err:
                route.note_fallback(EMBED_COMPONENT, err)
                return original(self, request, stream=stream, **kwargs)
            return _response(request, answer)
        site = _learn_request(run, spec, call.body)
        try:
            if not stream:
                [answer] = route.submit_sync(run, spec, [call], COMPONENT)
                _learn_response(run, site, answer.status, answer.content)
                return _response(request, answer)
            chunks = _recorded_stream(run, site, route.stream_sync(run, spec, call, COMPONENT))
            head = next(chunks).head
        except (EngineError, route.OnSessionLoop) as err:
            route.note_fallback(COMPONENT, err)
            return original(self, request, stream=stream, **kwargs)
        return httpx.Response(head.status, headers=list(head.headers), stream=_SyncBody(chunks), request=request)

    return _send_request


def _send_async(original: Any) -> Any:
    @functools.wraps(original)
    async def _send_request(self: Any, request: Any, *, stream: bool, **kwargs: Any) -> Any:
        run = route.active_run()
        if run is None or not _routable(self, request, kwargs):
            return await original(self, request, stream=stream, **kwargs)
        spec, call = _call(self, request)
        if _embedding(request):
            try:
                [answer] = await route.submit_async(run, spec, [call], EMBED_COMPONENT)
            except EngineError as err:
                route.note_fallback(EMBED_COMPONENT, err)
                return await original(self, request, stream=stream, **kwargs)
            return _response(request, answer)
        site = _learn_request(run, spec, call.body)
        try:
            if not stream:
                [answer] = await route.submit_async(run, spec, [call], COMPONENT)
                _learn_response(run, site, answer.status, answer.content)
                return _response(request, answer)
            chunks = _arecorded_stream(run, site, route.stream_async(run, spec, call, COMPONENT))
            head = (await anext(chunks)).head
        except EngineError as err:
            route.note_fallback(COMPONENT, err)
            return await original(self, request, stream=stream, **kwargs)
        return httpx.Response(head.status, headers=list(head.headers), stream=_AsyncBody(chunks), request=request)

    return _send_request


# ---- learned prefill: what the run sent and got back ---------------------------------------


def _learn_request(run: WrappedRun, engine: bindings.EngineSpec, body: bytes) -> Site | None:
    """An LLM request the floor is about to send for `run`: its site, or None where the run
    does not learn."""
    recorder = run.recorder
    if recorder is None:
        return None
    site = recorder.site("llm")
    recorder.llm_request(site, values.request_prompt(body), engine)
    return site


def _learn_response(run: WrappedRun, site: Site | None, status: int, content: bytes) -> None:
    if site is not None and status == 200:
        run.recorder.llm_response(site, *values.response_text(content))


def _recorded_stream(run: WrappedRun, site: Site | None, chunks: Iterator[Any]) -> Iterator[Any]:
    """`chunks` (APIChunks) passed through; the whole body, once read, is what the call produced."""
    if site is None:
        return chunks
    return _recorded(run, site, chunks)


class _Body:
    """A streamed response's status and bytes, told to the run's recorder once complete."""

    def __init__(self, run: WrappedRun, site: Site) -> None:
        self.run, self.site = run, site
        self.status = 0
        self.data: list[bytes] = []

    def add(self, chunk: APIChunk) -> APIChunk:
        self.status = chunk.head.status if chunk.head is not None else self.status
        self.data.append(chunk.data)
        return chunk

    def done(self) -> None:
        if self.status == 200:
            self.run.recorder.llm_response(self.site, *values.stream_text(b"".join(self.data)))


def _recorded(run: WrappedRun, site: Site, chunks: Iterator[Any]) -> Iterator[Any]:
    body = _Body(run, site)
    try:
        for chunk in chunks:
            yield body.add(chunk)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    body.done()


def _arecorded_stream(run: WrappedRun, site: Site | None, chunks: AsyncIterator[Any]) -> AsyncIterator[Any]:
    if site is None:
        return chunks
    return _arecorded(run, site, chunks)


async def _arecorded(run: WrappedRun, site: Site, chunks: AsyncIterator[Any]) -> AsyncIterator[Any]:
    body = _Body(run, site)
    try:
        async for chunk in chunks:
            yield body.add(chunk)
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()
    body.done()


register(Plugin(COMPONENT + ":sync", "openai._base_client", "SyncAPIClient", {"_send_request": _send_sync}))
register(Plugin(COMPONENT + ":async", "openai._base_client", "AsyncAPIClient", {"_send_request": _send_async}))
