"""Wrapped LLM requests reuse their TCP connections to the server, as stock's do.

A 4-thread soak once opened a new connection for 250 of 257 wrapped requests (stock: 5): the
engine closed each streamed response at `data: [DONE]`, before the body's last chunk, and a
connection whose response was not read to its end is dropped, not pooled. A counting TCP
proxy in front of the server counts the connections each app opens (the recording proxy
answers `Connection: close`, so it cannot).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda

import accel

from ..tcp_proxy import TcpProxy, tcp_proxy
from .conftest import TINY

pytestmark = [pytest.mark.engines, pytest.mark.slow]

THREADS = 4
REQUESTS = 12  # a connection per request (the bug) opens 12 against threads + SLACK at most
SLACK = 2
"""Connections beyond those in flight at once that a client may open (a pooled connection
the server closed while idle, the engine's start-up probes)."""


@pytest.fixture
def proxy(vllm_server) -> Iterator[TcpProxy]:
    with tcp_proxy(vllm_server.base_url) as server:
        yield server


def _chat(proxy: TcpProxy):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(base_url=proxy.url + "/v1", api_key="EMPTY", model=TINY, temperature=0, max_tokens=8)


def chain(proxy: TcpProxy):
    """prompt | chat model | parser: accel runs the model's call on its own engine."""
    return ChatPromptTemplate.from_template("Question {n}: what is a heap?") | _chat(proxy) | StrOutputParser()


def user_code(proxy: TcpProxy):
    """The model called from user code: the floor forwards the SDK's own request."""
    model = _chat(proxy)
    return RunnableLambda(lambda n: model.invoke(f"Question {n}: what is a heap?").content)


def invoke(app) -> Callable[[int], str]:
    return app.invoke


def stream(app) -> Callable[[int], str]:
    return lambda n: "".join(app.stream(n))


def _new_connections(proxy: TcpProxy, call: Callable[[int], str], threads: int) -> int:
    call(0)  # the client (and accel's engine) start and open their first connection
    before = proxy.accepted
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(call, range(1, REQUESTS + 1)))
    return proxy.accepted - before


@pytest.mark.parametrize("build", [chain, user_code])
@pytest.mark.parametrize("call", [invoke, stream])
@pytest.mark.parametrize("threads", [1, THREADS])
def test_wrapped_requests_reuse_connections(proxy: TcpProxy, build, call, threads: int) -> None:
    stock = _new_connections(proxy, call(build(proxy)), threads)
    fast = _new_connections(proxy, call(accel.wrap(build(proxy))), threads)
    assert fast <= threads + SLACK, f"{fast} new connections for {REQUESTS} requests, {threads} at a time"
    assert fast <= stock + SLACK, f"accel opened {fast} connections, stock {stock}"
