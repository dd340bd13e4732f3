"""Refine chains, tree_summarize levels, accumulate, reranking and cutoffs: same answers,
sources and generation requests as the stock query engine."""

from __future__ import annotations

from typing import Any

import pytest

import accel

from .conftest import make_llm
from .test_query_engine import compare


@pytest.mark.engines
@pytest.mark.parametrize("mode", ["refine", "accumulate", "tree_summarize"])
def test_multi_call_modes(pg_index: Any, llm: Any, llm_proxy: Any, mode: str) -> None:
    compare(pg_index.as_query_engine(llm=llm, similarity_top_k=3, response_mode=mode), llm_proxy)


@pytest.mark.engines
def test_tree_summarize_levels(pg_index: Any, llm_proxy: Any, vllm_server: Any) -> None:
    """A window too small for all chunks: tree_summarize summarises level by level, the calls
    of a level batched together."""
    small = make_llm(llm_proxy, vllm_server, context_window=150)
    compare(pg_index.as_query_engine(llm=small, similarity_top_k=5, response_mode="tree_summarize"), llm_proxy)


@pytest.mark.engines
def test_window_too_small_raises_the_stock_error(pg_index: Any, llm_proxy: Any, vllm_server: Any) -> None:
    small = make_llm(llm_proxy, vllm_server, context_window=150)
    engine = pg_index.as_query_engine(llm=small, similarity_top_k=5, response_mode="compact")
    with pytest.raises(ValueError, match="not positive") as stock:
        engine.query("music at dawn")
    with pytest.raises(ValueError, match="not positive") as ours:
        accel.wrap(engine).query("music at dawn")
    assert type(ours.value) is type(stock.value)


@pytest.mark.engines
@pytest.mark.parametrize("chat", [False, True])
def test_no_max_tokens(pg_index: Any, llm_proxy: Any, vllm_server: Any, chat: bool) -> None:
    """Without max_tokens stock sends none: the completions API then stops at 16 tokens, the
    chat API at the end of the window; accel asks for exactly that, so the answers match."""
    unbounded = make_llm(llm_proxy, vllm_server, max_tokens=None, is_chat_model=chat)
    engine = pg_index.as_query_engine(llm=unbounded, similarity_top_k=2)
    fast = accel.wrap(engine)
    question = "music at dawn"
    assert fast.query(question).response == engine.query(question).response


@pytest.mark.engines
def test_rerank_and_cutoff(pg_index: Any, llm: Any, llm_proxy: Any, reranker_dir: Any) -> None:
    from llama_index.core.postprocessor import SentenceTransformerRerank, SimilarityPostprocessor

    rerank = SentenceTransformerRerank(model=str(reranker_dir), top_n=2, device="cpu")
    cutoff = SimilarityPostprocessor(similarity_cutoff=0.2)
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=5, node_postprocessors=[cutoff, rerank])
    assert "SentenceTransformerRerank(top_n=2) -> Rerank" in accel.wrap(engine).explain()
    compare(engine, llm_proxy)


@pytest.mark.engines
def test_an_empty_answer_from_the_only_chunk_is_stocks_empty_response(pg_index: Any, llm_proxy: Any,
                                                                       vllm_server: Any) -> None:
    """Stop strings that the tiny model's answers start with make every answer empty: stock
    refine makes one call for the one chunk and answers "Empty Response", and so must accel.
    Found with a reranker whose order led the tiny model to an empty answer: accel took it for
    a refine plan that no longer fits, and stock code sent the query's call a second time."""
    from .conftest import QUESTIONS, make_llm

    llm = make_llm(llm_proxy, vllm_server, additional_kwargs={"stop": [" ", "u", "a", "m"]})
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=2)
    assert [engine.query(q).response for q in QUESTIONS[:2]] == ["Empty Response"] * 2  # what this test needs
    compare(engine, llm_proxy)


@pytest.mark.engines
def test_cutoff_removing_every_node_gives_empty_response(pg_index: Any, llm: Any, llm_proxy: Any) -> None:
    from llama_index.core.postprocessor import SimilarityPostprocessor

    engine = pg_index.as_query_engine(llm=llm, node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=1.5)])
    llm_proxy.recorder.take()
    stock, fast = engine.query("baking bread"), accel.wrap(engine).query("baking bread")
    assert fast.response == stock.response == "Empty Response"
    assert fast.source_nodes == stock.source_nodes == []


@pytest.mark.engines
@pytest.mark.parametrize("mode", ["reciprocal_rerank", "relative_score"])
def test_query_fusion_retriever(pg_index: Any, memory_index: Any, llm: Any, llm_proxy: Any, mode: str) -> None:
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import QueryFusionRetriever

    fusion = QueryFusionRetriever([pg_index.as_retriever(similarity_top_k=3)], llm=llm, num_queries=3,
                                  similarity_top_k=3, mode=mode, use_async=False)
    engine = RetrieverQueryEngine.from_args(fusion, llm=llm)
    explained = accel.wrap(engine).explain()
    assert "QueryFusionRetriever(3 queries" in explained and "Decode(query lines, splittable" in explained
    # the decode-pipelining pass, not the adapter, streams the generated queries into Embed/Search
    assert "decode_pipeline: expand decodes as a stream of query lines items" in explained
    assert "streams item by item" in explained
    compare(engine, llm_proxy)
    in_memory = QueryFusionRetriever([memory_index.as_retriever(similarity_top_k=2)], llm=llm, num_queries=2, use_async=False)
    opaque = RetrieverQueryEngine.from_args(in_memory, llm=llm)
    assert "opaque (run as-is)" in accel.wrap(opaque).explain()
    compare(opaque, llm_proxy)
