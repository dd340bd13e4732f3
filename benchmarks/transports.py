"""A hook on httpx's transports, where the openai and cohere SDKs and accel's server engines all
send: what leaves the bench process, seen where it leaves. Installed by the harness for a run's
length only, never by accel (benchmarks/encoder_requests.py counts requests through it,
benchmarks/content_recording.py records responses)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx

After = Callable[[httpx.Response], None]
Before = Callable[[httpx.Request], After | None]
"""Called as a request leaves; may return a callback for its response (headers received)."""


@contextmanager
def intercepting(before: Before) -> Iterator[None]:
    """Every request sent through httpx's transports passes `before` while inside."""
    sync_send, async_send = httpx.HTTPTransport.handle_request, httpx.AsyncHTTPTransport.handle_async_request

    def handle_request(self: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
        after = before(request)
        response = sync_send(self, request)
        if after is not None:
            after(response)
        return response

    async def handle_async_request(self: httpx.AsyncHTTPTransport, request: httpx.Request) -> httpx.Response:
        after = before(request)
        response = await async_send(self, request)
        if after is not None:
            after(response)
        return response

    httpx.HTTPTransport.handle_request = handle_request  # type: ignore[method-assign]
    httpx.AsyncHTTPTransport.handle_async_request = handle_async_request  # type: ignore[method-assign]
    try:
        yield
    finally:
        httpx.HTTPTransport.handle_request = sync_send  # type: ignore[method-assign]
        httpx.AsyncHTTPTransport.handle_async_request = async_send  # type: ignore[method-assign]
