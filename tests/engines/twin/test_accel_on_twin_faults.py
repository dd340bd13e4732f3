"""A wrapped LangChain app against an LLM twin whose faults are scripted: the twin dies after N
generated tokens, or refuses connections. Each fault lands at the same point for the stock run
and the wrapped run, whatever the machine's load (counted in tokens, not seconds), so the two
are compared exactly: the same exception types for the same queries, nothing hangs, and the
same objects answer as stock does once a twin listens on the port again. (The real-engine
versions, through a fault proxy, are tests/engines/test_llm_outage.py and the real kill in
tests/engines/llm/test_server.py.)"""

from __future__ import annotations

import asyncio

import httpx
import pytest

import accel
from accel.engines.offline.llm import build_llm
from accel.engines.twin.llm_server import TwinLLMServer
from accel.engines.twin.profile import load_profile

QUESTIONS = [{"topic": t} for t in ("heaps", "json", "sorting", "regular expressions")]


class Twin:
    """An LLM twin on a fixed port, which a test can kill (a fault) and start again there."""

    def __init__(self) -> None:
        self.server: TwinLLMServer | None = None
        self.port = 0

    async def start(self) -> str:
        self.server = TwinLLMServer(load_profile("h100-8b"), build_llm("tiny"))
        base = await self.server.start(port=self.port)
        self.port = self.server.listener.port
        return base

    async def fault(self, **script) -> None:
        async with httpx.AsyncClient(base_url=self.server.listener.base_url) as client:
            assert (await client.post("/admin/faults", json=script)).status_code == 200

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()


@pytest.fixture
async def twin():
    twin = Twin()
    yield twin
    await twin.close()


def build(base_url: str, max_tokens: int):
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(base_url=base_url + "/v1", api_key="none", model="tiny", max_tokens=max_tokens, max_retries=0,
                      extra_body={"ignore_eos": True})
    return ChatPromptTemplate.from_template("Explain {topic} in Python.") | chat | StrOutputParser()


def kinds(results: list) -> list[str]:
    """Each result's exception type (stock's is LangChain's subclass of openai.APIConnectionError)."""
    import openai

    assert all(isinstance(r, (str, openai.APIConnectionError)) for r in results), results
    return [type(r).__module__ + "." + type(r).__name__ if isinstance(r, BaseException) else "answer" for r in results]


CONNECTION_ERROR = "langchain_openai.chat_models.base.OpenAIConnectionError"


async def test_a_twin_that_dies_mid_answer_fails_the_same_queries_with_stocks_types_and_the_app_recovers(twin) -> None:
    base = await twin.start()
    chain, long_chain = build(base, 8), build(base, 400)
    fast, fast_long = accel.wrap(chain), accel.wrap(long_chain)
    expected = await asyncio.to_thread(chain.batch, QUESTIONS)
    assert await asyncio.to_thread(fast.batch, QUESTIONS) == expected

    outcomes = {}
    for name, app in (("stock", long_chain), ("accel", fast_long)):
        await twin.fault(die_after_tokens=40)  # every answer is cut: 4 x 400 tokens wanted
        results = await asyncio.wait_for(asyncio.to_thread(app.batch, QUESTIONS, return_exceptions=True), 120)
        outcomes[name] = kinds(results)
        assert twin.server.engine.dead
        # down: stock and wrapped fail alike, at once (refused, not timed out)
        down = await asyncio.wait_for(asyncio.to_thread(app.batch, QUESTIONS[:1], return_exceptions=True), 60)
        outcomes[name + " down"] = kinds(down)
        await twin.close()
        await twin.start()  # a new twin on the same port
    assert outcomes["accel"] == outcomes["stock"] == [CONNECTION_ERROR] * 4, outcomes
    assert outcomes["accel down"] == outcomes["stock down"] == [CONNECTION_ERROR], outcomes
    # the same objects answer again, as stock's do
    assert await asyncio.to_thread(fast.batch, QUESTIONS) == expected == await asyncio.to_thread(chain.batch, QUESTIONS)


async def test_refused_connections_fail_alike_and_accepting_again_recovers(twin) -> None:
    base = await twin.start()
    chain = build(base, 8)
    fast = accel.wrap(chain)
    expected = await asyncio.to_thread(chain.invoke, QUESTIONS[0])
    await twin.fault(refuse=True)
    twin.server.listener.reset_connections()  # gone as a stopped server is: kept-alive connections too
    stock_error = await asyncio.to_thread(chain.batch, QUESTIONS, return_exceptions=True)
    fast_error = await asyncio.wait_for(asyncio.to_thread(fast.batch, QUESTIONS, return_exceptions=True), 60)
    assert kinds(fast_error) == kinds(stock_error) == [CONNECTION_ERROR] * 4
    await twin.server.listener.accept()
    assert await asyncio.to_thread(fast.invoke, QUESTIONS[0]) == expected
