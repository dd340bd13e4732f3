"""A twin LLM server per test, on a virtual clock: every simulated wait is recorded and returns
at once (through the event loop), so tests assert behaviour and simulated time, never wall time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from accel.engines.offline.llm import build_llm
from accel.engines.twin.encoder_server import TwinEncoderServer
from accel.engines.twin.llm_server import TwinLLMServer
from accel.engines.twin.profile import load_profile


class VirtualClock:
    """Records each simulated wait; `hold(seconds)` makes waits of exactly that length block
    until `release()`."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.time = 0.0
        self._held: dict[float, asyncio.Event] = {}
        self._started: dict[float, asyncio.Event] = {}

    def hold(self, seconds: float) -> asyncio.Event:
        """Hold waits of `seconds`; the event returned is set when one begins."""
        self._held[seconds] = asyncio.Event()
        self._started[seconds] = asyncio.Event()
        return self._started[seconds]

    def release(self, seconds: float) -> None:
        self._held.pop(seconds).set()

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.time += seconds
        gate = self._held.get(seconds)
        if gate is not None:
            self._started[seconds].set()
            await gate.wait()
        await asyncio.sleep(0)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
async def make_twin(clock: VirtualClock) -> AsyncIterator[Callable[..., Awaitable[TwinLLMServer]]]:
    servers: list[TwinLLMServer] = []

    async def make(*, priority: bool = False) -> TwinLLMServer:
        server = TwinLLMServer(load_profile("h100-8b"), build_llm("tiny"), priority=priority, sleep=clock.sleep,
                               clock=clock.now)
        await server.start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        await server.close()


@pytest.fixture
async def embedder(clock: VirtualClock) -> AsyncIterator[TwinEncoderServer]:
    """An `h100-8b` embedding twin on the virtual clock."""
    server = TwinEncoderServer(load_profile("h100-8b"), "embed", sleep=clock.sleep, clock=clock.now)
    await server.start()
    yield server
    await server.close()


@pytest.fixture
async def reranker(clock: VirtualClock) -> AsyncIterator[TwinEncoderServer]:
    """An `h100-8b` rerank twin on the virtual clock."""
    server = TwinEncoderServer(load_profile("h100-8b"), "rerank", sleep=clock.sleep, clock=clock.now)
    await server.start()
    yield server
    await server.close()
