"""A wrapped chat engine, retriever, workflow or agent fires stock's instrumentation: the same
events, in the same order, in spans of the same names nested as stock's (chat, retrieval,
embedding, LLM and agent-step events), on the real engines."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

import accel

pytestmark = [pytest.mark.engines]

_UUID = re.compile(r"-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def shape(log: list[tuple[Any, ...]]) -> list[tuple[str, ...]]:
    """The log with span ids reduced to their names: (enter, name, parent name), (exit, name),
    (event, event class, name of the span it belongs to)."""
    names: dict[str | None, str | None] = {None: None}
    out = []
    for entry in log:
        if entry[0] == "enter":
            names[entry[1]] = _UUID.sub("", entry[1])
            out.append(("enter", names[entry[1]], names.get(entry[2], "?")))
        elif entry[0] in ("exit", "drop"):
            out.append((entry[0], names.get(entry[1], "?")))
        else:
            event = entry[1]
            out.append(("event", event.class_name(), names.get(event.span_id, "?")))
    return out


@pytest.fixture
def chat_llm(llm_proxy: Any, vllm_server: Any) -> Any:
    from .conftest import make_llm

    return make_llm(llm_proxy, vllm_server, is_chat_model=True)


@pytest.mark.parametrize("mode", ["context", "condense_plus_context", "simple"])
def test_chat_engine_turns_fire_stock_events(pg_index: Any, chat_llm: Any, recorder: Any, mode: str) -> None:
    def turns(engine: Any) -> list[tuple[str, ...]]:
        recorder.take_log()
        engine.chat("Which animal sleeps in the storm?")
        engine.chat("And at night?")
        return shape(recorder.take_log())

    stock = turns(pg_index.as_chat_engine(chat_mode=mode, llm=chat_llm))
    ours = turns(accel.wrap(pg_index.as_chat_engine(chat_mode=mode, llm=chat_llm)))
    assert ours == stock
    names = {e[1] for e in stock if e[0] == "event"}
    assert "LLMChatStartEvent" in names
    if mode != "simple":
        assert {"RetrievalStartEvent", "EmbeddingStartEvent", "EmbeddingEndEvent", "RetrievalEndEvent"} <= names


def test_async_retriever_fires_stock_events(pg_index: Any, embed_model: Any, recorder: Any) -> None:
    from .conftest import fresh_pg_index

    async def retrieve(retriever: Any) -> list[tuple[str, ...]]:
        recorder.take_log()
        await retriever.aretrieve("baking bread")
        return shape(recorder.take_log())

    stock = asyncio.run(retrieve(fresh_pg_index(pg_index, embed_model).as_retriever(similarity_top_k=3)))
    ours = asyncio.run(retrieve(accel.wrap(fresh_pg_index(pg_index, embed_model).as_retriever(similarity_top_k=3))))
    assert ours == stock


def test_agent_steps_fire_stock_events(chat_llm: Any, recorder: Any) -> None:
    from llama_index.core.agent.workflow import FunctionAgent

    def multiply(a: float, b: float) -> float:
        """Useful for multiplying two numbers."""
        return a * b

    def run(agent: Any) -> list[str]:
        async def go() -> None:
            try:
                await agent.run("What is 1234 * 4567?")
            except Exception:  # noqa: BLE001 - the offline model's reply: stock's failure is part of what is compared
                pass

        recorder.take_log()
        asyncio.run(go())
        return [e[1] for e in shape(recorder.take_log()) if e[0] == "event"]

    llm = chat_llm.model_copy(update={"is_function_calling_model": True})
    stock = run(FunctionAgent(tools=[multiply], llm=llm))
    ours = run(accel.wrap(FunctionAgent(tools=[multiply], llm=llm)))
    assert ours == stock and stock
