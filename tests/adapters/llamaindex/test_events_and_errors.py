"""LlamaIndex instrumentation still sees the query, retrieval and synthesis events; bad input
fails as stock fails, without hanging and without touching other queries."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import accel

from .conftest import Recorder


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
def test_prompt_longer_than_the_context_raises(pg_index: Any, llm: Any) -> None:
    from accel.engines.errors import PromptTooLong

    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=2)
    question = "bread " * 3000
    with pytest.raises(Exception) as stock:
        engine.query(question)
    with pytest.raises(Exception) as ours:
        accel.wrap(engine).query(question)
    assert isinstance(ours.value, (type(stock.value), PromptTooLong)), (stock.value, ours.value)
