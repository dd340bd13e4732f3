"""A hook on httpx's transports, where the openai and cohere SDKs and accel's server engines all
send: what leaves the bench process, seen where it leaves. Installed by the harness for a run's
length only, never by accel (benchmarks/encoder_requests.py counts requests through it,
benchmarks/content_recording.py records responses).

The SDKs send through httpx's own transports; accel's engine clients through
`engines.http_client.AiohttpTransport`, httpx's interface over aiohttp's connections. Both are
hooked: a hook on httpx's alone saw none of accel's requests (every accel row counted 0 encoder
requests, and a recording held only stock's content)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from accel.engines.http_client import AiohttpTransport

After = Callable[[httpx.Response], None]
Before = Callable[[httpx.Request], After | None]
"""Called as a request leaves; may return a callback for its response (headers received)."""


@contextmanager
def intercepting(before: Before) -> Iterator[None]:
    """Every request sent through httpx's transports or accel's engine transport passes
    `before` while inside."""
    sync_send = httpx.HTTPTransport.handle_request
    async_sends = {kind: kind.handle_async_request for kind in (httpx.AsyncHTTPTransport, AiohttpTransport)}

    def handle_request(self: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
        after = before(request)
        response = sync_send(self, request)
        if after is not None:
            after(response)
        return response

    def hooked(send: Callable[..., Any]) -> Callable[..., Any]:
        async def handle_async_request(self: httpx.AsyncBaseTransport, request: httpx.Request) -> httpx.Response:
            after = before(request)
            response = await send(self, request)
            if after is not None:
                after(response)
            return response
        return handle_async_request

    httpx.HTTPTransport.handle_request = handle_request  # type: ignore[method-assign]
    for kind, send in async_sends.items():
        kind.handle_async_request = hooked(send)  # type: ignore[method-assign]
    try:
        yield
    finally:
        httpx.HTTPTransport.handle_request = sync_send  # type: ignore[method-assign]
        for kind, send in async_sends.items():
            kind.handle_async_request = send  # type: ignore[method-assign]
