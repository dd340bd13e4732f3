"""accel's engine HTTP clients are httpx clients on aiohttp's connections (engines/http_client.py):
every request is answered and a connection serves the next one, the connection cap holds, a
connection the server closed or a response left early is never reused, and each failure comes
back as the httpx exception httpcore raises for it (the floor hands them to the frameworks' SDKs,
and the engines type them). Against a loopback HTTP server the test scripts; no engines."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import httpx
import pytest

from accel.engines.http_client import READ_BYTES, AiohttpTransport, engine_client, tls_context

BIG = 1024 * 1024


class ScriptedServer:
    """Answers `GET /n` with `n` on kept-alive connections. `hold`: each answer waits for
    `release`; `close_after`: the connection closes after one answer; `/close` closes without
    answering; `/short` promises 100 bytes, sends 5 and closes; `/stream` sends a chunked body
    one piece and waits for the client to go; `/big` sends `BIG` bytes at once."""

    def __init__(self) -> None:
        self.connections = 0
        self.open = 0
        self.most_open = 0
        self.arrived = 0
        self.hold = False
        self.close_after = False
        self.release = asyncio.Event()
        self.written = asyncio.Event()
        self.changed = asyncio.Condition()
        """Notified as a request arrives and as a connection closes."""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                path = head.decode().split()[1].strip("/")
                async with self.changed:
                    self.arrived += 1
                    self.changed.notify_all()
                if path == "close":
                    break
                if path == "short":
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort")
                    await writer.drain()
                    break
                if path == "stream":
                    await self._stream(reader, writer)
                    break
                if path == "big":  # BIG bytes at once, then word that they are all written
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % BIG + b"x" * BIG)
                    await writer.drain()
                    self.written.set()
                    continue
                if self.hold and not await self._held(reader):
                    break  # the client left while its answer was held
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(path), path.encode()))
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

    async def _held(self, reader: asyncio.StreamReader) -> bool:
        """Wait for `release`, or for the client to close the connection (False): a client
        sends nothing else on a connection whose answer it awaits."""
        released = asyncio.ensure_future(self.release.wait())
        left = asyncio.ensure_future(reader.read(1))
        await asyncio.wait([released, left], return_when=asyncio.FIRST_COMPLETED)
        released.cancel()
        left.cancel()
        await asyncio.gather(released, left, return_exceptions=True)  # the reader is free again
        return not (left.done() and not left.cancelled() and left.result() == b"")

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One piece, then nothing until the client closes the connection (it sends no more)."""
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\npiece\r\n")
        await writer.drain()
        await reader.read(1)

    async def until(self, condition: Callable[[], bool]) -> None:
        """Wait for `condition`; 10 s without it fails the test instead of hanging it."""
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(condition), 10.0)


def _run(test: Callable[[ScriptedServer, str], Awaitable[None]]) -> ScriptedServer:
    server = ScriptedServer()

    async def main() -> None:
        listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
        async with listening:
            try:
                await test(server, f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}")
            finally:  # a failed check leaves no request held
                server.release.set()

    asyncio.run(main())
    return server


def test_a_burst_is_answered_and_its_connections_serve_the_next_one() -> None:
    async def test(server: ScriptedServer, url: str) -> None:
        server.hold = True
        async with engine_client() as client:
            for burst in (range(20), range(20, 40)):
                server.release.clear()
                answers = [asyncio.ensure_future(client.get(f"{url}/{i}")) for i in burst]
                await server.until(lambda: server.arrived >= burst.stop)  # all 20 in flight at once
                server.release.set()
                assert [int((await a).text) for a in answers] == list(burst)

    server = _run(test)
    assert server.connections == 20


def test_at_the_connection_limit_every_request_is_answered_within_it() -> None:
    async def test(server: ScriptedServer, url: str) -> None:
        async with engine_client(limits=httpx.Limits(max_connections=2, keepalive_expiry=60)) as client:
            answers = await asyncio.gather(*(client.get(f"{url}/{i}") for i in range(12)))
            assert [int(a.text) for a in answers] == list(range(12))

    server = _run(test)
    assert server.most_open == 2


def test_a_connection_the_server_closed_is_not_reused() -> None:
    async def test(server: ScriptedServer, url: str) -> None:
        server.close_after = True
        async with engine_client() as client:
            assert (await client.get(f"{url}/1")).text == "1"
            await server.until(lambda: server.open == 0)  # the server closed that connection
            assert (await client.get(f"{url}/2")).text == "2"

    server = _run(test)
    assert server.connections == 2


def test_a_stream_left_early_closes_its_connection_and_one_read_through_is_reused() -> None:
    """Closing a response before its end is how an engine aborts a request: the server must see
    the connection go (vLLM then aborts the generation)."""

    async def test(server: ScriptedServer, url: str) -> None:
        async with engine_client() as client:
            async with client.stream("GET", f"{url}/stream") as response:
                async for piece in response.aiter_bytes():
                    assert piece == b"piece"
                    break
            await server.until(lambda: server.open == 0)
            for i in range(3):
                assert (await client.get(f"{url}/{i}")).text == str(i)

    server = _run(test)
    assert server.connections == 2  # the stream's, then one for the three reads


def test_cancelling_a_request_in_flight_closes_its_connection() -> None:
    """How a cancelled query aborts a non-streamed generation: its connection goes."""

    async def test(server: ScriptedServer, url: str) -> None:
        server.hold = True
        async with engine_client() as client:
            waiting = asyncio.ensure_future(client.get(f"{url}/1"))
            await server.until(lambda: server.arrived == 1)
            waiting.cancel()
            await server.until(lambda: server.open == 0)
            assert waiting.cancelled()

    _run(test)


def test_a_body_that_arrived_whole_is_read_in_pieces_with_the_loop_running_between() -> None:
    """aiohttp hands over all it holds at once: 1,500 server-sent events that had piled up while
    the reader waited for the CPU were parsed in one step, and a cancel meant for that stream
    landed after its end. Each read takes at most `READ_BYTES`, after a pass through the loop."""

    async def test(server: ScriptedServer, url: str) -> None:
        loop = asyncio.get_running_loop()
        ticks = 0
        ticking: asyncio.Handle | None = None

        def tick() -> None:  # one call per pass of the loop: it counts the passes, with no timer
            nonlocal ticks, ticking
            ticks += 1
            ticking = loop.call_soon(tick)

        tick()
        pieces: list[tuple[int, int]] = []
        try:
            async with engine_client() as client, client.stream("GET", f"{url}/big") as response:
                await server.written.wait()  # the body waits in the sockets' buffers
                async for piece in response.aiter_raw():
                    pieces.append((len(piece), ticks))
        finally:
            assert ticking is not None
            ticking.cancel()
        assert sum(size for size, _ in pieces) == BIG
        assert max(size for size, _ in pieces) <= READ_BYTES
        assert all(later > earlier for (_, earlier), (_, later) in zip(pieces, pieces[1:]))

    _run(test)


@pytest.mark.parametrize(("path", "raised"), [
    ("close", httpx.RemoteProtocolError),  # closed before answering
    ("short", httpx.RemoteProtocolError),  # closed before the promised body ended
])
def test_a_connection_broken_by_the_server_is_httpxs_error(path: str, raised: type[Exception]) -> None:
    async def test(server: ScriptedServer, url: str) -> None:
        async with engine_client() as client:
            with pytest.raises(raised) as caught:
                await client.get(f"{url}/{path}")
            assert caught.value.request.url.path == f"/{path}"

    _run(test)


def test_no_answer_within_the_read_timeout_is_a_read_timeout() -> None:
    async def test(server: ScriptedServer, url: str) -> None:
        server.hold = True
        async with engine_client(timeout=httpx.Timeout(10.0, read=0.2)) as client:
            with pytest.raises(httpx.ReadTimeout):
                await client.get(f"{url}/1")

    _run(test)


def test_a_refused_connection_is_a_connect_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def main() -> None:
        async with engine_client() as client:
            with pytest.raises(httpx.ConnectError):
                await client.get(f"http://127.0.0.1:{port}/")

    asyncio.run(main())


def test_one_client_serves_requests_from_two_event_loops() -> None:
    """A session is bound to its loop: each loop the client is used on gets its own."""
    client = engine_client()

    async def test(server: ScriptedServer, url: str) -> None:
        assert (await client.get(f"{url}/7")).text == "7"

    _run(test)
    _run(test)
    asyncio.run(client.aclose())


def test_engine_clients_share_one_verifying_tls_context() -> None:
    """Building a TLS context loads the CA bundle (~50 ms of CPU): engine clients, made on the
    event loop when an engine attaches, share one, and it still verifies servers."""
    import ssl

    first, second = engine_client(), engine_client()
    transports = [client._transport for client in (first, second)]  # noqa: SLF001
    assert all(isinstance(t, AiohttpTransport) and t._ssl is tls_context() for t in transports)  # noqa: SLF001
    assert tls_context().verify_mode is ssl.CERT_REQUIRED and tls_context().check_hostname
