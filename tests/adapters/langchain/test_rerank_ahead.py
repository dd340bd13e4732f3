"""Rerank ahead under a ContextualCompressionRetriever over a MultiQueryRetriever (real engines:
vLLM, MiniLM, the offline cross-encoder, pgvector): the wrapped retriever and a RAG chain over
it return what stock returns with the same LLM, embedding and search requests, and the
cross-encoder scores exactly the pairs stock scores, each once (when: the spans of
docs/benchmarks-twin.md; the runtime's fake-engine tests, tests/core/runtime/test_rerank_ahead.py).
A compression over a plain vector search is not scored ahead; a sheet answers a reranker call
only on the engine its scores came from, and explain() shows the calls it could not answer."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import pytest

import accel

from .fidelity import assert_same, run


def multi_query_rerank(vectorstore: Any, chat_model: Any, reranker_dir: Any, include_original: bool = True) -> Any:
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
    from langchain_classic.retrievers.multi_query import MultiQueryRetriever
    from langchain_community.cross_encoders import HuggingFaceCrossEncoder

    expand = MultiQueryRetriever.from_llm(retriever=vectorstore.as_retriever(search_kwargs={"k": 3}), llm=chat_model,
                                          include_original=include_original)
    reranker = CrossEncoderReranker(model=HuggingFaceCrossEncoder(model_name=str(reranker_dir)), top_n=2)
    return ContextualCompressionRetriever(base_compressor=reranker, base_retriever=expand)


@pytest.mark.engines
@pytest.mark.parametrize("include_original", [True, False], ids=["with the original question", "generated queries only"])
def test_scored_ahead_returns_what_stock_returns(vectorstore: Any, chat_model: Any, reranker_dir: Any, llm_proxy: Any,
                                                 questions: list[str], include_original: bool) -> None:
    retriever = multi_query_rerank(vectorstore, chat_model, reranker_dir, include_original)
    fast = accel.wrap(retriever)
    explained = fast.explain()
    assert "pairs scored ahead per search" in explained
    assert explained.count("rerank_ahead") >= (2 if include_original else 1)
    stock_run = run(retriever, questions[:3], llm_proxy)
    fast_run = run(fast, questions[:3], llm_proxy)
    assert_same(stock_run, fast_run)  # the pairs scored too: stock's multiset, so each once
    assert fast_run.scored


@pytest.mark.engines
def test_a_rag_chain_over_it_answers_as_stock(vectorstore: Any, chat_model: Any, reranker_dir: Any, llm_proxy: Any,
                                              questions: list[str]) -> None:
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate

    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    retriever = multi_query_rerank(vectorstore, chat_model, reranker_dir)
    chain = ({"context": itemgetter("question") | retriever | (lambda docs: "\n\n".join(d.page_content for d in docs)),
              "question": itemgetter("question")} | prompt | chat_model | StrOutputParser())
    inputs = [{"question": q} for q in questions[:3]]
    fast = accel.wrap(chain)
    assert_same(run(chain, inputs, llm_proxy), run(fast, inputs, llm_proxy))
    stock, ours = run(chain, inputs, llm_proxy, mode="batch"), run(fast, inputs, llm_proxy, mode="batch")
    assert ours.outputs == stock.outputs and ours.llm == stock.llm
    # the test model writes one query for every question: a batch embeds it once (de-duplicated)
    assert set(ours.embedded) == set(stock.embedded) and set(ours.scored) == set(stock.scored)


@pytest.mark.engines
def test_a_compression_over_one_search_is_not_scored_ahead(vectorstore: Any, reranker_dir: Any) -> None:
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
    from langchain_community.cross_encoders import HuggingFaceCrossEncoder

    reranker = CrossEncoderReranker(model=HuggingFaceCrossEncoder(model_name=str(reranker_dir)), top_n=2)
    retriever = ContextualCompressionRetriever(base_compressor=reranker, base_retriever=vectorstore.as_retriever())
    explained = accel.wrap(retriever).explain()
    assert "Rerank top_n=2" in explained and "pairs scored ahead per search" not in explained


@pytest.mark.engines
def test_a_sheet_answers_only_calls_on_its_own_engine(vectorstore: Any) -> None:
    from accel.adapters.common import rerank_ahead
    from accel.adapters.common.rerank_ahead import ScoreSheet
    from accel.engines.catalogue import reranker

    ours, other = reranker("/models/a"), reranker("/models/b")
    sheet = ScoreSheet.on(ours)
    pairs = [("q", "heaps"), ("q", "bisect")]
    sheet.fill(sheet.claim(pairs), [0.5, 0.25])
    before = rerank_ahead.misses.copy()
    assert sheet.answers(ours, pairs)
    assert not sheet.answers(other, pairs)
    assert not sheet.answers(ours, [*pairs, ("q", "functools")])
    assert rerank_ahead.misses - before == {"another engine": 1, "pairs missing from the sheet": 1}
    explained = accel.wrap(vectorstore.as_retriever()).explain()
    assert "not answered from a rerank-ahead score sheet" in explained
    assert "another engine" in explained and "pairs missing from the sheet" in explained
