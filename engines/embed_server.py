"""An embedding server (vLLM's pooling runner, TEI, Infinity) as an accel engine.

Clients call `POST /v1/embeddings` once per query (LangChain `OpenAIEmbeddings.embed_query`,
LlamaIndex `OpenAIEmbedding.get_query_embedding`), so a server under many queries sees one
small request each. This engine takes the requests of many queries in one `run` and sends
those that differ only in `input` as one request, their inputs concatenated; each caller gets
back its own slice of `data`, renumbered from 0. The fields beside `input` (model, dimensions,
encoding_format, user, ...) stay the client's own, so the vectors are the server's for exactly
those fields. Items are either `APICall`s (a client's own request, engine-call capture) or
`ServerEmbedRequest`s (one input, for lowered Embed nodes), whose vectors are decoded as the
openai SDK decodes them (base64 float32 -> Python floats).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from accel.engines.base import Engine, Health
from accel.engines.errors import EmptyBatch, EngineUnavailable, InvalidRequest
from accel.engines.http_client import connect_timeout, engine_client
from accel.engines.keepalive import client_limits
from accel.engines.llm.api_call import HOP_HEADERS, APICall, APIResponse

log = logging.getLogger("accel.engines.embed_server")

MAX_INPUTS = 256
"""Inputs one merged request carries at most; a client's own bigger request goes as it is."""

_REMEDY = "start the encoder servers with `accel up --encoders server`, or point ACCEL_EMBED_BASE_URL at a running server"
Input = str | tuple[int, ...]


@dataclass(frozen=True)
class ServerEmbedRequest:
    """One input and the request fields a client sends beside it (`params`: sorted items)."""

    input: Input
    params: tuple[tuple[str, Any], ...]


@dataclass
class _Part:
    """One batch item as `inputs` plus the fields and headers its request is sent with."""

    index: int
    inputs: list[Any]
    fields: dict[str, Any]
    url: str
    headers: list[tuple[str, str]]
    call: APICall | None

    def group(self) -> tuple[Any, ...]:
        token_ids = bool(self.inputs) and not isinstance(self.inputs[0], str)
        auth = tuple(v for k, v in self.headers if k.lower() == "authorization")
        return (self.url, auth, json.dumps(self.fields, sort_keys=True), token_ids)


def _inputs(value: Any) -> list[Any] | None:
    """An OpenAI `input` as a list of inputs (a text or a token-id list each), or None for a
    shape this engine does not merge (it is then sent as it came)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return [value]
    if isinstance(value, list) and value and (all(isinstance(v, str) for v in value)
                                               or all(isinstance(v, list) for v in value)):
        return list(value)
    return None


def decode_vector(embedding: Any) -> list[float]:
    """A response's embedding as the openai SDK returns it: floats as sent, base64 decoded as
    little-endian float32."""
    if isinstance(embedding, str):
        import numpy as np

        return np.frombuffer(base64.b64decode(embedding), dtype="float32").tolist()
    return embedding


PROFILE_LOOKUP_S = 5.0


def model_profile_name(model: str) -> str:
    """The engine name an embedding server's profile is saved under: its served model's."""
    return f"embed-server:{model}"


class EmbeddingServerEngine(Engine[APICall | ServerEmbedRequest, Any]):
    """`POST {base_url}/embeddings`, requests of many queries merged per compatible fields."""

    kind = "embed"

    def __init__(self, base_url: str, api_key: str = "EMPTY", *, max_inputs: int = MAX_INPUTS,
                 timeout_s: float = 600.0, connect_timeout_s: float | None = None, name: str | None = None,
                 stands_for: str | None = None) -> None:
        if max_inputs < 1:
            raise InvalidRequest("embed-server", f"max_inputs={max_inputs}", "pass a positive count")
        self.base_url = base_url.rstrip("/")
        self.stands_for = (stands_for or base_url).rstrip("/")
        """The server clients name: as a replica of it, their own requests come here instead."""
        self.name = name or f"embed-server:{self.base_url}"
        self.max_inputs = max_inputs
        self._api_key = api_key
        self._timeout = httpx.Timeout(timeout_s, connect=connect_timeout(connect_timeout_s))
        self._client: httpx.AsyncClient | None = None
        self.posts = 0
        """Requests sent to the server (merged ones count once)."""

    async def start(self) -> None:
        if self._client is None:
            self._client = engine_client(timeout=self._timeout,
                                         limits=client_limits(max_connections=None))

    async def stop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def _require(self) -> httpx.AsyncClient:
        if self._client is None:
            raise EngineUnavailable(self.name, "the engine is not started", "call start() first")
        return self._client

    def _part(self, index: int, item: APICall | ServerEmbedRequest) -> _Part | None:
        if isinstance(item, ServerEmbedRequest):
            value = item.input if isinstance(item.input, str) else list(item.input)
            headers = [("Authorization", f"Bearer {self._api_key}"), ("Content-Type", "application/json")]
            return _Part(index, [value], dict(item.params), f"{self.base_url}/embeddings", headers, None)
        if not isinstance(item, APICall):
            raise InvalidRequest(self.name, f"cannot embed {type(item).__name__}", "pass APICall or ServerEmbedRequest items")
        try:
            payload = json.loads(item.body)
        except ValueError:
            return None
        inputs = _inputs(payload.get("input")) if isinstance(payload, dict) else None
        if inputs is None or item.method != "POST":
            return None
        fields = {k: v for k, v in payload.items() if k != "input"}
        headers = [(k, v) for k, v in item.headers if k.lower() not in HOP_HEADERS]
        return _Part(index, inputs, fields, self._here(item.url), headers, item)

    def _here(self, url: str) -> str:
        """A client's URL for the server this engine stands for, on this engine's server."""
        if self.stands_for != self.base_url and url.startswith(self.stands_for + "/"):
            return self.base_url + url[len(self.stands_for):]
        return url

    async def run(self, batch: Sequence[APICall | ServerEmbedRequest]) -> list[Any]:
        if not batch:
            raise EmptyBatch(self.name, "run() got an empty batch", "send at least one request")
        results: list[Any] = [None] * len(batch)
        groups: dict[tuple[Any, ...], list[_Part]] = {}
        for index, item in enumerate(batch):
            part = self._part(index, item)
            if part is None:  # a request this engine does not understand goes as it came
                results[index] = await self._send_call(item)  # type: ignore[arg-type]
            else:
                groups.setdefault(part.group(), []).append(part)
        chunks = [chunk for parts in groups.values() for chunk in self._chunks(parts)]
        answers = await asyncio.gather(*(self._merged(chunk) for chunk in chunks))
        for chunk, answer in zip(chunks, answers, strict=True):
            for part, result in zip(chunk, answer, strict=True):
                results[part.index] = result
        return results

    def _chunks(self, parts: list[_Part]) -> list[list[_Part]]:
        """Whole parts packed in order into requests of at most `max_inputs` inputs."""
        chunks: list[list[_Part]] = []
        size = 0
        for part in parts:
            if chunks and size + len(part.inputs) <= self.max_inputs:
                chunks[-1].append(part)
                size += len(part.inputs)
            else:
                chunks.append([part])
                size = len(part.inputs)
        return chunks

    async def _merged(self, parts: list[_Part]) -> list[Any]:
        """One request for `parts`; with a refusal (a bad input among them) each part is sent
        on its own, so every caller gets the answer its own request gets."""
        first = parts[0]
        body = {**first.fields, "input": [value for part in parts for value in part.inputs]}
        if len(parts) == 1 and first.call is not None:
            return [await self._send_call(first.call)]
        response = await self._post(first.url, first.headers, json.dumps(body).encode(), first.call)
        if response.status != 200:
            if len(parts) > 1:
                log.info("%s: a merged request of %d was refused (%d); sending each alone", self.name, len(parts), response.status)
                return [result for part in parts for result in await self._merged([part])]
            raise self._refused(response)
        payload = json.loads(response.content)
        data = sorted(payload["data"], key=lambda item: item["index"])
        results, at = [], 0
        for part in parts:
            mine = data[at:at + len(part.inputs)]
            at += len(part.inputs)
            if part.call is None:
                results.append(decode_vector(mine[0]["embedding"]))
            else:
                own = {**payload, "data": [{**item, "index": i} for i, item in enumerate(mine)]}
                results.append(APIResponse(200, response.headers, json.dumps(own).encode()))
        return results

    def _refused(self, response: APIResponse) -> InvalidRequest:
        return InvalidRequest(self.name, f"the server answered {response.status}: {response.content[:300]!r}",
                             "check the model name and that each input fits the model's context")

    async def _send_call(self, call: APICall) -> APIResponse:
        return await self._post(self._here(call.url), [(k, v) for k, v in call.headers if k.lower() not in HOP_HEADERS],
                                call.body, call)

    async def _post(self, url: str, headers: list[tuple[str, str]], body: bytes, call: APICall | None) -> APIResponse:
        """Transport errors of a client's own request stay httpx's (its SDK retries and raises
        them as stock); those of accel's own requests are typed."""
        extensions = {"timeout": call.timeout} if call is not None and call.timeout else {}
        request = httpx.Request("POST", url, headers=headers, content=body, extensions=extensions)
        self.posts += 1
        try:
            response = await self._require().send(request)
        except (httpx.ConnectError, httpx.ConnectTimeout) as err:
            if call is not None:
                raise
            raise EngineUnavailable(self.name, f"cannot reach {url} ({err})", _REMEDY) from err
        kept = tuple((k, v) for k, v in response.headers.multi_items() if k.lower() not in HOP_HEADERS)
        return APIResponse(response.status_code, kept, response.content)

    async def profile_names(self) -> tuple[str, ...]:
        """Names a saved profile of this server may carry: its served model's, which `accel
        profile` saves under (a profile describes the model on its hardware and outlives the
        port: twins and restarted servers come back on another), then its own (profiles saved
        by URL before). One `GET /models`, given `PROFILE_LOOKUP_S` (a lookup, not the
        engine's work: a hung server fails its first real call, not this); the own name alone
        when that fails."""
        try:
            async with engine_client(timeout=PROFILE_LOOKUP_S) as client:
                response = await client.get(f"{self.base_url}/models", headers={"Authorization": f"Bearer {self._api_key}"})
                response.raise_for_status()
                model = str(response.json()["data"][0]["id"])
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
            return (self.name,)
        return (model_profile_name(model), self.name)

    async def served_model(self) -> str:
        """The first model the server lists (`GET /models`)."""
        response = await self._require().get(f"{self.base_url}/models")
        response.raise_for_status()
        return str(response.json()["data"][0]["id"])

    async def health(self) -> Health:
        """One real embedding with the first model the server lists."""
        began = time.perf_counter()
        try:
            model = await self.served_model()
            [vector] = await self.run([ServerEmbedRequest("health check", (("encoding_format", "float"), ("model", model)))])
        except Exception as err:  # health reports failures instead of raising them
            return Health(self.name, False, f"{type(err).__name__}: {err}")
        return Health(self.name, True, f"{len(vector)}-d vectors from {model} at {self.base_url}", time.perf_counter() - began)
