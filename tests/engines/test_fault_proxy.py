"""The fault proxy puts a fault where a test says, whatever the machine's load: answers held
after N events, every connection reset at the kill, new ones refused, and back on revive.
The upstream is a stdlib server writing a fixed event stream (no engine needed)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from accel.testing.faults import FaultProxy

EVENTS = [b'data: {"n": %d}\n\n' % i for i in range(20)] + [b"data: [DONE]\n\n"]
LEFT = threading.Event()
"""Set when the proxy closed its request of a `slow` answer (the server would stop generating)."""


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        events = EVENTS[-3:] if "short" in self.path else EVENTS
        stream = self.path.startswith("/v1/")
        body = b"".join(events) if stream else b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if stream else "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if "slow" in self.path:  # an answer still being generated: wait for the client to leave
            self.rfile.read(1)
            LEFT.set()


@pytest.fixture()
def upstream():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _read_events(url: str, path: str, seen: list[bytes]) -> None:
    with httpx.stream("POST", url + path, json={}, timeout=30) as response:
        for line in response.iter_lines():
            if line:
                seen.append(line.encode())


def test_forwards_everything_until_told(upstream):
    with FaultProxy(upstream) as proxy:
        seen: list[bytes] = []
        _read_events(proxy.url, "/v1/completions", seen)
        assert seen == [event.strip() for event in EVENTS]
        assert httpx.post(proxy.url + "/tokenize", json={}).json() == {"ok": True}
        assert proxy.generations == 1


def test_held_answers_are_cut_by_the_kill_and_new_ones_refused(upstream):
    with FaultProxy(upstream) as proxy:
        proxy.hold_generations(after_events=5)
        outcomes: list[tuple[list[bytes], BaseException | None]] = []

        def consume(path: str) -> None:
            seen: list[bytes] = []
            try:
                _read_events(proxy.url, path, seen)
                outcomes.append((seen, None))
            except BaseException as error:  # noqa: BLE001 - the outcome is what the test checks
                outcomes.append((seen, error))

        clients = [threading.Thread(target=consume, args=(path,))
                   for path in ["/v1/completions", "/v1/chat/completions", "/v1/short/completions"]]
        for client in clients:
            client.start()
        # the short answer (3 events) is held too: its last event is never sent
        assert proxy.wait_held(3, timeout_s=30) == 3
        assert not outcomes  # nobody finished
        proxy.kill()
        for client in clients:
            client.join(30)
        assert len(outcomes) == 3
        assert all(isinstance(error, httpx.HTTPError) for _, error in outcomes), outcomes
        assert sorted(len(seen) for seen, _ in outcomes) == [2, 5, 5]
        with pytest.raises(httpx.ConnectError):
            httpx.post(proxy.url + "/v1/completions", json={})

        proxy.revive()
        seen: list[bytes] = []
        _read_events(proxy.url, "/v1/completions", seen)
        assert len(seen) == len(EVENTS)


def test_a_non_streamed_answer_is_held_whole(upstream):
    with FaultProxy(upstream) as proxy:
        proxy.hold_generations(after_events=5)
        errors: list[BaseException] = []

        def post() -> None:
            try:
                httpx.post(proxy.url + "/completions", json={}, timeout=30)
            except httpx.HTTPError as error:
                errors.append(error)

        client = threading.Thread(target=post)
        client.start()
        assert proxy.wait_held(1, timeout_s=30) == 1
        proxy.kill()
        client.join(30)
        assert len(errors) == 1


def test_a_held_answer_leaves_the_server_and_a_wait_ends_at_the_kill(upstream):
    with FaultProxy(upstream) as proxy:
        proxy.hold_generations(after_events=5)
        LEFT.clear()
        errors: list[BaseException] = []

        def consume() -> None:
            try:
                _read_events(proxy.url, "/v1/slow/completions", [])
            except httpx.HTTPError as error:
                errors.append(error)

        client = threading.Thread(target=consume)
        client.start()
        assert proxy.wait_held(1, timeout_s=30) == 1
        assert LEFT.wait(30)  # held: the server's request is closed, the client's is not
        assert client.is_alive() and not errors
        waiter = threading.Thread(target=proxy.wait_held, args=(2, 300))
        waiter.start()
        proxy.kill()
        waiter.join(30)
        client.join(30)
        assert not waiter.is_alive()  # a wait for answers that will never come ends at the kill
        assert len(errors) == 1
