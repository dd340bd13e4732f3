"""A recording reverse proxy for an OpenAI-compatible server, on 127.0.0.1.

Fidelity tests point the stock app and the accelerated app at the same proxy and compare the
JSON bodies it saw: same prompts, same sampling parameters. Responses (streamed or not) are
relayed as they arrive, so the clients behave exactly as against the server itself.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger("accel.testing.proxy")

_HOP_HEADERS = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "host"})


@dataclass
class RecordedRequest:
    method: str
    path: str
    body: dict[str, Any] | None
    status: int = 0
    response: bytearray = field(default_factory=bytearray, repr=False)
    """The response body as relayed (a stream's server-sent events as the server sent them)."""

    def event_texts(self) -> list[str]:
        """The text of each choice of each server-sent event of a streamed completion, in order
        (vLLM puts several tokens in one event when its client lags, so this is where a
        client's chunks split)."""
        texts = []
        for line in bytes(self.response).splitlines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            for choice in json.loads(line[len(b"data: "):]).get("choices", []):
                delta = choice.get("delta")
                texts.append((delta.get("content") or "") if delta is not None else choice.get("text", ""))
        return texts


@dataclass
class RequestRecorder:
    """Thread-safe list of the requests a proxy forwarded."""

    requests: list[RecordedRequest] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    """The most generation requests (`.../completions`) forwarded at once since the last
    `take`: a client's concurrency."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def opened(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)

    def closed(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def take(self) -> list[RecordedRequest]:
        """The requests recorded so far, clearing the log (and `most_in_flight`)."""
        with self._lock:
            taken, self.requests = self.requests, []
            self.most_in_flight = self.in_flight
        return taken


class _Server(ThreadingHTTPServer):
    # socketserver's default listen backlog is 5: a stock `batch` whose threads open a dozen
    # connections at once (every response here closes its connection) then saw some of them
    # reset by the kernel ("Connection reset by peer" in the client)
    request_queue_size = 512
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One log record with the traceback, where socketserver prints a header and then the
        traceback to stderr: a busy fresh-clone run caught only the header of a fault proxy's
        error (the test ended between the two prints), 2026-11-27."""
        log.exception("test proxy: the request from %s failed", client_address)


class QuietHandler(BaseHTTPRequestHandler):
    """A test proxy's request handler: HTTP/1.1, no access log, the request read whole."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        return

    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def end_to_end_headers(self) -> dict[str, str]:
        """The request's headers less the hop-by-hop ones, to send upstream."""
        return {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}


class RecordingProxy:
    """Forwards every request to `upstream` (e.g. "http://127.0.0.1:8000") and records it.

        with RecordingProxy("http://127.0.0.1:8000") as proxy:
            llm = ChatOpenAI(base_url=proxy.url + "/v1", ...)
            ...
            bodies = [r.body for r in proxy.recorder.take()]
    """

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.recorder = RequestRecorder()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> RecordingProxy:
        self._thread = threading.Thread(target=self._server.serve_forever, name="accel-recording-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(QuietHandler):
            def _forward(self) -> None:
                raw = self.read_body()
                record = RecordedRequest(self.command, self.path, _json_or_none(raw))
                upstream = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=600)
                headers = self.end_to_end_headers()
                generation = self.path.endswith("/completions")
                if generation:
                    proxy.recorder.opened()
                try:
                    upstream.request(self.command, self.path, body=raw or None, headers=headers)
                    response = upstream.getresponse()
                    record.status = response.status
                    proxy.recorder.add(record)
                    self.send_response(response.status)
                    for key, value in response.getheaders():
                        if key.lower() not in _HOP_HEADERS:
                            self.send_header(key, value)
                    self.send_header("Connection", "close")
                    self.end_headers()
                    while chunk := response.read1(65536):
                        record.response += chunk
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client left mid-stream (a stream closed early): closing upstream aborts the request
                finally:
                    upstream.close()
                    if generation:
                        proxy.recorder.closed()
                    self.close_connection = True

            do_GET = do_POST = do_DELETE = _forward

        return Handler


def _json_or_none(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
