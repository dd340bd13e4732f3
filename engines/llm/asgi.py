"""An httpx transport that serves requests from an ASGI app in this process, streaming.

httpx's own `ASGITransport` reads the whole response before returning it, which would turn a
streamed completion into one late chunk and leave no way to abort it. This one hands back the
response as soon as the app starts it, yields body pieces as the app sends them, and closing
the response tells the app the client went away (`http.disconnect`) and cancels what is left of
it, as a socket closing would: vLLM's OpenAI layer aborts the request then.

Failures look as they would over a socket to uvicorn: an app that raises before it answered
gives a 500 `Internal Server Error`, one that raises mid-body cuts the stream
(`httpx.RemoteProtocolError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import httpx

log = logging.getLogger("accel.engines.asgi")

ASGIApp = Callable[[MutableMapping[str, Any], Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]],
                   Awaitable[None]]

_END = object()
_INTERNAL_ERROR = {"status": 500, "headers": [(b"content-type", b"text/plain; charset=utf-8")],
                   "_body": b"Internal Server Error"}


class _AppFailed(Exception):
    """The app raised after it started its response."""


class _Body(httpx.AsyncByteStream):
    def __init__(self, pieces: asyncio.Queue[Any], task: asyncio.Task[None], gone: asyncio.Event) -> None:
        self._pieces = pieces
        self._task = task
        self._gone = gone

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            piece = await self._pieces.get()
            if piece is _END:
                return
            if isinstance(piece, _AppFailed):
                raise httpx.RemoteProtocolError(f"the in-process server failed mid-response: {piece}")
            yield piece

    async def aclose(self) -> None:
        """The client is gone: tell the app, and stop what it still runs."""
        self._gone.set()
        if not self._task.done():
            self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task


class ASGIStreamTransport(httpx.AsyncBaseTransport):
    """Requests to any host go to `app`; `root_path` is taken off request paths first (a
    client whose base URL is `http://host/prefix/v1` reaches the app's `/v1`)."""

    def __init__(self, app: ASGIApp, *, root_path: str = "") -> None:
        self._app = app
        self._root = root_path.rstrip("/")
        self._tasks: set[asyncio.Task[None]] = set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = b"".join([piece async for piece in request.stream])  # type: ignore[union-attr]
        gone = asyncio.Event()
        started: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
        pieces: asyncio.Queue[Any] = asyncio.Queue()
        delivered = False

        async def receive() -> dict:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            if message["type"] == "http.response.start":
                started.set_result(message)
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    pieces.put_nowait(bytes(message["body"]))
                if not message.get("more_body", False):
                    pieces.put_nowait(_END)

        async def serve() -> None:
            try:
                await self._app(self._scope(request), receive, send)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the server's own failure: answered as uvicorn would
                log.exception("in-process server failed on %s %s", request.method, request.url.path)
                if started.done():
                    pieces.put_nowait(_AppFailed(f"{type(err).__name__}: {err}"))
            finally:
                if not started.done():  # it never answered: a bare 500, as uvicorn sends
                    started.set_result(_INTERNAL_ERROR)
                pieces.put_nowait(_END)

        task = asyncio.create_task(serve(), name=f"asgi {request.method} {request.url.path}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        try:
            head = await asyncio.shield(started)
        except asyncio.CancelledError:
            gone.set()
            task.cancel()
            raise
        if "_body" in head:
            return httpx.Response(head["status"], headers=head["headers"], content=head["_body"], request=request)
        return httpx.Response(head["status"], headers=head.get("headers", []), stream=_Body(pieces, task, gone),
                              request=request)

    def _scope(self, request: httpx.Request) -> dict[str, Any]:
        path = request.url.path
        if self._root and path.startswith(self._root + "/"):
            path = path[len(self._root):]
        return {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": request.url.scheme,
            "path": path,
            "raw_path": path.encode(),
            "query_string": request.url.query,
            "root_path": "",
            "headers": [(key.lower(), value) for key, value in request.headers.raw],
            "server": (request.url.host, request.url.port or (443 if request.url.scheme == "https" else 80)),
            "client": ("127.0.0.1", 0),
        }

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
