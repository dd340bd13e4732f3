"""Apps whose embeddings come from a server (a real vLLM pooling server serving the packaged
all-MiniLM-L6-v2): a stock LangChain RAG chain (`OpenAIEmbeddings` under a PGVector retriever)
and a stock LlamaIndex query engine (`OpenAILikeEmbedding`, PGVectorStore), wrapped unchanged,
answer what stock answers, embed to the same vectors, and send far fewer requests to the
embedding server under concurrent queries (counted at a recording proxy in front of it). The
server is the session's (`embed_url`, tests/conftest.py).

ACCEL_TEST_EMBED_URL reuses an embedding server already running (local iteration).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import accel
from accel.adapters.common import floor
from accel.engines.encoder_servers import EMBED_SERVED_NAME
from accel.engines.offline.corpus import stdlib_docs
from accel.scope import WrappedRun, wrapped_run
from accel.session import get_session
from accel.testing.proxy import RecordingProxy
from tests.encoder_servers import embed_url  # noqa: F401  (the session's server; importable from here)

pytestmark = [pytest.mark.engines, pytest.mark.slow]

TINY = "tiny"
CONCURRENT = 16
QUESTIONS = [f"{verb} {topic}?" for verb in ("How do I use", "What is", "Why would I call", "Explain")
             for topic in ("json.loads", "heapq.heappush", "textwrap.fill", "functools.partial")]


@pytest.fixture(scope="module")
def embed_proxy(embed_url: str) -> Iterator[RecordingProxy]:
    with RecordingProxy(embed_url.removesuffix("/v1")) as proxy:
        yield proxy


def embedding_requests(proxy: RecordingProxy) -> list[Any]:
    return [r for r in proxy.recorder.take() if r.path.endswith("/embeddings")]


@pytest.fixture(scope="module")
def doc_texts() -> list[str]:
    texts = []
    for doc in stdlib_docs(("json", "heapq", "textwrap", "functools")):
        texts += [p.strip()[:400] for p in doc.text.split("\n\n") if len(p.strip()) > 80][:12]
    return texts


# ---- LangChain: OpenAIEmbeddings under a PGVector retriever ---------------------------------


@pytest.fixture(scope="module")
def lc_embeddings(embed_proxy: RecordingProxy) -> Any:
    from langchain_openai import OpenAIEmbeddings

    return OpenAIEmbeddings(base_url=embed_proxy.url + "/v1", model=EMBED_SERVED_NAME, api_key="EMPTY",
                            check_embedding_ctx_length=False)


@pytest.fixture(scope="module")
def lc_chain(pg_dsn: str, lc_embeddings: Any, doc_texts: list[str], llm_proxy: RecordingProxy) -> Any:
    from langchain_core.documents import Document
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_openai import ChatOpenAI
    from langchain_postgres import PGVector

    store = PGVector(embeddings=lc_embeddings, collection_name=f"lc_srv_{uuid.uuid4().hex[:8]}",
                     connection=pg_dsn.replace("postgresql://", "postgresql+psycopg://", 1), use_jsonb=True)
    store.add_documents([Document(page_content=t, metadata={"n": i}) for i, t in enumerate(doc_texts)])
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}\nAnswer:")
    model = ChatOpenAI(base_url=llm_proxy.url + "/v1", api_key="EMPTY", model=TINY, temperature=0, max_tokens=8)

    def join(docs: list[Any]) -> str:
        return "\n\n".join(d.page_content for d in docs)

    chains = {}
    for mode, kwargs in (("sync", {}), ("async", {"async_mode": True})):  # a PGVector serves one of them
        store = store if mode == "sync" else PGVector(
            embeddings=lc_embeddings, collection_name=store.collection_name,
            connection=pg_dsn.replace("postgresql://", "postgresql+psycopg://", 1), use_jsonb=True, **kwargs)
        chains[mode] = ({"context": store.as_retriever(search_kwargs={"k": 3}) | join, "question": RunnablePassthrough()}
                        | prompt | model | StrOutputParser())
    return chains


def test_langchain_vectors_are_the_servers_own(lc_embeddings: Any, embed_proxy: RecordingProxy,
                                               doc_texts: list[str]) -> None:
    floor.install()
    embedding_requests(embed_proxy)
    stock_docs, stock_query = lc_embeddings.embed_documents(doc_texts[:5]), lc_embeddings.embed_query(QUESTIONS[0])
    stock_bodies = [r.body for r in embedding_requests(embed_proxy)]
    with wrapped_run(WrappedRun(app="test", session=get_session())):
        ours_docs, ours_query = lc_embeddings.embed_documents(doc_texts[:5]), lc_embeddings.embed_query(QUESTIONS[0])
    assert (ours_docs, ours_query) == (stock_docs, stock_query)
    assert [r.body for r in embedding_requests(embed_proxy)] == stock_bodies  # a lone caller's request is its own


def test_langchain_invoke_and_batch_answer_as_stock_with_a_quarter_of_the_requests(
        lc_chain: dict[str, Any], embed_proxy: RecordingProxy, llm_proxy: RecordingProxy) -> None:
    lc_chain = lc_chain["sync"]
    embedding_requests(embed_proxy)
    stock_one = [lc_chain.invoke(q) for q in QUESTIONS[:2]]
    stock = lc_chain.batch(QUESTIONS, config={"max_concurrency": CONCURRENT})
    stock_requests = embedding_requests(embed_proxy)
    fast = accel.wrap(lc_chain)
    ours_one = [fast.invoke(q) for q in QUESTIONS[:2]]
    embedding_requests(embed_proxy)
    ours = fast.batch(QUESTIONS, config={"max_concurrency": CONCURRENT})
    ours_requests = embedding_requests(embed_proxy)
    assert ours_one == stock_one and ours == stock
    assert len(stock_requests) == len(QUESTIONS) + 2
    # threads: how many requests merge depends on how fast the threads reach the engine (a
    # busy machine let some go alone); the quarter is kept where the queries start together
    # (the asyncio tests); run alone, these sent 2 requests for 16 queries (README)
    assert 1 <= len(ours_requests) < len(QUESTIONS), [len(r.body["input"]) for r in ours_requests]
    sent = sorted(text for r in ours_requests for text in r.body["input"])
    assert sent == sorted(text for r in stock_requests[2:] for text in r.body["input"])


async def test_langchain_ainvoke_and_abatch_answer_as_stock_with_a_quarter_of_the_requests(
        lc_chain: dict[str, Any], embed_proxy: RecordingProxy) -> None:
    chain = lc_chain["async"]
    embedding_requests(embed_proxy)
    stock_one = await chain.ainvoke(QUESTIONS[0])
    stock = await chain.abatch(QUESTIONS, config={"max_concurrency": CONCURRENT})
    stock_requests = embedding_requests(embed_proxy)
    fast = accel.wrap(chain)
    ours_one = await fast.ainvoke(QUESTIONS[0])
    embedding_requests(embed_proxy)
    ours = await fast.abatch(QUESTIONS, config={"max_concurrency": CONCURRENT})
    ours_requests = embedding_requests(embed_proxy)
    assert ours_one == stock_one and ours == stock
    assert len(stock_requests) == len(QUESTIONS) + 1
    assert 1 <= len(ours_requests) <= len(QUESTIONS) // 4, [len(r.body["input"]) for r in ours_requests]


def test_langchain_stream_and_run_tree_are_stocks(lc_chain: dict[str, Any]) -> None:
    from accel.testing.runtrees import Recorder, difference, trees

    chain, fast = lc_chain["sync"], accel.wrap(lc_chain["sync"])
    stock_chunks, ours_chunks = list(chain.stream(QUESTIONS[1])), list(fast.stream(QUESTIONS[1]))
    assert "".join(ours_chunks) == "".join(stock_chunks) and ours_chunks[0] == stock_chunks[0]
    stock_runs, ours_runs = Recorder(), Recorder()
    assert fast.invoke(QUESTIONS[2], config={"callbacks": [ours_runs]}) == \
        chain.invoke(QUESTIONS[2], config={"callbacks": [stock_runs]})
    assert stock_runs.roots and trees(ours_runs) == trees(stock_runs), difference(trees(ours_runs), trees(stock_runs))


# ---- LlamaIndex: OpenAILikeEmbedding / OpenAIEmbedding, PGVectorStore -----------------------


@pytest.fixture(scope="module")
def li_embed_model(embed_proxy: RecordingProxy) -> Any:
    pytest.importorskip("llama_index.embeddings.openai_like", reason="needs llama-index-embeddings-openai-like")
    pytest.importorskip("llama_index.embeddings.openai", reason="needs llama-index-embeddings-openai")
    from llama_index.embeddings.openai_like import OpenAILikeEmbedding

    return OpenAILikeEmbedding(model_name=EMBED_SERVED_NAME, api_base=embed_proxy.url + "/v1", api_key="EMPTY")


@pytest.fixture(scope="module")
def li_engine(pg_dsn: str, li_embed_model: Any, doc_texts: list[str], llm_proxy: RecordingProxy) -> Any:
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode
    from llama_index.llms.openai_like import OpenAILike
    from llama_index.vector_stores.postgres import PGVectorStore

    store = PGVectorStore.from_params(
        connection_string=pg_dsn.replace("postgresql://", "postgresql+psycopg2://", 1),
        async_connection_string=pg_dsn.replace("postgresql://", "postgresql+asyncpg://", 1),
        table_name=f"li_srv_{uuid.uuid4().hex[:8]}", embed_dim=384)
    nodes = [TextNode(id_=f"n{i}", text=t, metadata={"n": i}) for i, t in enumerate(doc_texts)]
    index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store),
                             embed_model=li_embed_model)
    llm = OpenAILike(model=TINY, api_base=llm_proxy.url + "/v1", api_key="EMPTY", max_tokens=8, temperature=0.0,
                     context_window=2048, is_chat_model=False)
    return index.as_query_engine(llm=llm, similarity_top_k=3)


def test_llamaindex_vectors_are_the_servers_own(li_embed_model: Any, embed_proxy: RecordingProxy) -> None:
    from llama_index.embeddings.openai import OpenAIEmbedding

    floor.install()
    named = OpenAIEmbedding(model_name=EMBED_SERVED_NAME, api_base=embed_proxy.url + "/v1", api_key="EMPTY")
    for model in (li_embed_model, named):
        stock = model.get_text_embedding_batch(QUESTIONS[:5]), model.get_query_embedding(QUESTIONS[0])
        with wrapped_run(WrappedRun(app="test", session=get_session())):
            ours = model.get_text_embedding_batch(QUESTIONS[:5]), model.get_query_embedding(QUESTIONS[0])
        assert ours == stock


def test_llamaindex_query_and_threads_answer_as_stock_with_a_quarter_of_the_requests(
        li_engine: Any, embed_proxy: RecordingProxy) -> None:
    embedding_requests(embed_proxy)
    stock_one = str(li_engine.query(QUESTIONS[0]))
    with ThreadPoolExecutor(CONCURRENT) as pool:
        stock = [str(r) for r in pool.map(li_engine.query, QUESTIONS)]
    stock_requests = embedding_requests(embed_proxy)
    fast = accel.wrap(li_engine)
    ours_one = str(fast.query(QUESTIONS[0]))
    embedding_requests(embed_proxy)
    with ThreadPoolExecutor(CONCURRENT) as pool:
        ours = [str(r) for r in pool.map(fast.query, QUESTIONS)]
    ours_requests = embedding_requests(embed_proxy)
    assert ours_one == stock_one and ours == stock
    assert len(stock_requests) == len(QUESTIONS) + 1
    # threads: how many requests merge depends on how fast the threads reach the engine (a
    # busy machine let some go alone); the quarter is kept where the queries start together
    # (the asyncio tests); run alone, these sent 2 requests for 16 queries (README)
    assert 1 <= len(ours_requests) < len(QUESTIONS), [len(r.body["input"]) for r in ours_requests]


async def test_llamaindex_aquery_concurrent_answers_as_stock_with_a_quarter_of_the_requests(
        li_engine: Any, embed_proxy: RecordingProxy) -> None:
    embedding_requests(embed_proxy)
    stock = [str(r) for r in await asyncio.gather(*(li_engine.aquery(q) for q in QUESTIONS))]
    stock_requests = embedding_requests(embed_proxy)
    fast = accel.wrap(li_engine)
    ours = [str(r) for r in await asyncio.gather(*(fast.aquery(q) for q in QUESTIONS))]
    ours_requests = embedding_requests(embed_proxy)
    assert ours == stock
    assert len(stock_requests) == len(QUESTIONS)
    assert 1 <= len(ours_requests) <= len(QUESTIONS) // 4, [len(r.body["input"]) for r in ours_requests]
