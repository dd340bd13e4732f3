"""Apps with server embeddings and a server reranker (real vLLM pooling servers: the packaged
MiniLM for /v1/embeddings, the offline cross-encoder for Cohere's /v2/rerank). A stock LlamaIndex
query engine (`OpenAILikeEmbedding`, `CohereRerank` postprocessor), wrapped unchanged, answers
what stock answers and ranks the same nodes, with scores equal to float32 rounding (vLLM-CPU's
scores move in the 8th digit with batch composition, stock's too); under 16 concurrent queries
it sends at most a quarter of stock's requests to the rerank server. LangChain's `CohereRerank`
cannot talk to vLLM (stock fails); wrapped, it fails the same way. The servers are the session's
(`embed_url`, `rerank_url`, tests/conftest.py).

ACCEL_TEST_EMBED_URL / ACCEL_TEST_RERANK_URL reuse servers already running (local iteration).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import accel
from accel.adapters.common import floor
from accel.engines.encoder_servers import RERANK_SERVED_NAME
from accel.testing.proxy import RecordingProxy
from tests.encoder_servers import rerank_url  # noqa: F401  (the session's server; importable from here)

from .test_server_embeddings import (  # noqa: F401  (module fixtures; the servers are the session's)
    CONCURRENT, QUESTIONS, TINY, doc_texts, embed_proxy, embed_url, lc_embeddings, li_embed_model)

pytest.importorskip("cohere", reason="needs cohere")
pytestmark = [pytest.mark.engines, pytest.mark.slow]


@pytest.fixture(scope="module")
def rerank_proxy(rerank_url: str) -> Iterator[RecordingProxy]:
    with RecordingProxy(rerank_url.removesuffix("/v1")) as proxy:
        yield proxy


def rerank_requests(proxy: RecordingProxy) -> list[Any]:
    return [r for r in proxy.recorder.take() if r.path.endswith(("/rerank", "/score"))]


@pytest.fixture(scope="module")
def lc_retriever(pg_dsn: str, lc_embeddings: Any, doc_texts: list[str], rerank_proxy: RecordingProxy) -> Any:
    pytest.importorskip("langchain_cohere", reason="needs langchain-cohere")
    import cohere
    from langchain_classic.retrievers.contextual_compression import ContextualCompressionRetriever
    from langchain_cohere import CohereRerank
    from langchain_core.documents import Document
    from langchain_postgres import PGVector

    store = PGVector(embeddings=lc_embeddings, collection_name=f"lc_rr_{uuid.uuid4().hex[:8]}",
                     connection=pg_dsn.replace("postgresql://", "postgresql+psycopg://", 1), use_jsonb=True)
    store.add_documents([Document(page_content=t, metadata={"n": i}) for i, t in enumerate(doc_texts)])
    reranker = CohereRerank(client=cohere.ClientV2(api_key="EMPTY", base_url=rerank_proxy.url),
                            model=RERANK_SERVED_NAME, top_n=2)
    return ContextualCompressionRetriever(base_compressor=reranker, base_retriever=store.as_retriever(search_kwargs={"k": 5}))


def test_langchain_cohere_rerank_fails_on_vllm_as_stock_does(lc_retriever: Any, rerank_proxy: RecordingProxy) -> None:
    """LangChain's `CohereRerank` always passes `max_tokens_per_doc=None`; the SDK sends it as
    null and vLLM refuses the request (400). The floor leaves such a call stock, so the wrapped
    retriever and chain raise the same error with the same request."""
    import cohere

    floor.install()
    rerank_requests(rerank_proxy)
    with pytest.raises(cohere.BadRequestError) as stock:
        lc_retriever.invoke(QUESTIONS[0])
    stock_requests = rerank_requests(rerank_proxy)
    with pytest.raises(cohere.BadRequestError) as ours:
        accel.wrap(lc_retriever).invoke(QUESTIONS[0])
    assert ours.value.body == stock.value.body and "max_tokens_per_doc" in str(stock.value.body)
    assert [r.body for r in rerank_requests(rerank_proxy)] == [r.body for r in stock_requests]


@pytest.fixture(scope="module")
def li_parts(pg_dsn: str, li_embed_model: Any, doc_texts: list[str], llm_proxy: RecordingProxy,
             rerank_proxy: RecordingProxy) -> tuple[Any, Any, Any]:
    """(index, llm, CohereRerank on the rerank server)."""
    pytest.importorskip("llama_index.postprocessor.cohere_rerank", reason="needs llama-index-postprocessor-cohere-rerank")
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode
    from llama_index.llms.openai_like import OpenAILike
    from llama_index.postprocessor.cohere_rerank import CohereRerank
    from llama_index.vector_stores.postgres import PGVectorStore

    store = PGVectorStore.from_params(
        connection_string=pg_dsn.replace("postgresql://", "postgresql+psycopg2://", 1),
        async_connection_string=pg_dsn.replace("postgresql://", "postgresql+asyncpg://", 1),
        table_name=f"li_rr_{uuid.uuid4().hex[:8]}", embed_dim=384)
    nodes = [TextNode(id_=f"n{i}", text=t, metadata={"n": i}) for i, t in enumerate(doc_texts)]
    index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store),
                             embed_model=li_embed_model)
    llm = OpenAILike(model=TINY, api_base=llm_proxy.url + "/v1", api_key="EMPTY", max_tokens=8, temperature=0.0,
                     context_window=2048, is_chat_model=False)
    rerank = CohereRerank(top_n=2, model=RERANK_SERVED_NAME, api_key="EMPTY", base_url=rerank_proxy.url)
    return index, llm, rerank


@pytest.fixture(scope="module")
def li_engine(li_parts: tuple[Any, Any, Any]) -> Any:
    index, llm, rerank = li_parts
    return index.as_query_engine(llm=llm, similarity_top_k=5, node_postprocessors=[rerank])


def test_llamaindex_query_answers_as_stock_with_a_quarter_of_the_rerank_requests(
        li_engine: Any, rerank_proxy: RecordingProxy) -> None:
    floor.install()
    rerank_requests(rerank_proxy)
    stock_one = li_engine.query(QUESTIONS[0])
    with ThreadPoolExecutor(CONCURRENT) as pool:
        stock = [str(r) for r in pool.map(li_engine.query, QUESTIONS)]
    stock_requests = rerank_requests(rerank_proxy)
    fast = accel.wrap(li_engine)
    ours_one = fast.query(QUESTIONS[0])
    rerank_requests(rerank_proxy)
    with ThreadPoolExecutor(CONCURRENT) as pool:
        ours = [str(r) for r in pool.map(fast.query, QUESTIONS)]
    ours_requests = rerank_requests(rerank_proxy)
    assert str(ours_one) == str(stock_one) and ours == stock
    assert [n.node.node_id for n in ours_one.source_nodes] == [n.node.node_id for n in stock_one.source_nodes]
    assert [n.score for n in ours_one.source_nodes] == pytest.approx([n.score for n in stock_one.source_nodes], rel=1e-5)
    assert len(stock_requests) == len(QUESTIONS) + 1
    # threads: how many requests merge depends on how fast the threads reach the engine (a
    # busy machine let some go alone); the quarter is kept where the queries start together
    # (the asyncio tests); run alone, these sent 2 requests for 16 queries (README)
    assert 1 <= len(ours_requests) < len(QUESTIONS), len(ours_requests)


def test_llamaindex_fusion_scores_each_pair_ahead_once_and_ranks_as_stock(
        li_parts: tuple[Any, Any, Any], rerank_proxy: RecordingProxy) -> None:
    """Behind a QueryFusionRetriever that keeps every chunk, the (question, chunk) pairs go to the
    server's `/score` as each search returns, each once, exactly the pairs stock's one Cohere
    `/v2/rerank` request carries; the postprocessor's own call is answered from them (no request
    of its own) and ranks the same nodes with the same scores."""
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import QueryFusionRetriever

    index, llm, rerank = li_parts
    fusion = QueryFusionRetriever([index.as_retriever(similarity_top_k=4)], llm=llm, num_queries=3,
                                  similarity_top_k=12, use_async=False)
    engine = RetrieverQueryEngine.from_args(fusion, llm=llm, node_postprocessors=[rerank])
    floor.install()
    fast = accel.wrap(engine)
    assert "CohereRerank: pairs scored ahead per search" in fast.explain()
    fast.query(QUESTIONS[1])  # warm: templates and engines
    for stock, ours in scored_ahead(engine.query, fast.query, rerank_proxy):
        assert str(ours) == str(stock)
        assert [n.node.node_id for n in ours.source_nodes] == [n.node.node_id for n in stock.source_nodes]
        assert [n.score for n in ours.source_nodes] == pytest.approx([n.score for n in stock.source_nodes], rel=1e-5)


def scored_ahead(stock_call: Any, ours_call: Any, proxy: RecordingProxy) -> Iterator[tuple[Any, Any]]:
    """(stock's result, ours) for three questions, after checking the rerank server's requests:
    stock's one Cohere `/v2/rerank` request, accel's `/score` requests only (none of the app's
    own call), carrying exactly stock's pairs, each once."""
    for question in QUESTIONS[:3]:
        rerank_requests(proxy)
        stock = stock_call(question)
        [stock_request] = rerank_requests(proxy)
        ours = ours_call(question)
        ours_requests = rerank_requests(proxy)
        assert stock_request.path.endswith("/rerank") and all(r.path.endswith("/score") for r in ours_requests)
        stock_pairs = Counter((stock_request.body["query"], doc) for doc in stock_request.body["documents"])
        ours_pairs = Counter(pair for r in ours_requests for pair in zip(r.body["text_1"], r.body["text_2"]))
        assert ours_pairs == stock_pairs, question
        yield stock, ours


def test_langchain_multi_query_pairs_are_scored_ahead_on_the_server_cross_encoders_server(
        pg_dsn: str, lc_embeddings: Any, doc_texts: list[str], llm_proxy: RecordingProxy,
        rerank_proxy: RecordingProxy) -> None:
    """A user's cross-encoder on the rerank server (`examples/langchain/server_rerank.py`, a
    Cohere `ClientV2` as `client`) under a compression over a MultiQueryRetriever: the pairs go
    to the server's `/score` as each search returns, each once, exactly the pairs stock's one
    `/v2/rerank` request a query carries; the cross-encoder's own call is answered from them (no
    request of its own) and the same documents come back."""
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
    from langchain_classic.retrievers.multi_query import MultiQueryRetriever
    from langchain_core.documents import Document
    from langchain_openai import ChatOpenAI
    from langchain_postgres import PGVector

    from accel.examples.langchain.server_rerank import ServerCrossEncoder

    store = PGVector(embeddings=lc_embeddings, collection_name=f"lc_mq_{uuid.uuid4().hex[:8]}",
                     connection=pg_dsn.replace("postgresql://", "postgresql+psycopg://", 1), use_jsonb=True)
    store.add_documents([Document(page_content=t, metadata={"n": i}) for i, t in enumerate(doc_texts)])
    llm = ChatOpenAI(base_url=llm_proxy.url + "/v1", api_key="EMPTY", model=TINY, temperature=0, max_tokens=12)
    expand = MultiQueryRetriever.from_llm(retriever=store.as_retriever(search_kwargs={"k": 3}), llm=llm,
                                          include_original=True)
    reranker = CrossEncoderReranker(model=ServerCrossEncoder.for_server(rerank_proxy.url, RERANK_SERVED_NAME), top_n=2)
    retriever = ContextualCompressionRetriever(base_compressor=reranker, base_retriever=expand)
    floor.install()
    fast = accel.wrap(retriever)
    assert "pairs scored ahead per search on its rerank server" in fast.explain()
    fast.invoke(QUESTIONS[1])  # warm: templates and engines
    for stock, ours in scored_ahead(retriever.invoke, fast.invoke, rerank_proxy):
        assert [(d.page_content, d.metadata) for d in ours] == [(d.page_content, d.metadata) for d in stock]
