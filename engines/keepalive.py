"""Connection limits for accel's HTTP clients of engine servers: idle connections are dropped
well before a server would close them.

A server closes a keep-alive connection once it has sat idle for its timeout: 5 s in vLLM
(`VLLM_HTTP_TIMEOUT_KEEP_ALIVE`) and in uvicorn. httpx keeps an idle connection for 5 s as well,
and counts from when it read the response, after the server's timer started. A request sent on
a connection idle for nearly 5 s can then cross the server's close and fail with
`httpx.ReadError` before any response, and on a loaded machine the gaps between calls grow
enough to hit that window (a busy-machine run of the suite met it profiling an embedding server).
Dropping idle connections after `KEEPALIVE_EXPIRY_S` keeps every reuse inside the server's
timeout; reconnecting costs a local TCP handshake.
"""

from __future__ import annotations

import httpx

KEEPALIVE_EXPIRY_S = 2.0
SERVER_KEEPALIVE_S = 5.0
"""The shortest server keep-alive timeout accel expects: vLLM's and uvicorn's default."""


def client_limits(*, max_connections: int | None = 100, max_keepalive_connections: int | None = 20) -> httpx.Limits:
    """httpx's limits (its defaults unless given), with idle connections kept `KEEPALIVE_EXPIRY_S`."""
    return httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_keepalive_connections,
                        keepalive_expiry=KEEPALIVE_EXPIRY_S)
