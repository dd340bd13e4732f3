"""`accel.wrap(index.as_query_engine(...))` answers as the stock engine does: same text, same
source nodes and scores, same generation requests, on the real engines with greedy decoding."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import accel
from accel.adapters.common.dropin import state_of
from accel.adapters.llamaindex.query_engine import LoweredQuery

from .conftest import QUESTIONS, llm_bodies, make_llm


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


@pytest.mark.engines
def test_extra_body_fields_reach_the_server_as_top_level_fields(pg_index: Any, llm_proxy: Any, vllm_server: Any) -> None:
    """`OpenAILike(additional_kwargs={"extra_body": ...})`: the openai SDK merges these fields
    into the request body (vLLM's own options: top_k, repetition_penalty, ignore_eos); the
    lowered LLM sends them the same way instead of leaving the LLM on the floor."""
    llm = make_llm(llm_proxy, vllm_server, additional_kwargs={"extra_body": {"top_k": 1, "repetition_penalty": 1.2}})
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=3)
    assert "CompactAndRefine on OpenAILike -> Prefill/Decode" in accel.wrap(engine).explain()
    compare(engine, llm_proxy, QUESTIONS[:1])
    accel.wrap(engine).query(QUESTIONS[1])
    answers = [r.body for r in llm_proxy.recorder.take() if r.path.endswith("/completions") and isinstance(r.body.get("prompt"), str)]
    assert answers and all(b["top_k"] == 1 and b["repetition_penalty"] == 1.2 and "extra_body" not in b for b in answers)


@pytest.mark.engines
def test_other_openai_request_fields_are_sent_as_the_stock_client_sends_them(pg_index: Any, llm_proxy: Any,
                                                                             vllm_server: Any) -> None:
    """`additional_kwargs` the openai SDK sends as body fields (penalties, logit_bias, user)
    once kept every LLM call of the app on the floor; the lowered LLM sends them unchanged."""
    fields = {"presence_penalty": 0.5, "frequency_penalty": 0.3, "logit_bias": {"0": -100}, "user": "accel-test"}
    llm = make_llm(llm_proxy, vllm_server, additional_kwargs=fields)
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=3)
    assert "CompactAndRefine on OpenAILike -> Prefill/Decode" in accel.wrap(engine).explain()
    compare(engine, llm_proxy, QUESTIONS[:1])

    def sent(query: Any) -> list[dict[str, Any]]:
        query(QUESTIONS[1])
        return [{k: r.body.get(k) for k in fields} for r in llm_proxy.recorder.take()
                if r.path.endswith("/completions") and isinstance(r.body.get("prompt"), str)]

    stock, ours = sent(engine.query), sent(accel.wrap(engine).query)
    assert stock and ours == stock and all(body == fields for body in ours)


def test_request_fields_accel_cannot_reproduce_keep_the_llm_on_the_floor() -> None:
    from llama_index.llms.openai_like import OpenAILike

    from accel.adapters.llamaindex.bindings import Unbound, bind_llm

    def bound(**fields: Any) -> Any:
        return bind_llm(OpenAILike(model="m", api_base="http://127.0.0.1:1/v1", api_key="EMPTY", max_tokens=8,
                                   additional_kwargs=fields))

    assert bound(presence_penalty=0.5, n=1).params.extra == {"top_p": None, "presence_penalty": 0.5, "n": 1}
    for fields, says in (({"tools": [{"type": "function"}]}, "change the response shape"),
                         ({"response_format": {"type": "json_object"}}, "change the response shape"),
                         ({"echo": True}, "change the response shape"), ({"n": 2}, "n > 1"),
                         ({"extra_headers": {"x": "1"}}, "not request fields"), ({"timeout": 5}, "not request fields")):
        refused = bound(**fields)
        assert isinstance(refused, Unbound) and says in refused.reason, fields
    overriding = bound(presence_penalty=0.5, extra_body={"presence_penalty": 1.0})
    assert isinstance(overriding, Unbound) and "['presence_penalty'] override" in overriding.reason


def test_extra_body_overriding_a_request_field_keeps_the_llm_on_the_floor() -> None:
    from llama_index.llms.openai_like import OpenAILike

    from accel.adapters.llamaindex.bindings import Unbound, bind_llm

    def bound(extra_body: Any) -> Any:
        return bind_llm(OpenAILike(model="m", api_base="http://127.0.0.1:1/v1", api_key="EMPTY", max_tokens=8,
                                   additional_kwargs={"extra_body": extra_body}))

    assert bound({"ignore_eos": True}).params.extra["ignore_eos"] is True
    for field in ("max_tokens", "model", "prompt", "stream"):
        refused = bound({field: 1})
        assert isinstance(refused, Unbound) and f"extra_body fields ['{field}'] override" in refused.reason
    assert isinstance(bound(["top_k"]), Unbound)
