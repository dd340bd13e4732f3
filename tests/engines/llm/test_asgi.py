"""The in-memory streaming ASGI transport the hosted engine reaches vLLM's app through, on
small ASGI apps: pieces stream as sent, failures look as they would behind uvicorn, closing a
response disconnects the app; and a hosted engine whose start fails leaves nothing open."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from accel.engines.errors import EngineError
from accel.engines.llm.asgi import ASGIStreamTransport
from accel.engines.llm.hosted import HostedServerEngine


def _client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=ASGIStreamTransport(app, root_path="/prefix"), base_url="http://anywhere")


async def test_pieces_stream_as_sent_and_closing_disconnects() -> None:
    release, seen = asyncio.Event(), []

    async def app(scope, receive, send):
        seen.append((scope["path"], (await receive())["body"]))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"x-app", b"1")]})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        await release.wait()
        seen.append((await receive())["type"])  # what the app hears once the client left

    transport = ASGIStreamTransport(app, root_path="/prefix")
    async with httpx.AsyncClient(transport=transport, base_url="http://anywhere") as client:
        async with client.stream("POST", "/prefix/v1/completions", content=b"{}") as response:
            assert response.status_code == 200 and response.headers["x-app"] == "1"
            pieces = response.aiter_bytes()
            assert await anext(pieces) == b"first"  # before the app finished: streamed
            release.set()
        assert not transport._tasks  # closing the response ended the app's task (vLLM aborts then)
    assert seen[0] == ("/v1/completions", b"{}")  # the base URL's prefix is taken off


async def test_failures_look_as_behind_uvicorn() -> None:
    async def before(scope, receive, send):
        raise ValueError("boom")

    async def midway(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"part", "more_body": True})
        raise ValueError("boom")

    async with _client(before) as client:
        response = await client.get("/x")
        assert (response.status_code, response.text) == (500, "Internal Server Error")
    async with _client(midway) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await client.get("/x")


async def test_a_failed_hosted_start_leaves_nothing_open(monkeypatch) -> None:
    async def unhealthy(scope, receive, send):
        await send({"type": "http.response.start", "status": 500, "headers": []})
        await send({"type": "http.response.body", "body": b"not ready"})

    async def build(self):
        return unhealthy

    monkeypatch.setattr(HostedServerEngine, "_build_app", build)
    engine = HostedServerEngine("http://nowhere.invalid/v1", "unused")
    with pytest.raises(EngineError, match="HTTP 500"):
        await engine.start()
    assert engine._client is None and engine._transport is None  # a retry starts afresh
