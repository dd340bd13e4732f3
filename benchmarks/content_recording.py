"""Record what the engines answered: each LLM, embedding and rerank request the bench process
sends, with its response body, as JSON lines, for a twin to replay (engines/twin/replay.py;
validation check 1 in docs/twins.md).

Installed at httpx's transports, where the openai and cohere SDKs and accel's server engines all
send, for the whole `accel bench` run (`--record-content PATH`): the documents indexed before the
systems run are recorded too. A response is kept once its body has been read to the end, as the
client reads it; the recorder only copies bytes it is handed. Each record also says when its
request was sent and its body read to the end (`sent_at`, `done_at`, Unix seconds), so a
recording doubles as the run's engine-call timeline.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from accel.engines.twin.replay import EMBED_PATHS, LLM_PATHS, RERANK_PATHS

from .transports import intercepting

RECORDED_PATHS = frozenset((*LLM_PATHS, *EMBED_PATHS, *RERANK_PATHS))


class Recorder:
    """Requests and their responses, in the order the responses were read to the end."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def wants(self, request: httpx.Request) -> bool:
        return request.method == "POST" and request.url.path in RECORDED_PATHS

    def keep(self, request: httpx.Request, status: int, body: bytes, sent_at: float) -> None:
        done_at = time.time()
        try:
            sent = json.loads(request.content)
        except (ValueError, httpx.RequestNotRead):  # not JSON, or a streamed body: nothing to key it by
            return
        record = {"path": request.url.path, "status": status, "request": sent, "response": body.decode(errors="replace"),
                  "sent_at": round(sent_at, 4), "done_at": round(done_at, 4)}
        with self._lock:
            self.records.append(record)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, path.open("w") as out:
            for record in self.records:
                out.write(json.dumps(record, separators=(",", ":")) + "\n")


class _SyncTee(httpx.SyncByteStream):
    def __init__(self, stream: Any, done: Any) -> None:
        self._stream, self._done, self._body = stream, done, bytearray()

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._stream:
            self._body += chunk
            yield chunk
        self._done(bytes(self._body))

    def close(self) -> None:
        self._stream.close()


class _AsyncTee(httpx.AsyncByteStream):
    def __init__(self, stream: Any, done: Any) -> None:
        self._stream, self._done, self._body = stream, done, bytearray()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            self._body += chunk
            yield chunk
        self._done(bytes(self._body))

    async def aclose(self) -> None:
        await self._stream.aclose()


@contextmanager
def recording(path: Path) -> Iterator[Recorder]:
    """Record every engine request's response while inside; written to `path` on the way out."""
    recorder = Recorder()

    def tee(request: httpx.Request) -> Callable[[httpx.Response], None] | None:
        if not recorder.wants(request):
            return None
        sent_at = time.time()

        def read(response: httpx.Response) -> None:
            if "content-encoding" in response.headers:  # compressed: not what the client decodes
                return

            def keep(body: bytes) -> None:
                recorder.keep(request, response.status_code, body, sent_at)

            stream = response.stream
            response.stream = _AsyncTee(stream, keep) if isinstance(stream, httpx.AsyncByteStream) else _SyncTee(stream, keep)
        return read

    try:
        with intercepting(tee):
            yield recorder
    finally:
        recorder.write(path)
