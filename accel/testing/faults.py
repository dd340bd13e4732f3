"""A fault-injecting reverse proxy for an OpenAI-compatible server, on 127.0.0.1.

Reliability tests used to kill a real server while streams were flowing and hoped the kill
landed mid-stream; on a loaded machine it landed before the first chunk or after the last. This
proxy puts the fault at a chosen point instead, whatever the timing:

    with FaultProxy(server_url) as proxy:            # clients use proxy.url + "/v1"
        proxy.hold_generations(after_events=10)       # relay 10 SSE events per answer, then hold
        ...start 16 generation requests...
        proxy.wait_held(16, timeout_s=300)            # every one is mid-answer now
        proxy.kill()                                  # reset every connection, refuse new ones
        ...every request has failed; new ones are refused...
        proxy.revive()                                # the "server" is back on the same port

A held answer never sends its last event, so a short answer is held too rather than finishing
before the fault; its request to the server is closed as it is held (the server stops
generating it), so answers held for a while cost the server nothing. Connections are reset
(RST), not closed, as a dead server's kernel does, and answers are relayed chunked, so a cut
body is never mistaken for a complete one. When `kill()` returns, every held connection has
been reset: a test can time the errors from there without the proxy's own work in it.
"""

from __future__ import annotations

import http.client
import logging
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from accel.testing.proxy import _HOP_HEADERS, QuietHandler, _Server

log = logging.getLogger("accel.testing.faults")


class FaultProxy:
    """Forwards every request to `upstream` until told to fail; see the module docstring.
    `port` 0 takes a free one; a given port stands in for a server that listened there."""

    def __init__(self, upstream: str, port: int = 0) -> None:
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self._lock = threading.Condition()
        self._hold_after: int | None = None
        self._held = 0
        self._down = False
        self._killed = threading.Event()
        self._upstreams: set[http.client.HTTPConnection] = set()
        self._held_clients: list[socket.socket] = []
        self._server = _Server(("127.0.0.1", port), self._handler())
        self._port = self._server.server_address[1]
        self._thread: threading.Thread | None = None
        self.generations = 0
        """Generation requests (`.../completions`) forwarded so far."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def held(self) -> int:
        with self._lock:
            return self._held

    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._server.serve_forever, name="accel-fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop_listening()
        self._release_everything()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def hold_generations(self, after_events: int) -> None:
        """From now on relay at most `after_events` server-sent events of each generation answer
        (never its last one; a non-streamed answer not at all), then hold it until `kill()`."""
        with self._lock:
            self._hold_after = after_events

    def wait_held(self, count: int, timeout_s: float) -> int:
        """Wait (bounded) until `count` answers are held, or the proxy is killed or stopped;
        returns how many are held."""
        with self._lock:
            self._lock.wait_for(lambda: self._held >= count or self._killed.is_set(), timeout_s)
            return self._held

    def kill(self) -> None:
        """The server dies: new connections are refused, and every held one is reset before
        this returns (the others, still being relayed, as their handlers see the cut)."""
        with self._lock:
            self._down = True
        self._stop_listening()
        with self._lock:
            held, self._held_clients = self._held_clients, []
        for connection in held:
            _reset(connection)
        self._release_everything()

    def revive(self) -> None:
        """The server is back, on the same port, forwarding everything again."""
        with self._lock:
            self._down = False
            self._hold_after = None
            self._held = 0
            self._held_clients = []
            self._killed.clear()
        self._server = _Server(("127.0.0.1", self._port), self._handler())
        self.start()

    def _stop_listening(self) -> None:
        if self._thread is not None:  # shutdown() waits for a serve_forever that must have run
            self._server.shutdown()
            self._thread = None
        self._server.server_close()

    def _release_everything(self) -> None:
        with self._lock:
            self._killed.set()
            self._lock.notify_all()  # a wait_held returns
            upstreams = list(self._upstreams)
        for upstream in upstreams:  # wakes a handler blocked reading the server
            if upstream.sock is not None:
                try:
                    upstream.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _hold(self, client: socket.socket, upstream: http.client.HTTPConnection) -> None:
        """Hold one answer until `kill()`: its server request is closed now (the server aborts
        it), its client connection is left waiting."""
        upstream.close()
        with self._lock:
            self._held += 1
            self._held_clients.append(client)
            self._lock.notify_all()
        log.debug("held answer %d", self._held)
        self._killed.wait()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(QuietHandler):
            def _forward(self) -> None:
                raw = self.read_body()
                upstream = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=600)
                generation = self.path.endswith("/completions")
                with proxy._lock:
                    proxy._upstreams.add(upstream)
                    hold_after = proxy._hold_after if generation else None
                    proxy.generations += generation
                if generation:
                    log.debug("forwarding %s %s%s", self.command, self.path,
                              "" if hold_after is None else f" (held after {hold_after} events)")
                try:
                    upstream.request(self.command, self.path, body=raw or None, headers=self.end_to_end_headers())
                    response = upstream.getresponse()
                    if hold_after is None:
                        self._start(response)
                        while chunk := response.read1(65536):
                            self._chunk(chunk)
                        self._chunk(b"")
                    elif "text/event-stream" in (response.getheader("Content-Type") or ""):
                        self._start(response)
                        self._relay_events(response, hold_after)
                        proxy._hold(self.connection, upstream)
                    else:
                        response.read()
                        proxy._hold(self.connection, upstream)
                except OSError:
                    # the client left, or kill() cut the server side; before any fault it is
                    # neither, and the client sees a connection error it cannot explain: say so
                    with proxy._lock:
                        faulted = proxy._down
                    if not faulted:
                        log.warning("fault proxy: relaying %s %s failed before any fault", self.command,
                                    self.path, exc_info=True)
                finally:
                    with proxy._lock:
                        proxy._upstreams.discard(upstream)
                        down = proxy._down
                    upstream.close()
                    self.close_connection = True
                    if down:
                        _reset(self.connection)

            def _start(self, response: http.client.HTTPResponse) -> None:
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in _HOP_HEADERS:
                        self.send_header(key, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()

            def _chunk(self, data: bytes) -> None:
                """One HTTP chunk; the empty one ends the body."""
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def _relay_events(self, response: http.client.HTTPResponse, limit: int) -> None:
                """Relay up to `limit` events, always keeping the latest one back: the answer's
                last event is never sent, however short the answer."""
                buffer, pending, sent = b"", None, 0
                while chunk := response.read1(65536):
                    buffer += chunk
                    while (end := buffer.find(b"\n\n")) >= 0:
                        event, buffer = buffer[:end + 2], buffer[end + 2:]
                        if pending is not None:
                            if sent == limit:
                                return
                            self._chunk(pending)
                            sent += 1
                        pending = event

            do_GET = do_POST = do_DELETE = _forward

        return Handler


def _reset(connection: socket.socket) -> None:
    """Close with a TCP reset, as the kernel answers for a process that died."""
    try:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()
    except OSError:
        pass
