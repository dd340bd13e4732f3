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
from accel.types import EngineCall, OnSessionLoop

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


def _call(client: Any, request: httpx.Request, learning: bool) -> EngineCall:
    """The engine call of one request: an embedding server's, or an LLM server's (with the
    prompt and the generated text as learned prefill reads them, where the run is `learning`)."""
    body = request.read()
    call = APICall(request.method, str(request.url), tuple(request.headers.multi_items()), body,
                   timeout=request.extensions.get("timeout"))
    api_key = str(getattr(client, "api_key", None) or "EMPTY")
    shape = functools.partial(_response, request)
    if _embedding(request):
        return EngineCall(embed_server(str(client.base_url), api_key), [call], EMBED_COMPONENT, shape=shape)
    spec = bindings.openai_server(str(client.base_url).rstrip("/"), call.model or "", api_key)
    return EngineCall(spec, [call], COMPONENT, shape=shape, prompt=values.request_prompt(body) if learning else None,
                      answer=_answer)


def _response(request: httpx.Request, results: list[APIResponse]) -> httpx.Response:
    [answer] = results
    return httpx.Response(answer.status, headers=list(answer.headers), content=answer.content, request=request)


def _answer(result: object) -> tuple[str | None, int | None]:
    """The generated text and cached prompt tokens of a response, or of a stream's chunks."""
    if isinstance(result, APIResponse):
        return values.response_text(result.content) if result.status == 200 else (None, None)
    chunks = result if isinstance(result, list) else []
    status = next((c.head.status for c in chunks if isinstance(c, APIChunk) and c.head is not None), 0)
    if status != 200:
        return None, None
    return values.stream_text(b"".join(c.data for c in chunks if isinstance(c, APIChunk)))


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
        call = _call(self, request, run.recorder is not None)
        session = route.session_of(run)
        try:
            if not stream or _embedding(request):
                response = session.call(run, call)
                route.stats.count("routed", call.component)
                return response
            chunks: Iterator[Any] = session.stream_call(run, call)
            route.stats.count("routed", call.component)
            head = next(chunks).head
        except (EngineError, OnSessionLoop) as err:
            route.note_fallback(call.component, err)
            return original(self, request, stream=stream, **kwargs)
        return httpx.Response(head.status, headers=list(head.headers), stream=_SyncBody(chunks), request=request)

    return _send_request


def _send_async(original: Any) -> Any:
    @functools.wraps(original)
    async def _send_request(self: Any, request: Any, *, stream: bool, **kwargs: Any) -> Any:
        run = route.active_run()
        if run is None or not _routable(self, request, kwargs):
            return await original(self, request, stream=stream, **kwargs)
        call = _call(self, request, run.recorder is not None)
        session = route.session_of(run)
        try:
            if not stream or _embedding(request):
                response = await session.acall(run, call)
                route.stats.count("routed", call.component)
                return response
            chunks: AsyncIterator[Any] = session.astream_call(run, call)
            route.stats.count("routed", call.component)
            head = (await anext(chunks)).head
        except EngineError as err:
            route.note_fallback(call.component, err)
            return await original(self, request, stream=stream, **kwargs)
        return httpx.Response(head.status, headers=list(head.headers), stream=_AsyncBody(chunks), request=request)

    return _send_request


register(Plugin(COMPONENT + ":sync", "openai._base_client", "SyncAPIClient", {"_send_request": _send_sync}))
register(Plugin(COMPONENT + ":async", "openai._base_client", "AsyncAPIClient", {"_send_request": _send_async}))
