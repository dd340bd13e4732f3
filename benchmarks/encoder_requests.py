"""How many HTTP requests each system sends to the encoder servers, counted where they leave the
process: at httpx's transports, which the openai and cohere SDKs (stock) and accel's server
engines all send through. The servers' own counters cannot say it: vLLM counts each input of an
embeddings request as a request of its own.

Installed by the harness for the run's length only (never by accel), and read before and after
each system's run, as `prompt_cache` reads the LLM server's counters.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx

from accel.engines.twin.replay import EMBED_PATHS, RERANK_PATHS

from .transports import intercepting

ENCODER_PATHS = frozenset((*EMBED_PATHS, *RERANK_PATHS))


class RequestCounter:
    """Requests sent so far to each named server (matched by scheme, host and port)."""

    def __init__(self, servers: dict[str, str]) -> None:
        self._servers = {_origin(url): name for name, url in servers.items()}
        self._counts = dict.fromkeys(servers, 0)
        self._lock = threading.Lock()

    def seen(self, request: httpx.Request) -> None:
        """Count `request` if it asks a named server for vectors or scores; reads of a server's
        metrics or models (the twins' lag and CPU, read after every run) are not its work."""
        url = request.url
        name = self._servers.get((url.scheme, url.host, url.port))
        if name is not None and request.method == "POST" and url.path in ENCODER_PATHS:
            with self._lock:
                self._counts[name] += 1

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname or "", parts.port


@contextmanager
def counting(stack: Any) -> Iterator[RequestCounter | None]:
    """Count requests to the stack's encoder servers while inside (None: no encoder servers)."""
    servers = {name: url for name, url in (("embed", getattr(stack, "embed_base_url", None)),
                                           ("rerank", getattr(stack, "rerank_base_url", None))) if url}
    if not servers:
        yield None
        return
    counter = RequestCounter(servers)

    def seen(request: httpx.Request) -> None:
        counter.seen(request)

    with intercepting(seen):
        yield counter


def delta(counter: RequestCounter | None, before: dict[str, int] | None) -> dict[str, int] | None:
    """Requests per server since `before` (None without encoder servers)."""
    if counter is None or before is None:
        return None
    return {name: count - before[name] for name, count in counter.counts().items()}
