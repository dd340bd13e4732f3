"""Engine-call capture (the floor) for LlamaIndex components, stock vs inside a wrapped run, on
the real engines: `OpenAILike` (the openai SDK plug-in), `HuggingFaceEmbedding`,
`PGVectorStore.query` / `aquery`, `SentenceTransformerRerank` give the same results, send the
same engine requests and fire the same instrumentation events; concurrent runs batch; a
`CustomQueryEngine` calling the LLM and the retriever itself answers as stock; inert outside
wrapped runs."""

from __future__ import annotations

import asyncio
import contextvars
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import pytest

from accel.adapters.common import floor
from accel.testing.recording import record_requests
from accel.scope import WrappedRun, wrapped_run
from accel.session import get_session

from ..held_engine import first_call_held
from .conftest import QUESTIONS, fresh_pg_index, in_progress_runs, llm_bodies, llm_exchanges

pytestmark = [pytest.mark.engines]


@pytest.fixture(autouse=True)
def installed():
    import accel.adapters.llamaindex  # noqa: F401 - registers the adapter (the floor installs on wrap)

    floor.install()
    floor.stats.reset()
    yield


def inside(fn, *args, **kwargs):
    with wrapped_run(WrappedRun(app="test", session=get_session())):
        return fn(*args, **kwargs)


async def ainside(coro_fn, *args, **kwargs):
    with wrapped_run(WrappedRun(app="test", session=get_session())):
        return await coro_fn(*args, **kwargs)


def routed(component: str) -> int:
    return floor.stats.snapshot()["routed"].get(component, 0)


def test_llm_complete_chat_stream_same_results_requests_and_events(llm: Any, llm_proxy: Any, recorder: Any) -> None:
    from llama_index.core.llms import ChatMessage

    def calls():
        out = [llm.complete(QUESTIONS[0]).text, llm.chat([ChatMessage(role="user", content=QUESTIONS[1])]).message.content,
               "".join(r.delta for r in llm.stream_complete(QUESTIONS[2]))]

        async def both():
            a = (await llm.acomplete(QUESTIONS[3])).text
            stream = await llm.astream_complete(QUESTIONS[0])
            return [a, "".join([r.delta async for r in stream])]

        return out + asyncio.run(both())

    llm_proxy.recorder.take()
    stock = calls()
    stock_events, (stock_bodies, stock_sent) = recorder.take(), llm_exchanges(llm_proxy)
    fast = inside(calls)
    fast_events, (fast_bodies, fast_sent) = recorder.take(), llm_exchanges(llm_proxy)
    assert fast == stock and fast_bodies == stock_bodies
    # the same events; a stream's in-progress events one per event its own server sent (vLLM
    # joins tokens into one event when its client lags, so two runs may split differently)
    (fast_kept, fast_chunks), (stock_kept, stock_chunks) = in_progress_runs(fast_events), in_progress_runs(stock_events)
    assert fast_kept == stock_kept
    assert fast_chunks == fast_sent and stock_chunks == stock_sent and fast_chunks > 2
    assert routed("openai-sdk") == 5


def test_embedding_query_text_batch_and_async(embed_model: Any, recorder: Any) -> None:
    texts = ["a heron sleeps", "a violin hums", "fresh bread"]

    def calls():
        async def both():
            return [await embed_model.aget_query_embedding(QUESTIONS[0]), await embed_model.aget_text_embedding(texts[0]),
                    await embed_model.aget_text_embedding_batch(texts)]

        return [embed_model.get_query_embedding(QUESTIONS[1]), embed_model.get_text_embedding(texts[1]),
                embed_model.get_text_embedding_batch(texts), *asyncio.run(both())]

    with record_requests() as stock_log:
        stock = calls()
    stock_events = recorder.take()
    with record_requests() as fast_log:
        fast = inside(calls)
    assert recorder.take() == stock_events
    assert routed("HuggingFaceEmbedding") == 6
    assert sorted(fast_log.embedded) == sorted(stock_log.embedded)

    import numpy as np

    for a, b in zip(fast, stock, strict=True):
        assert np.allclose(np.asarray(a), np.asarray(b), atol=1e-5)


def test_pgvector_store_query_and_aquery(pg_index: Any, embed_model: Any) -> None:
    from llama_index.core.vector_stores.types import VectorStoreQuery

    store = fresh_pg_index(pg_index, embed_model).vector_store
    queries = [VectorStoreQuery(query_embedding=embed_model.get_query_embedding(q), similarity_top_k=3) for q in QUESTIONS]

    def calls():
        async def both():
            return [await store.aquery(q) for q in queries]

        return [store.query(q) for q in queries] + asyncio.run(both())

    stock, fast = calls(), inside(calls)
    assert routed("PGVectorStore") == 2 * len(queries)
    for s, f in zip(stock, fast, strict=True):
        assert f.ids == s.ids
        assert [n.get_content() for n in f.nodes] == [n.get_content() for n in s.nodes]
        assert [n.metadata for n in f.nodes] == [n.metadata for n in s.nodes]
        assert f.similarities == pytest.approx(s.similarities, abs=1e-6)


def test_reranker_postprocess(pg_index: Any, reranker_dir: Any) -> None:
    from llama_index.core.postprocessor import SentenceTransformerRerank
    from llama_index.core.schema import QueryBundle

    rerank = SentenceTransformerRerank(model=str(reranker_dir), top_n=2, device="cpu")
    retriever = pg_index.as_retriever(similarity_top_k=5)

    def calls():
        out = []
        for q in QUESTIONS:
            nodes = retriever.retrieve(q)
            out.append([(n.node.node_id, float(n.score)) for n in rerank.postprocess_nodes(nodes, QueryBundle(q))])
        return out

    with record_requests() as stock_log:
        stock = calls()
    with record_requests() as fast_log:
        fast = inside(calls)
    assert routed("SentenceTransformerRerank") == len(QUESTIONS)
    assert sorted(fast_log.scored) == sorted(stock_log.scored)
    for s, f in zip(stock, fast, strict=True):
        assert [i for i, _ in f] == [i for i, _ in s]
        assert [x for _, x in f] == pytest.approx([x for _, x in s], abs=1e-4)


def test_concurrent_runs_batch_their_embeddings(embed_model: Any) -> None:
    """Eight programs embedding at once: fewer engine calls than programs. The engine's first
    call is held until two more requests wait behind it, as on a busy engine."""
    session = get_session()
    inside(embed_model.get_query_embedding, "warm the engine")  # engines started

    def one(q):
        return inside(embed_model.get_query_embedding, q)

    with ExitStack() as held:
        per_engine = [held.enter_context(first_call_held(session, name))
                      for name, engine in list(session._engines.items()) if engine.kind == "embed"]
        with ThreadPoolExecutor(8) as pool:
            vectors = list(pool.map(lambda q: contextvars.copy_context().run(one, q), QUESTIONS * 2))
    calls = [n for engine_calls in per_engine for n in engine_calls]
    assert len(vectors) == 8 and sum(calls) == 8, calls
    assert len(calls) < 8, calls


def test_inert_outside_a_wrapped_run(embed_model: Any, llm: Any) -> None:
    embed_model.get_query_embedding(QUESTIONS[0])
    llm.complete(QUESTIONS[0])
    assert floor.stats.snapshot()["routed"] == {}


def test_custom_query_engine_calls_captured(pg_index: Any, llm: Any, llm_proxy: Any) -> None:
    """Issue 11's floor on LlamaIndex: a `CustomQueryEngine` whose `custom_query` calls the
    retriever and the LLM itself (the LlamaIndex "custom query engine" guide's RAG shape)."""
    import accel
    from llama_index.core import PromptTemplate
    from llama_index.core.query_engine import CustomQueryEngine
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.llms.openai_like import OpenAILike

    qa_prompt = PromptTemplate(
        "Context information is below.\n---------------------\n{context_str}\n---------------------\n"
        "Given the context information and not prior knowledge, answer the query.\nQuery: {query_str}\nAnswer: "
    )

    class RAGStringQueryEngine(CustomQueryEngine):
        retriever: BaseRetriever
        llm: OpenAILike
        qa_prompt: PromptTemplate

        def custom_query(self, query_str: str):
            nodes = self.retriever.retrieve(query_str)
            context_str = "\n\n".join([n.node.get_content() for n in nodes])
            return str(self.llm.complete(qa_prompt.format(context_str=context_str, query_str=query_str)))

    engine = RAGStringQueryEngine(retriever=pg_index.as_retriever(similarity_top_k=2), llm=llm, qa_prompt=qa_prompt)
    fast = accel.wrap(engine)
    assert isinstance(fast, RAGStringQueryEngine)
    explained = fast.explain()
    assert "OpenAILike (LLM)" in explained.split("captured", 1)[1].split("as-is", 1)[0], explained
    llm_proxy.recorder.take()
    stock = [engine.query(q) for q in QUESTIONS]
    stock_bodies = llm_bodies(llm_proxy)
    ours = [fast.query(q) for q in QUESTIONS]
    assert [str(o) for o in ours] == [str(s) for s in stock]
    assert llm_bodies(llm_proxy) == stock_bodies
    assert routed("openai-sdk") == len(QUESTIONS)
    assert routed("HuggingFaceEmbedding") == len(QUESTIONS) and routed("PGVectorStore") == len(QUESTIONS)
