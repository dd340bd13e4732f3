"""accel's HTTP clients of engine servers: httpx, with a connection pool whose bookkeeping grows
linearly with its connections.

httpcore 1.0's `AsyncConnectionPool` re-plans every connection on each request it enqueues and
each response it releases, and the plan is quadratic: for every connection it counts all of them
again to enforce `max_keepalive_connections`, and for every queued request it filters all of them
again. accel sends one engine's requests from many queries through one client, so its pools hold
dozens of connections (an LLM server with 64 streams in flight), and on `h100-8b` twins the pool
was a third of the session loop's CPU (research graph, py-spy) and a request cost 2 ms of CPU at
30 in flight against 0.65 ms alone. This is encode/httpcore#1035, open upstream.

`LinearConnectionPool` plans in one walk, probes idle connections for expiry once per
`SWEEP_EVERY_S` and otherwise only the one it is about to reuse, and fixes two upstream bugs on
the way:
- surplus idle connections are counted as idle ones (httpcore counted every connection, so past
  `max_keepalive_connections` it closed idle connections it should have kept, and reconnected);
- an idle connection goes to one queued request per plan, not to each (the others woke, found
  it taken, and planned again), and one a queued request holds is not closed as surplus.

It plans HTTP/1.1 only (an HTTP/2 connection multiplexes and stays available when assigned), so
`engine_client` installs it only on transports without HTTP/2, which is how accel builds them;
anything else keeps httpcore's own pool, logged and counted.
"""

from __future__ import annotations

import functools
import logging
import ssl
import time
from collections import Counter
from typing import Any

import httpcore
import httpx

from .keepalive import client_limits

log = logging.getLogger("accel.engines.http_pool")

Connection = httpcore.AsyncConnectionInterface

fallbacks: Counter[str] = Counter()
"""Clients left on httpcore's own pool, by reason."""

SWEEP_EVERY_S = 0.1
"""How often a plan probes every idle connection for expiry. Each probe is a `poll` of the socket
(has the server closed it?); between sweeps only the connection about to be reused is probed,
so an expired one is never reused and a dead one lingers at most this long past its expiry."""


class LinearConnectionPool(httpcore.AsyncConnectionPool):
    """httpcore's pool with a linear plan (see the module docstring); HTTP/1.1 connections only."""

    _swept_at = -SWEEP_EVERY_S
    """When the plan last probed every idle connection for expiry."""

    def _assign_requests_to_connections(self) -> list[Connection]:
        held = {id(request.connection) for request in self._requests if request.connection is not None}
        closing: list[Connection] = []
        now = time.monotonic()
        sweep = now - self._swept_at >= SWEEP_EVERY_S
        if sweep:
            self._swept_at = now
        kept: list[Connection] = []
        for connection in self._connections:
            if connection.is_closed():
                continue
            if sweep and connection.is_idle() and connection.has_expired():
                closing.append(connection)
                continue
            kept.append(connection)
        free = [c for c in kept if c.is_idle() and id(c) not in held]
        surplus = len(free) - self._max_keepalive_connections
        if surplus > 0:  # the longest-kept idle connections go first, as in httpcore
            dropped = {id(c) for c in free[:surplus]}
            closing += free[:surplus]
            kept = [c for c in kept if id(c) not in dropped]
            free = free[surplus:]
        self._connections = kept
        available = [c for c in free if c.is_available()]
        for pool_request in self._requests:
            if not pool_request.is_queued():
                continue
            origin = pool_request.request.url.origin
            connection = self._reusable(available, free, origin, closing)
            if connection is None and len(self._connections) < self._max_connections:
                connection = self.create_connection(origin)
                self._connections.append(connection)
            elif connection is None and free:  # full: make room by closing an idle connection (another origin's)
                spare = free.pop(0)
                if spare in available:
                    available.remove(spare)
                self._connections.remove(spare)
                closing.append(spare)
                connection = self.create_connection(origin)
                self._connections.append(connection)
            if connection is not None:
                pool_request.assign_to_connection(connection)
        return closing

    def _reusable(self, available: list[Connection], free: list[Connection], origin: httpcore.Origin,
                  closing: list[Connection]) -> Connection | None:
        """The first idle connection to `origin` that has not expired, taken out of `available`
        and `free`; expired ones met on the way are closed (the probe that a sweep skipped)."""
        while (connection := next((c for c in available if c.can_handle_request(origin)), None)) is not None:
            available.remove(connection)
            free.remove(connection)
            if not connection.has_expired():
                return connection
            self._connections.remove(connection)
            closing.append(connection)
        return None


class EngineTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with `LinearConnectionPool` where it applies."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if kwargs.get("http2"):
            self._fall_back("http2", "HTTP/2 multiplexes connections, which the linear plan does not model")
        elif type(self._pool) is not httpcore.AsyncConnectionPool:
            self._fall_back("proxy", f"httpx built a {type(self._pool).__name__}")
        else:
            self._pool.__class__ = LinearConnectionPool

    @staticmethod
    def _fall_back(reason: str, why: str) -> None:
        fallbacks[reason] += 1
        log.info("engine HTTP client keeps httpcore's own connection pool: %s", why)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default verifying TLS context, built once per process. Building one loads the CA
    bundle, about 50 ms of CPU on the reference machine, which every engine client paid on the
    event loop when its engine attached (a query waiting; the loop blocked). Verification is
    unchanged; the environment's SSL_CERT_FILE / SSL_CERT_DIR are read at the first client."""
    return httpx.create_ssl_context()


def engine_client(*, limits: httpx.Limits | None = None, **kwargs: Any) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` for an engine server: idle connections dropped before the server
    would drop them (`keepalive.client_limits` unless `limits`), planned by `LinearConnectionPool`,
    on the process's one TLS context (`tls_context`)."""
    return httpx.AsyncClient(transport=EngineTransport(limits=limits or client_limits(), verify=tls_context()),
                             **kwargs)
