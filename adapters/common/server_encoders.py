"""Engine bindings for encoder servers: one shared embedding or rerank engine per server.

Every client of one server (LangChain `OpenAIEmbeddings`, LlamaIndex `OpenAIEmbedding`, in any
number of apps) reaches the same engine, so their requests are merged across queries: the
floor's captured requests and the lowered Embed nodes' `ServerEmbedRequest`s alike.
"""

from __future__ import annotations

from typing import Any

from accel.adapters.common.classes import is_exactly
from accel.engines.catalogue import EngineSpec, embed_server, rerank_server

__all__ = ["EMBED_FIELDS", "HOSTED_HOSTS", "embed_params", "embed_server", "openai_embed_engine", "rerank_server"]

HOSTED_HOSTS = ("api.openai.com",)
"""Hosted APIs: their clients are left alone (the floor does not route them either)."""

_SDK_HTTP_CLIENTS = (("openai._base_client", "SyncHttpxClientWrapper"), ("openai._base_client", "AsyncHttpxClientWrapper"))
"""The httpx clients the `openai` SDK makes for itself (a client given its own has another)."""

EMBED_FIELDS = frozenset({"model", "dimensions", "encoding_format", "user"})
"""Request fields beside `input` a lowered Embed reproduces, with the flat fields of an
`extra_body` (the SDK merges them into the body: vLLM's `truncate_prompt_tokens`, ...); others
(`extra_headers`, `timeout`, ...) keep the client on the floor."""
_FLAT = (str, int, float, bool)


def openai_embed_engine(*clients: Any) -> EngineSpec | str:
    """The embedding engine for `openai.OpenAI` / `AsyncOpenAI` clients of one server, or why
    a lowered Embed could not send their requests: an Embed request carries the body fields
    and the bearer key only, so a client with headers or query parameters of its own (default
    headers, an organization or project, a custom httpx client, a key provider) or a hosted
    API stays on the floor, where its own request is sent."""
    import openai

    roots, keys = set(), set()
    for client in clients:
        if type(client) not in (openai.OpenAI, openai.AsyncOpenAI):
            return f"its client is a {type(client).__name__}, not a plain OpenAI client"
        if not is_exactly(client._client, *_SDK_HTTP_CLIENTS):
            return "its client has an httpx client of its own"
        if client._custom_headers or client._custom_query or client.organization or client.project:
            return "its client sends headers or query parameters of its own"
        if getattr(client, "_api_key_provider", None) is not None or not isinstance(client.api_key, str):
            return "its API key comes from a provider function"
        if client.base_url.host in HOSTED_HOSTS:
            return f"a hosted API ({client.base_url.host})"
        roots.add(str(client.base_url).rstrip("/"))
        keys.add(client.api_key)
    if len(roots) != 1 or len(keys) != 1:
        return "its sync and async clients reach different servers or keys"
    return embed_server(roots.pop(), keys.pop())


def embed_params(fields: dict[str, Any]) -> tuple[tuple[str, Any], ...] | str:
    """The `ServerEmbedRequest.params` of a client whose `embeddings.create` gets `fields`
    (model, dimensions, ...; not `input`), or why they are not reproduced. The SDK asks for
    base64 when no `encoding_format` is given and decodes it, as the engine does; an explicit
    "base64" is handed to the caller undecoded, so it stays on the floor."""
    fields = dict(fields)
    extra_body = fields.pop("extra_body", None)
    extra = sorted(set(fields) - EMBED_FIELDS)
    if extra:
        return f"request options {extra} are not lowered"
    if extra_body is not None:
        if not isinstance(extra_body, dict) or not all(isinstance(v, _FLAT) for v in extra_body.values()):
            return "an extra_body with nested values is not lowered"
        if set(extra_body) & (set(fields) | {"input"}):
            return "an extra_body that overrides a request field is not lowered"
        fields |= extra_body
    if any(value is None for value in fields.values()):
        return "a request field set to None"
    body = {"encoding_format": "base64", **fields}
    if body["encoding_format"] not in ("base64", "float") or fields.get("encoding_format") == "base64":
        return f"encoding_format={body['encoding_format']!r} is handed back undecoded"
    return tuple(sorted(body.items()))
