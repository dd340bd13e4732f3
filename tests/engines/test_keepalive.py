"""accel's clients of engine servers drop an idle connection before the server would close it
(engines/keepalive.py): a request after an idle gap opens a fresh connection instead of reusing
one the server may be closing. Against a minimal keep-alive HTTP server on a loopback socket,
with the client's expiry scaled down so the idle gap is short; no engines."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from accel.engines import keepalive
from accel.engines.embed_server import EmbeddingServerEngine, ServerEmbedRequest
from accel.engines.rerank_server import RerankServerEngine

EXPIRY_S = 0.05
IDLE_S = 0.3  # past the client's (scaled) expiry, well inside the server's keep-alive


class KeepAliveServer:
    """Answers /v1/embeddings and /score on kept-alive connections and counts the connections."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                lines = head.decode().split("\r\n")
                path = lines[0].split()[1]
                length = next(int(line.split(":")[1]) for line in lines if line.lower().startswith("content-length"))
                body = json.loads(await reader.readexactly(length))
                self.requests += 1
                if path.endswith("/embeddings"):
                    data = [{"index": i, "embedding": [0.5, 0.25]} for i, _ in enumerate(body["input"])]
                else:
                    data = [{"index": i, "score": 0.5} for i, _ in enumerate(body["text_1"])]
                out = json.dumps({"data": data}).encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(out), out))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def _embed(url: str) -> None:
    async with EmbeddingServerEngine(url) as engine:
        for _ in range(2):
            assert await engine.run([ServerEmbedRequest("a question", (("model", "m"),))]) == [[0.5, 0.25]]
            await asyncio.sleep(IDLE_S)  # the connection sits idle


async def _rerank(url: str) -> None:
    async with RerankServerEngine(url, "m") as engine:
        for _ in range(2):
            assert await engine.run([("q", "p")]) == [0.5]
            await asyncio.sleep(IDLE_S)


@pytest.mark.parametrize("use", [_embed, _rerank], ids=["embed-server", "rerank-server"])
@pytest.mark.parametrize(("expiry_s", "connections"), [(EXPIRY_S, 2), (60.0, 1)])
def test_a_connection_idle_past_the_expiry_is_not_reused(use: Callable[[str], object], expiry_s: float, connections: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keepalive, "KEEPALIVE_EXPIRY_S", expiry_s)
    server = KeepAliveServer()

    async def main() -> None:
        listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
        port = listening.sockets[0].getsockname()[1]
        async with listening:
            await use(f"http://127.0.0.1:{port}/v1")  # type: ignore[misc]

    asyncio.run(main())
    assert server.requests == 2 and server.connections == connections


def test_the_client_expiry_lies_inside_the_servers_keep_alive() -> None:
    assert keepalive.client_limits().keepalive_expiry == keepalive.KEEPALIVE_EXPIRY_S < keepalive.SERVER_KEEPALIVE_S / 2
