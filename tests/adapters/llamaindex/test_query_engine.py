"""`accel.wrap(index.as_query_engine(...))` answers as the stock engine does: same text, same
source nodes and scores, same generation requests, on the real engines with greedy decoding."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import accel
from accel.adapters.common.dropin import state_of
from accel.adapters.llamaindex.query_engine import LoweredQuery

from .conftest import QUESTIONS, llm_bodies


def lowered(fast: Any) -> LoweredQuery:
    """The lowered query a wrapped `RetrieverQueryEngine` answers with."""
    state = state_of(fast)
    assert state is not None and isinstance(state.helper, LoweredQuery)
    return state.helper


def assert_same_response(stock: Any, fast: Any) -> None:
    assert type(fast) is type(stock)
    assert fast.response == stock.response
    assert [n.node.node_id for n in fast.source_nodes] == [n.node.node_id for n in stock.source_nodes]
    assert [n.node.get_content() for n in fast.source_nodes] == [n.node.get_content() for n in stock.source_nodes]
    assert [n.score for n in fast.source_nodes] == pytest.approx([n.score for n in stock.source_nodes], abs=1e-5)
    assert fast.metadata == stock.metadata


def compare(engine: Any, proxy: Any, questions: list[str] = QUESTIONS[:2]) -> None:
    fast = accel.wrap(engine)
    assert type(fast) is not type(engine) and isinstance(fast, type(engine))
    lowered(fast)
    proxy.recorder.take()
    stock_answers = [engine.query(q) for q in questions]
    stock_requests = llm_bodies(proxy)
    fast_answers = [fast.query(q) for q in questions]
    fast_requests = llm_bodies(proxy)
    for stock, ours in zip(stock_answers, fast_answers, strict=True):
        assert_same_response(stock, ours)
    assert stock_requests and fast_requests == stock_requests


@pytest.mark.engines
@pytest.mark.parametrize("mode", ["compact", "simple_summarize"])
def test_pgvector_compact_and_simple(pg_index: Any, llm: Any, llm_proxy: Any, mode: str) -> None:
    compare(pg_index.as_query_engine(llm=llm, similarity_top_k=3, response_mode=mode), llm_proxy)


@pytest.mark.engines
def test_in_memory_index(memory_index: Any, llm: Any, llm_proxy: Any) -> None:
    compare(memory_index.as_query_engine(llm=llm, similarity_top_k=2), llm_proxy)


@pytest.mark.engines
async def test_aquery_concurrent_matches_stock(pg_index: Any, llm: Any, llm_proxy: Any) -> None:
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=3)
    fast = accel.wrap(engine)
    stock = [await asyncio.to_thread(engine.query, q) for q in QUESTIONS]
    ours = await asyncio.gather(*(fast.aquery(q) for q in QUESTIONS))
    for s, o in zip(stock, ours, strict=True):
        assert_same_response(s, o)


@pytest.mark.engines
def test_explain_names_lowered_and_opaque(pg_index: Any, llm: Any) -> None:
    text = accel.wrap(pg_index.as_query_engine(llm=llm)).explain()
    assert "Embed" in text and "Search" in text and "Prefill/Decode" in text
    assert "opaque: none" in text
