"""accel's engine HTTP clients plan their connection pool linearly (engines/http_pool.py): every
request is answered, the pool keeps `max_keepalive_connections` idle connections while others are
busy, hands an idle connection to one queued request, probes few sockets per request however many
are idle, and never reuses a connection the server closed. Against a loopback HTTP server that
holds answers until the test releases them; no engines."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpcore
import httpx
import pytest

from accel.engines import http_pool
from accel.engines.http_pool import EngineTransport, LinearConnectionPool, engine_client


class HoldingServer:
    """Answers `GET /n` with `n` on kept-alive connections; holds each answer until `release`
    (unless `hold` is off), and closes a connection after answering when `close_after` is set."""

    def __init__(self) -> None:
        self.connections = 0
        self.open = 0
        self.most_open = 0
        self.arrived = 0
        self.hold = True
        self.close_after = False
        self.release = asyncio.Event()
        self.changed = asyncio.Condition()
        """Notified as a request arrives and as a connection closes."""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                path = head.decode().split()[1]
                async with self.changed:
                    self.arrived += 1
                    self.changed.notify_all()
                if self.hold:
                    await self.release.wait()
                out = path.strip("/").encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(out), out))
                await writer.drain()
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            async with self.changed:
                self.open -= 1
                self.changed.notify_all()

    async def until(self, condition: Callable[[], bool]) -> None:
        async with self.changed:
            await self.changed.wait_for(condition)

    async def until_arrived(self, count: int) -> None:
        await self.until(lambda: self.arrived >= count)


def _run(test: Callable[[HoldingServer, str], Awaitable[None]]) -> HoldingServer:
    server = HoldingServer()

    async def main() -> None:
        listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
        async with listening:
            await test(server, f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}")

    asyncio.run(main())
    return server


def _pool(client: httpx.AsyncClient) -> httpcore.AsyncConnectionPool:
    pool = client._transport._pool  # type: ignore[attr-defined]
    assert isinstance(pool, LinearConnectionPool)
    return pool


def _idle(client: httpx.AsyncClient) -> int:
    return sum(c.is_idle() for c in _pool(client).connections)


def test_a_burst_is_answered_and_idle_connections_are_kept_beside_busy_ones() -> None:
    """httpcore 1.0 counted every connection against `max_keepalive_connections`, so with 20
    busy it closed each one that went idle; the linear plan keeps 8 idle ones."""

    async def test(server: HoldingServer, url: str) -> None:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=8, keepalive_expiry=60)
        async with engine_client(limits=limits) as client:
            try:
                await _burst_then_busy(server, client, url)
            finally:  # a failed check leaves no request held
                server.release.set()

    server = _run(test)
    assert server.connections == 20 + 12 + 1


async def _burst_then_busy(server: HoldingServer, client: httpx.AsyncClient, url: str) -> None:
    """20 at once, all answered; then 20 held while 4 quick ones pass."""
    first = [asyncio.ensure_future(client.get(f"{url}/{i}")) for i in range(20)]
    await server.until_arrived(20)
    server.release.set()
    assert [int((await r).text) for r in first] == list(range(20))
    assert _idle(client) == 8
    server.release.clear()
    busy = [asyncio.ensure_future(client.get(f"{url}/{i}")) for i in range(20, 40)]
    await server.until_arrived(40)
    assert _idle(client) == 0
    assert len(_pool(client).connections) == 20  # 8 reused, 12 new
    server.hold = False
    quick = [int((await client.get(f"{url}/{i}")).text) for i in range(40, 44)]
    assert quick == [40, 41, 42, 43]
    assert _idle(client) == 1  # one new connection, kept beside the 20 busy ones
    server.release.set()
    assert [int((await r).text) for r in busy] == list(range(20, 40))
    assert _idle(client) == 8



def test_at_the_connection_limit_each_released_connection_serves_one_queued_request(monkeypatch: pytest.MonkeyPatch) -> None:
    plans = 0
    plan = LinearConnectionPool._assign_requests_to_connections

    def counted(self: LinearConnectionPool) -> list:
        nonlocal plans
        plans += 1
        return plan(self)

    monkeypatch.setattr(LinearConnectionPool, "_assign_requests_to_connections", counted)

    async def test(server: HoldingServer, url: str) -> None:
        limits = httpx.Limits(max_connections=2, max_keepalive_connections=2, keepalive_expiry=60)
        async with engine_client(limits=limits) as client:
            server.release.set()
            answers = await asyncio.gather(*(client.get(f"{url}/{i}") for i in range(12)))
            assert [int(a.text) for a in answers] == list(range(12))

    server = _run(test)
    assert server.most_open == 2
    # one plan as each request arrives and one as each is released; a connection handed to every
    # queued request at once (httpcore 1.0) made each loser plan again
    assert plans <= 2 * 12 + 2


def test_few_sockets_are_probed_per_request_however_many_connections_are_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    probes = 0
    has_expired = httpcore.AsyncHTTPConnection.has_expired

    def counted(self: httpcore.AsyncHTTPConnection) -> bool:
        nonlocal probes
        probes += 1
        return has_expired(self)

    monkeypatch.setattr(httpcore.AsyncHTTPConnection, "has_expired", counted)
    monkeypatch.setattr(http_pool, "SWEEP_EVERY_S", 3600.0)

    async def test(server: HoldingServer, url: str) -> None:
        nonlocal probes
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=64, keepalive_expiry=60)
        async with engine_client(limits=limits) as client:
            burst = [asyncio.ensure_future(client.get(f"{url}/{i}")) for i in range(40)]
            await server.until_arrived(40)
            server.release.set()
            await asyncio.gather(*burst)
            assert _idle(client) == 40
            probes = 0
            for i in range(10):
                assert (await client.get(f"{url}/{i}")).text == str(i)
            assert probes <= 10  # the connection about to be reused; httpcore probed all 40 idle, twice a request

    _run(test)


def test_a_connection_the_server_closed_is_not_reused() -> None:
    async def test(server: HoldingServer, url: str) -> None:
        server.hold, server.close_after = False, True
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=8, keepalive_expiry=60)
        async with engine_client(limits=limits) as client:
            assert (await client.get(f"{url}/1")).text == "1"
            await server.until(lambda: server.open == 0)  # the server closed that connection
            assert (await client.get(f"{url}/2")).text == "2"

    server = _run(test)
    assert server.connections == 2


def test_a_proxied_transport_keeps_httpcores_pool_and_counts_it() -> None:
    before = http_pool.fallbacks["proxy"]
    transport = EngineTransport(proxy="http://127.0.0.1:9")
    assert not isinstance(transport._pool, LinearConnectionPool)
    assert http_pool.fallbacks["proxy"] == before + 1


def test_engine_clients_share_one_verifying_tls_context() -> None:
    """Building a TLS context loads the CA bundle (~50 ms of CPU): engine clients, made on the
    event loop when an engine attaches, share one, and it still verifies servers."""
    import ssl

    from accel.engines.http_pool import engine_client, tls_context

    first, second = engine_client(), engine_client()
    contexts = {id(client._transport._pool._ssl_context) for client in (first, second)}  # noqa: SLF001
    assert contexts == {id(tls_context())}
    assert tls_context().verify_mode is ssl.CERT_REQUIRED and tls_context().check_hostname
