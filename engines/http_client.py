"""accel's HTTP clients of engine servers: httpx's API over aiohttp's connections.

Every engine client (the LLM server's, the embedding and rerank servers') is an
`httpx.AsyncClient`: the engines, the floor's forwarded requests and their error handling speak
httpx, and a framework's SDK above the floor gets httpx's exceptions back, as stock does. Only
the transport is aiohttp's. httpx's own (httpcore and h11, in Python) cost the session loop
1.0-1.3 ms of CPU per LLM request against an `h100-8b` twin (256 in flight, 4-token answers),
about half of the loop's work on map-reduce-lcel; on aiohttp's C parser and connection pool the
same requests cost 0.28 ms (streamed: 0.45 against 1.1-1.3 ms). At GPU speeds one loop serves
every query's requests, so that is how soon a front end saturates (docs/scale-out.md).

`AiohttpTransport` keeps httpx's contract where accel relies on it:
- failures surface as httpx's exception types, chosen as httpcore would have raised them
  (`_HTTPX_ERRORS`), each carrying its request;
- `request.extensions["timeout"]` applies per request (connect, read, and pool as the time to get
  a connection); httpx's write timeout has no aiohttp counterpart;
- a response closed before its body ended closes its connection, so the server sees the client
  leave and aborts the request; one read to its end goes back to the pool;
- idle connections are dropped after `keepalive.KEEPALIVE_EXPIRY_S`, inside the servers' own
  keep-alive, and `max_connections` caps the open ones. `max_keepalive_connections` has no
  aiohttp counterpart: every idle connection is kept until it expires; accel's in-flight caps
  bound how many there are.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx

from accel.config import settings

from .keepalive import client_limits

_HTTPX_ERRORS: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),  # connecting, or waiting for a pooled connection
    (aiohttp.SocketTimeoutError, httpx.ReadTimeout),  # no bytes within the read timeout
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientConnectorError, httpx.ConnectError),  # refused, unreachable, unresolvable
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),  # closed before answering
    (aiohttp.ClientPayloadError, httpx.RemoteProtocolError),  # closed before the body ended
    (aiohttp.ClientResponseError, httpx.RemoteProtocolError),  # not a valid HTTP response
    (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
    (aiohttp.ClientError, httpx.ReadError),  # reset, and any other broken connection
    (asyncio.TimeoutError, httpx.ReadTimeout),
)
"""aiohttp's failures as the httpx exceptions httpcore raises for the same event, most specific
first (aiohttp's timeouts are also `asyncio.TimeoutError`s and some of its connection errors
`OSError`s)."""


def httpx_error(err: BaseException, request: httpx.Request) -> httpx.TransportError | None:
    """The httpx exception for aiohttp failure `err` on `request` (None: not an HTTP failure)."""
    for raised, mapped in _HTTPX_ERRORS:
        if isinstance(err, raised):
            return mapped(f"{type(err).__name__}: {err}" if str(err) else type(err).__name__, request=request)
    return None


READ_BYTES = 64 * 1024
"""The most one read of a body takes, as httpcore reads."""


class _Body(httpx.AsyncByteStream):
    """A response body read from aiohttp as it arrives, at most `READ_BYTES` a read, each read
    after a pass through the event loop. aiohttp hands over whatever it holds without
    suspending, and a socket read takes up to 256 KiB: a stream that arrived while its reader
    waited for the CPU (1,500 server-sent events of a busy vLLM-CPU) was then parsed whole in one
    step, no other task of the loop running meanwhile, so a cancel meant for it came after its
    end. httpcore's reads on anyio pass through the loop each time; these do too."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            while True:
                await asyncio.sleep(0)
                chunk = await self._response.content.read(READ_BYTES)
                if not chunk:
                    return
                yield chunk
        except (aiohttp.ClientError, asyncio.TimeoutError) as err:
            self._response.close()
            raise _mapped(err, self._request) from err

    async def aclose(self) -> None:
        if self._response.content.at_eof():
            self._response.release()  # read to its end: the connection serves the next request
        else:
            self._response.close()  # left early: the server sees the client go and aborts


def _mapped(err: BaseException, request: httpx.Request) -> BaseException:
    return httpx_error(err, request) or err


class AiohttpTransport(httpx.AsyncBaseTransport):
    """httpx's transport interface over an aiohttp session, made on the running loop at the
    first request (a session belongs to one loop; a client used on another loop gets another)."""

    def __init__(self, limits: httpx.Limits, ssl_context: ssl.SSLContext) -> None:
        self._limits = limits
        self._ssl = ssl_context
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            for old in [known for known in self._sessions if known.is_closed()]:
                del self._sessions[old]  # a finished loop's session died with its sockets
            connector = aiohttp.TCPConnector(limit=self._limits.max_connections or 0, limit_per_host=0,
                                             keepalive_timeout=self._limits.keepalive_expiry or 0, ssl=self._ssl)
            # httpx has already set every header it sends; aiohttp adds none of its own
            session = self._sessions[loop] = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None),
                skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"))
        return session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeout = request.extensions.get("timeout") or {}
        content = await request.aread()
        try:
            response = await self._session().request(
                request.method, str(request.url), headers=list(request.headers.multi_items()), data=content or None,
                allow_redirects=False, compress=None,
                timeout=aiohttp.ClientTimeout(total=None, connect=timeout.get("pool"), sock_connect=timeout.get("connect"),
                                              sock_read=timeout.get("read")))
        except (aiohttp.ClientError, asyncio.TimeoutError) as err:
            raise _mapped(err, request) from err
        return httpx.Response(response.status, headers=response.raw_headers, stream=_Body(response, request),
                              request=request, extensions={"http_version": b"HTTP/1.1",
                                                           "reason_phrase": (response.reason or "").encode()})

    async def aclose(self) -> None:
        sessions, self._sessions = self._sessions, {}
        here = asyncio.get_running_loop()
        for loop, session in sessions.items():
            if loop is here:
                await session.close()
            elif not loop.is_closed():
                asyncio.run_coroutine_threadsafe(session.close(), loop)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default verifying TLS context, built once per process. Building one loads the CA
    bundle, about 50 ms of CPU on the reference machine, which every engine client paid on the
    event loop when its engine attached (a query waiting; the loop blocked). Verification is
    unchanged; the environment's SSL_CERT_FILE / SSL_CERT_DIR are read at the first client."""
    return httpx.create_ssl_context()


def connect_timeout(given_s: float | None) -> float:
    """An engine's connect timeout: its own where given, else the setting
    (ACCEL_CONNECT_TIMEOUT_S, 3 s unless set), read when the engine is built."""
    return settings().connect_timeout_s if given_s is None else given_s


def engine_client(*, limits: httpx.Limits | None = None, **kwargs: Any) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` for an engine server on `AiohttpTransport`: idle connections
    dropped before the server would drop them (`keepalive.client_limits` unless `limits`), on
    the process's one TLS context (`tls_context`)."""
    return httpx.AsyncClient(transport=AiohttpTransport(limits or client_limits(), tls_context()), **kwargs)
