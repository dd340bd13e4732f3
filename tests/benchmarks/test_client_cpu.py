"""`benchmarks/client_cpu.py` measures the LLM engine client on the transport accel ships and on
httpx's own, side by side: against an `h100-8b` LLM twin, each transport answers every round's
requests and gets a CPU figure per round, and the shipped engine really sends on aiohttp."""

from __future__ import annotations

import httpx

from accel.benchmarks.client_cpu import TRANSPORTS, _on_httpx, measure
from accel.engines.http_client import AiohttpTransport
from accel.engines.llm.openai_client import OpenAIServerEngine
from accel.engines.offline.llm import build_llm
from accel.engines.twin.llm_server import TwinLLMServer
from accel.engines.twin.profile import load_profile


async def test_each_transport_gets_a_figure_per_round() -> None:
    twin = TwinLLMServer(load_profile("h100-8b"), build_llm("tiny"))
    base = await twin.start()
    try:
        finished = twin.engine.scheduler.counters.finished
        before = sum(finished.values())
        figures = await measure(base + "/v1", "tiny", inflight=6, rounds=2, max_tokens=2)
        answered = sum(finished.values()) - before
    finally:
        await twin.close()
    assert list(figures) == list(TRANSPORTS)
    assert all(len(values) == 2 and all(v > 0 for v in values) for values in figures.values())
    # each transport's warm-up round and two measured rounds, besides the engines' start-up probes
    assert answered >= 2 * 3 * 6


async def test_the_baseline_is_the_same_engine_on_httpxs_transport() -> None:
    twin = TwinLLMServer(load_profile("h100-8b"), build_llm("tiny"))
    base = await twin.start()
    engine = OpenAIServerEngine(base + "/v1", "tiny")
    try:
        await engine.start()
        shipped = engine._client
        assert isinstance(shipped._transport, AiohttpTransport)  # noqa: SLF001
        await shipped.aclose()
        _on_httpx(engine)
        assert type(engine._client._transport) is httpx.AsyncHTTPTransport  # noqa: SLF001
        assert engine._client.headers["authorization"] == shipped.headers["authorization"]  # noqa: SLF001
    finally:
        await engine.stop()
        await twin.close()
