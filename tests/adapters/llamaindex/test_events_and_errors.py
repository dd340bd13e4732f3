"""LlamaIndex instrumentation still sees the query, retrieval and synthesis events; bad input
fails as stock fails, without hanging and without touching other queries."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import accel

from .conftest import Recorder, make_llm


@pytest.mark.engines
def test_query_events_fire(pg_index: Any, llm: Any, recorder: Recorder) -> None:
    fast = accel.wrap(pg_index.as_query_engine(llm=llm, similarity_top_k=2))
    fast.query("music at dawn")
    for name in ("QueryStartEvent", "RetrievalStartEvent", "RetrievalEndEvent", "SynthesizeStartEvent",
                 "SynthesizeEndEvent", "QueryEndEvent"):
        assert name in recorder.events, name
    assert recorder.events.index("RetrievalEndEvent") < recorder.events.index("SynthesizeStartEvent")


@pytest.mark.engines
async def test_bad_input_fails_like_stock_and_spares_others(pg_index: Any, llm: Any) -> None:
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=2)
    fast = accel.wrap(engine)
    with pytest.raises(Exception) as stock:
        await engine.aquery(None)
    good = asyncio.ensure_future(fast.aquery("music at dawn"))
    with pytest.raises(Exception) as ours:
        await asyncio.wait_for(fast.aquery(None), 120)
    assert type(ours.value) is type(stock.value)
    assert (await asyncio.wait_for(good, 120)).response == (await engine.aquery("music at dawn")).response


@pytest.mark.engines
@pytest.mark.parametrize("context_window", [2048, 100_000])
def test_prompt_longer_than_the_context_raises_the_stock_error(pg_index: Any, llm_proxy: Any, vllm_server: Any,
                                                               context_window: int) -> None:
    """A window the app knows is too small: LlamaIndex's prompt helper raises ValueError. A
    window larger than the server's: the server's 400, which the stock OpenAI client raises as
    `openai.BadRequestError`; accel raises that same type (its PromptTooLong as the cause)."""
    from accel.engines.errors import PromptTooLong

    llm = make_llm(llm_proxy, vllm_server, context_window=context_window, max_retries=0)
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=2)
    question = "bread " * 3000
    with pytest.raises(Exception) as stock:
        engine.query(question)
    with pytest.raises(Exception) as ours:
        accel.wrap(engine).query(question)
    assert type(ours.value) is type(stock.value)
    assert str(ours.value) == str(stock.value) or isinstance(ours.value.__cause__, PromptTooLong)
    if context_window > 2048:
        import openai

        assert isinstance(ours.value, openai.BadRequestError) and ours.value.status_code == 400
