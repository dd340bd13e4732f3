"""An `LLMEngine` that talks to a vLLM OpenAI-compatible server over HTTP.

`stream` streams (`stream_options.include_usage`, so usage and `cached_tokens` arrive with the
last event); `generate`, which `run` uses, asks for the whole answer in one JSON body, as a
stock app's `invoke` does: a streamed answer costs a server-sent event per token on both sides
(the server's API process writes one, this process parses one), a whole answer one body.
Aborting is closing the connection either way: vLLM aborts a request whose client
disconnected, streamed or not (`abort` closes a stream; a whole answer's caller is cancelled).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx

from accel.engines.base import Generation, GenerationChunk, GenerationRequest, Health, LLMEngine, SamplingParams
from accel.engines.errors import EmptyBatch, EngineDied, EngineError, EngineUnavailable, PromptTooLong
from accel.engines.http_client import connect_timeout, engine_client
from accel.engines.keepalive import client_limits
from accel.engines.llm.api_call import HOP_HEADERS, APICall, APIChunk, APIResponse
from accel.engines.llm.local_tokenizer import LocalTokenizer

log = logging.getLogger("accel.engines.llm.openai_client")
_UNRANKED: set[str] = set()  # servers already reported as not scheduling by priority

_UNREACHABLE_REMEDY = "start the local stack with `accel up`, or point ACCEL_OPENAI_BASE_URL at a running server"
_CONTEXT_MARKERS = ("maximum context length", "max_model_len", "context length")


_ENGINE_DEAD_MARKERS = ("EngineCore encountered an issue", "EngineDeadError", "engine is dead")

MEMO_ENTRIES = 512
"""Token ids and rendered chat prompts remembered per engine (least recently used dropped)."""

_BLOCK_SIZE = re.compile(r'vllm:cache_config_info\{[^}]*\bblock_size="(\d+)"')


class OpenAIServerEngine(LLMEngine):
    """vLLM's OpenAI API: prompts and token ids to /v1/completions, messages to /v1/chat/completions.

    It also forwards `APICall`s, requests a framework's own OpenAI client built (engine-call
    capture), unchanged but for `priority`. `supports_priority` is probed once at `start()`:
    a server started with `--scheduling-policy priority` accepts a non-zero priority, a stock
    one answers 400; priorities are sent only to the former."""

    name = "vllm-openai"

    def __init__(self, base_url: str, model: str, api_key: str = "EMPTY", *, timeout_s: float = 600.0,
                 connect_timeout_s: float | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.max_model_len = 0
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout(connect_timeout_s)
        self._client: httpx.AsyncClient | None = None
        self._streams: dict[str, httpx.Response] = {}
        self._aborted: set[str] = set()
        self._memo = _Memo(MEMO_ENTRIES)
        self._local: LocalTokenizer | None = None
        self.supports_priority = False

    @property
    def _server_root(self) -> str:
        """/tokenize lives beside /v1, not under it."""
        return self.base_url.removesuffix("/v1")

    async def start(self) -> None:
        if self._client is None:
            self._client = engine_client(
                headers={"Authorization": f"Bearer {self._api_key}"},
                timeout=httpx.Timeout(self._timeout_s, connect=self._connect_timeout_s),
                limits=client_limits(max_connections=None),
            )
        info = await self._post_json(f"{self._server_root}/tokenize", {"model": self.model, "prompt": ""})
        self.max_model_len = int(info["max_model_len"])
        self.block_size = await self._server_block_size()
        self.supports_priority = await self._probe_priority()
        if not self.supports_priority and self.base_url not in _UNRANKED:
            _UNRANKED.add(self.base_url)
            log.warning("%s does not schedule by priority: accel sends its requests without their priorities, so "
                        "a query's final call is not served ahead of other queries' work. For vLLM, start the server "
                        "with `--scheduling-policy priority`, as `accel up` does", self.base_url)
        if self._local is None:
            self._local = await LocalTokenizer.verified(await self._model_root(), self._server_tokenize)

    async def _probe_priority(self) -> bool:
        """One 1-token request with a non-zero priority: accepted only by a server that
        schedules by priority (vLLM `--scheduling-policy priority`)."""
        body = {"model": self.model, "prompt": [0], "max_tokens": 1, "priority": 1}
        try:
            response = await self._require().post(f"{self.base_url}/completions", json=body)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def _model_root(self) -> str:
        """Where the server loaded the model from: vLLM's `/v1/models` card names it `root`
        (the served name is the directory's basename by default); the name itself otherwise."""
        try:
            response = await self._require().get(f"{self.base_url}/models")
            cards = response.json().get("data", []) if response.status_code == 200 else []
        except (httpx.HTTPError, ValueError):
            return self.model
        return next((str(c.get("root") or self.model) for c in cards if c.get("id") == self.model), self.model)

    async def _server_block_size(self) -> int:
        """The prefix cache's block size, from the server's `vllm:cache_config_info` metric
        (vLLM-CPU uses 128-token blocks); the protocol default when metrics are off."""
        try:
            response = await self._require().get(f"{self._server_root}/metrics")
        except httpx.HTTPError:
            return LLMEngine.block_size
        found = _BLOCK_SIZE.search(response.text) if response.status_code == 200 else None
        return int(found.group(1)) if found else LLMEngine.block_size

    async def stop(self) -> None:
        local, self._local = self._local, None
        if local is not None:
            local.close()
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def health(self) -> Health:
        began = time.perf_counter()
        try:
            await self.run([GenerationRequest(prompt="ping", params=SamplingParams(max_tokens=1))])
        except Exception as err:  # health reports failures instead of raising them
            return Health(self.name, False, f"{type(err).__name__}: {err}")
        return Health(self.name, True, f"{self.model} at {self.base_url} generated 1 token",
                      time.perf_counter() - began)

    async def run(self, batch: Sequence[GenerationRequest | APICall]) -> list[Any]:
        """All requests in flight at once; `APICall`s come back as whole `APIResponse`s."""
        if not batch:
            raise EmptyBatch(self.name, "run() got an empty batch", "send at least one request")
        return list(await asyncio.gather(*(self.forward(r) if isinstance(r, APICall) else self.generate(r) for r in batch)))

    async def forward(self, call: APICall) -> APIResponse:
        """Send a client's request and read its whole response (any status)."""
        head: APIResponse | None = None
        body: list[bytes] = []
        async for chunk in self._forward_stream(call):
            head = chunk.head or head
            body.append(chunk.data)
        assert head is not None
        return APIResponse(head.status, head.headers, b"".join(body))

    async def generate(self, request: GenerationRequest) -> Generation:
        """One request, its answer whole (not streamed); cancelling the caller closes the
        connection, which aborts the request in the server."""
        client = self._require()
        request_id = request.request_id or f"accel-{uuid.uuid4().hex}"
        chat = request.messages is not None
        url = f"{self.base_url}/chat/completions" if chat else f"{self.base_url}/completions"
        body = self._body(request, request_id, stream=False)
        try:
            response = await client.post(url, json=body, headers={"X-Request-Id": request_id})
        except (httpx.ConnectError, httpx.ConnectTimeout) as err:
            raise EngineUnavailable(self.name, f"cannot reach {self.base_url} ({err})", _UNREACHABLE_REMEDY) from err
        except (httpx.StreamError, httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError) as err:
            raise EngineDied(self.name, f"the server dropped the request ({type(err).__name__}: {err})",
                             "check that the server is still running and read its log") from err
        except httpx.TimeoutException as err:
            raise EngineDied(self.name, f"no answer from {self.base_url} ({type(err).__name__})",
                             "check that the server is still running and read its log") from err
        if response.status_code >= 400:
            error = self._http_error(response)
            if any(marker in error.cause for marker in _ENGINE_DEAD_MARKERS):
                raise EngineDied(self.name, f"the server's engine died: {error.cause}",
                                 "restart the server (`accel up` restarts the one it started) and read its log")
            raise error
        return _whole_generation(response.json(), chat, request_id)

    async def stream(self, request: GenerationRequest | APICall) -> AsyncIterator[Any]:
        if isinstance(request, APICall):
            async for chunk in self._forward_stream(request):
                yield chunk
            return
        async for chunk in self._stream_generation(request):
            yield chunk

    async def _forward_stream(self, call: APICall) -> AsyncIterator[APIChunk]:
        """The response as it arrives: head, body pieces, then a finished marker. Transport
        errors are httpx's own, so the framework's client retries and raises as stock."""
        client = self._require()
        request_id = call.request_id or f"accel-{uuid.uuid4().hex}"
        headers = [(k, v) for k, v in call.headers if k.lower() not in HOP_HEADERS]
        extensions = {"timeout": call.timeout} if call.timeout else {}
        request = httpx.Request(call.method, call.url, headers=headers,
                                content=call.body_with_priority(self.supports_priority), extensions=extensions)
        response = await client.send(request, stream=True)
        self._streams[request_id] = response
        try:
            kept = tuple((k, v) for k, v in response.headers.multi_items() if k.lower() not in HOP_HEADERS)
            yield APIChunk(head=APIResponse(response.status_code, kept))
            async for data in response.aiter_bytes():
                yield APIChunk(data=data)
            if request_id in self._aborted:
                raise asyncio.CancelledError(f"request {request_id} was aborted")
            yield APIChunk(finished=True)
        finally:
            self._streams.pop(request_id, None)
            self._aborted.discard(request_id)
            await response.aclose()

    async def _stream_generation(self, request: GenerationRequest) -> AsyncIterator[GenerationChunk]:
        client = self._require()
        request_id = request.request_id or f"accel-{uuid.uuid4().hex}"
        chat = request.messages is not None
        url = f"{self.base_url}/chat/completions" if chat else f"{self.base_url}/completions"
        body = self._body(request, request_id, stream=True)
        text: list[str] = []
        finish_reason = None
        final = False
        head: dict[str, Any] = {}
        try:
            async with client.stream("POST", url, json=body, headers={"X-Request-Id": request_id}) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise self._http_error(response)
                self._streams[request_id] = response
                async for event in _events(response):
                    head.update(_head(event))  # vLLM stamps some (the fingerprint) on its last chunks only
                    if event.get("choices"):
                        choice = event["choices"][0]
                        delta = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
                        finish_reason = choice.get("finish_reason") or finish_reason
                        if delta:
                            text.append(delta)
                            yield GenerationChunk(delta=delta, finish_reason=choice.get("finish_reason"))
                    if event.get("usage"):
                        final = True
                        yield GenerationChunk(delta="", finished=True,
                                              generation=_generation(event["usage"], text, finish_reason, request_id, head))
            if request_id in self._aborted:  # the stream was closed under us without an error
                raise asyncio.CancelledError(f"request {request_id} was aborted")
            if not final:  # every finished stream ends with its usage: this one was cut off
                raise EngineDied(self.name, f"the server ended the stream of {request_id} before its final chunk",
                                 "check that the server is still running and read its log")
        except (httpx.ConnectError, httpx.ConnectTimeout) as err:
            raise EngineUnavailable(self.name, f"cannot reach {self.base_url} ({err})", _UNREACHABLE_REMEDY) from err
        except (httpx.StreamError, httpx.ReadError, httpx.RemoteProtocolError) as err:
            if request_id in self._aborted:
                raise asyncio.CancelledError(f"request {request_id} was aborted") from err
            raise EngineDied(self.name, f"the server dropped the stream ({type(err).__name__}: {err})",
                             "check that the server is still running and read its log") from err
        except httpx.TimeoutException as err:  # read/write/pool: the server stopped answering
            raise EngineDied(self.name, f"no answer from {self.base_url} ({type(err).__name__})",
                             "check that the server is still running and read its log") from err
        finally:
            self._streams.pop(request_id, None)
            self._aborted.discard(request_id)

    async def abort(self, request_id: str) -> None:
        """Close the request's HTTP stream; vLLM aborts requests whose client went away."""
        response = self._streams.get(request_id)
        if response is not None:
            self._aborted.add(request_id)
            await response.aclose()

    async def tokenize(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """The server's token ids for `text`; remembered, since prefix warm-ups tokenize the
        same static prompt heads for every query. Computed in process by the model's own
        tokenizer where it agreed with the server's at `start()` (`LocalTokenizer`), else a
        round trip to the server's API process."""
        key = ("tokens", add_special_tokens, text)
        if (known := self._memo.get(key)) is not None:
            return list(known)
        if self._local is not None:
            tokens = await self._local.encode(text, add_special_tokens=add_special_tokens)
        else:
            tokens = await self._server_tokenize(text, add_special_tokens)
        self._memo.put(key, tokens)
        return list(tokens)

    async def _server_tokenize(self, text: str, add_special_tokens: bool) -> list[int]:
        body = {"model": self.model, "prompt": text, "add_special_tokens": add_special_tokens}
        return list((await self._post_json(f"{self._server_root}/tokenize", body))["tokens"])

    async def render_chat(self, messages: list[dict[str, str]]) -> str:
        """The prompt the server's chat template makes of `messages` (remembered too)."""
        key = ("chat", json.dumps(messages, sort_keys=True))
        if (known := self._memo.get(key)) is not None:
            return known
        body = {"model": self.model, "messages": messages, "add_generation_prompt": True,
                "add_special_tokens": False}
        tokens = (await self._post_json(f"{self._server_root}/tokenize", body))["tokens"]
        detok = await self._post_json(f"{self._server_root}/detokenize", {"model": self.model, "tokens": tokens})
        self._memo.put(key, detok["prompt"])
        return detok["prompt"]

    # ---- helpers -----------------------------------------------------------------------------

    def _body(self, request: GenerationRequest, request_id: str, *, stream: bool) -> dict[str, Any]:
        params = request.params
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "stream": stream,
            **({"stream_options": {"include_usage": True}} if stream else {}),
            "priority": request.priority if self.supports_priority else 0,
            "request_id": request_id,
            **params.extra,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        if request.messages is not None:
            body["messages"] = request.messages
        elif request.prompt_token_ids is not None:
            body["prompt"] = list(request.prompt_token_ids)
            if self.max_model_len and len(request.prompt_token_ids) + params.max_tokens > self.max_model_len:
                raise _too_long(self.name, f"{len(request.prompt_token_ids)} prompt tokens + max_tokens="
                                f"{params.max_tokens} exceed the context window of {self.max_model_len} tokens")
        else:
            body["prompt"] = request.prompt
        return body

    async def _post_json(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        client = self._require()
        try:
            response = await client.post(url, json=body)
        except (httpx.ConnectError, httpx.ConnectTimeout) as err:
            raise EngineUnavailable(self.name, f"cannot reach {self.base_url} ({err})", _UNREACHABLE_REMEDY) from err
        except httpx.TransportError as err:
            raise EngineDied(self.name, f"{url} failed ({type(err).__name__}: {err})",
                             "check that the server is still running and read its log") from err
        if response.status_code >= 400:
            raise self._http_error(response)
        return response.json()

    def _http_error(self, response: httpx.Response) -> EngineError:
        message = _error_message(response)
        if response.status_code == 400 and any(m in message.lower() for m in _CONTEXT_MARKERS):
            return _too_long(self.name, message)
        return EngineError(self.name, f"HTTP {response.status_code} from {response.url.path}: {message}",
                           "fix the request, or read the server log if the server failed")

    def _require(self) -> httpx.AsyncClient:
        if self._client is None:
            raise EngineUnavailable(self.name, "the client is not started", "call `await engine.start()` first")
        return self._client


class _Memo:
    """A small least-recently-used map."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any) -> Any:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


async def _events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """Server-sent events of an OpenAI stream, decoded, until `[DONE]`; the body is then read
    to its end, since httpx drops (does not pool) a connection whose response was closed early."""
    lines = response.aiter_lines()
    async for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            async for _ in lines:
                pass
            return
        event = json.loads(data)
        if "error" in event:  # vLLM reports mid-stream failures as an error event
            error = event["error"]
            message = str(error.get("message", error) if isinstance(error, dict) else error)
            if any(marker in message for marker in _ENGINE_DEAD_MARKERS):  # the server's engine process died
                raise EngineDied("vllm-openai", f"the server's engine died mid-stream: {message}",
                                 "restart the server (`accel up` restarts the one it started) and read its log")
            raise EngineError("vllm-openai", f"server error mid-stream: {message}", "read the server log")
        yield event


_HEAD_FIELDS = ("id", "created", "model", "system_fingerprint", "service_tier")


def _head(event: dict[str, Any]) -> dict[str, Any]:
    """A response's fields besides its choices and usage, those the event carries."""
    return {key: event[key] for key in _HEAD_FIELDS if event.get(key) is not None}


def _generation(usage: dict[str, Any], text: list[str], finish_reason: str | None, request_id: str,
                head: dict[str, Any] | None = None) -> Generation:
    details = usage.get("prompt_tokens_details") or {}
    return Generation(
        text="".join(text),
        prompt_tokens=usage.get("prompt_tokens", 0),
        completion_tokens=usage.get("completion_tokens", 0),
        cached_tokens=details.get("cached_tokens") or 0,
        finish_reason=finish_reason,
        request_id=request_id,
        response={**(head or {}), "usage": usage},
    )


def _whole_generation(payload: dict[str, Any], chat: bool, request_id: str) -> Generation:
    """A non-streamed completion's JSON as a `Generation`."""
    choice = (payload.get("choices") or [{}])[0]
    text = (choice.get("message") or {}).get("content") if chat else choice.get("text")
    return _generation(payload.get("usage") or {}, [text or ""], choice.get("finish_reason"), request_id, _head(payload))


def _error_message(response: httpx.Response) -> str:
    try:
        payload = response.json()
    except ValueError:
        return response.text[:500]
    error = payload.get("error", payload) if isinstance(payload, dict) else payload
    if isinstance(error, dict):
        return str(error.get("message") or error.get("detail") or error)
    return str(error)


def _too_long(engine: str, cause: str) -> PromptTooLong:
    return PromptTooLong(engine, cause, "shorten the prompt (fewer or smaller retrieved chunks), lower "
                         "max_tokens, or use a model with a longer context")
