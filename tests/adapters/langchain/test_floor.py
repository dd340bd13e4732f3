"""Engine-call capture (the floor) for LangChain components, stock vs inside a wrapped run, on
the real engines: same results, same engine requests, same callbacks, stock exception types;
concurrent runs batch; inert and reversible outside wrapped runs."""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from contextlib import ExitStack
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler

from accel.adapters.common import floor
from accel.testing.recording import record_requests
from accel.scope import WrappedRun, stock_call, wrapped_run
from accel.session import get_session

from ..held_engine import first_call_held
from .conftest import TINY, sqlalchemy_url
from .fidelity import llm_bodies, llm_exchanges

pytestmark = [pytest.mark.engines, pytest.mark.slow]


@pytest.fixture(autouse=True)
def installed():
    floor.install()
    floor.stats.reset()
    yield


def inside(fn, *args, **kwargs):
    """Call `fn` inside a fresh wrapped run (a program of its own)."""
    with wrapped_run(WrappedRun(app="test", session=get_session())):
        return fn(*args, **kwargs)


async def ainside(coro_fn, *args, **kwargs):
    with wrapped_run(WrappedRun(app="test", session=get_session())):
        return await coro_fn(*args, **kwargs)


def routed(component: str) -> int:
    return floor.stats.snapshot()["routed"].get(component, 0)


class Events(BaseCallbackHandler):
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def on_llm_start(self, serialized, prompts, **kw):
        self.seen.append(("llm_start", tuple(prompts)))

    def on_chat_model_start(self, serialized, messages, **kw):
        self.seen.append(("chat_start", str(messages)))

    def on_llm_new_token(self, token, **kw):
        self.seen.append(("token", token))

    def on_llm_end(self, response, **kw):
        self.seen.append(("llm_end", response.generations[0][0].text))

    def on_llm_error(self, error, **kw):
        self.seen.append(("llm_error", type(error).__name__))

    def on_retriever_start(self, serialized, query, **kw):
        self.seen.append(("retriever_start", query))

    def on_retriever_end(self, documents, **kw):
        self.seen.append(("retriever_end", tuple(d.page_content for d in documents)))


def tokens(events: Events) -> list[str]:
    return texts(value for kind, value in events.seen if kind == "token")


def texts(pieces) -> list[str]:
    return [piece for piece in pieces if piece]


def others(events: Events) -> list[tuple[str, Any]]:
    return [(kind, value) for kind, value in events.seen if kind != "token" or not value]


# ---- LLMs: the openai SDK plug-in ---------------------------------------------------------------


def test_chat_model_every_entry_point_same_results_requests_and_callbacks(chat_model, llm_proxy, questions) -> None:
    def calls(model, events):
        config = {"callbacks": [events]}
        out = [model.invoke(questions[0], config).content]
        out += [m.content for m in model.batch(questions[1:3], config)]
        out.append("".join(c.content for c in model.stream(questions[3], config)))

        async def both():
            a = (await model.ainvoke(questions[0], config)).content
            b = [m.content for m in await model.abatch(questions[1:3], config)]
            c = "".join([c.content async for c in model.astream(questions[3], config)])
            return [a, *b, c]

        return out + asyncio.run(both())

    llm_proxy.recorder.take()
    stock_events, fast_events = Events(), Events()
    stock = calls(chat_model, stock_events)
    stock_bodies, _, stock_sent = llm_exchanges(llm_proxy)
    before = routed("openai-sdk")
    fast = inside(calls, chat_model, fast_events)
    fast_bodies, warmups, fast_sent = llm_exchanges(llm_proxy)
    assert fast == stock
    assert fast_bodies == stock_bodies and warmups <= 1  # the engine's one-off priority probe
    # token callbacks: one per text the server sent (vLLM joins tokens into one event when its
    # client lags, stock's or ours, so the split is compared with each run's own server; the
    # empty ones, LangChain's and the server's, are compared as events below)
    stock_tokens, fast_tokens = (tokens(events) for events in (stock_events, fast_events))
    assert fast_tokens == texts(fast_sent) and stock_tokens == texts(stock_sent) and len(fast_tokens) > 2
    assert "".join(fast_tokens) == "".join(stock_tokens)
    assert sorted(others(fast_events)) == sorted(others(stock_events))
    assert routed("openai-sdk") - before == 8


def test_completion_model_invoke_batch_stream(completion_model, llm_proxy, questions) -> None:
    def calls(model):
        return [model.invoke(questions[0]), model.batch(questions[:3]), "".join(model.stream(questions[1])),
                asyncio.run(model.ainvoke(questions[2]))]

    llm_proxy.recorder.take()
    stock = calls(completion_model)
    stock_bodies, _ = llm_bodies(llm_proxy)
    fast = inside(calls, completion_model)
    fast_bodies, _ = llm_bodies(llm_proxy)
    assert fast == stock and fast_bodies == stock_bodies
    assert routed("openai-sdk") >= 4


def test_chat_model_unreachable_server_raises_stock_exception_type() -> None:
    from langchain_openai import ChatOpenAI

    dead = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="EMPTY", model=TINY, max_retries=0, timeout=5)
    with pytest.raises(Exception) as stock:
        dead.invoke("hi")
    with pytest.raises(Exception) as fast:
        inside(dead.invoke, "hi")
    assert type(fast.value) is type(stock.value)


def test_bad_request_raises_the_sdk_error_with_the_server_message(chat_model) -> None:
    bad = chat_model.bind(max_tokens=10**6)  # beyond the context window: HTTP 400 from vLLM
    with pytest.raises(Exception) as stock:
        bad.invoke("hi")
    with pytest.raises(Exception) as fast:
        inside(bad.invoke, "hi")
    assert type(fast.value) is type(stock.value)
    assert str(fast.value) == str(stock.value)


# ---- embeddings, searches, cross-encoder ------------------------------------------------------


def test_embeddings_sync_and_async(embeddings, doc_texts) -> None:
    texts = ["multi\nline text", *doc_texts[:5]]
    stock = (embeddings.embed_documents(texts), embeddings.embed_query(texts[0]),
             asyncio.run(embeddings.aembed_documents(texts)), asyncio.run(embeddings.aembed_query(texts[1])))

    def fast_calls():
        async def both():
            return await embeddings.aembed_documents(texts), await embeddings.aembed_query(texts[1])

        docs_async, query_async = asyncio.run(both())
        return embeddings.embed_documents(texts), embeddings.embed_query(texts[0]), docs_async, query_async

    with record_requests() as log:
        fast = inside(fast_calls)
    assert routed("HuggingFaceEmbeddings") == 4
    assert [t for t, _ in log.embedded].count("multi line text") == 3  # the engine got stock's cleaned text
    for mine, theirs in zip(fast, stock, strict=True):
        rows_mine = mine if isinstance(mine[0], list) else [mine]
        rows_theirs = theirs if isinstance(theirs[0], list) else [theirs]
        for a, b in zip(rows_mine, rows_theirs, strict=True):
            assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-5


def same_docs(mine, theirs, *, scored: bool = False) -> None:
    if scored:
        assert [d.page_content for d, _ in mine] == [d.page_content for d, _ in theirs]
        assert [d.id for d, _ in mine] == [d.id for d, _ in theirs]
        assert [d.metadata for d, _ in mine] == [d.metadata for d, _ in theirs]
        assert [s for _, s in mine] == pytest.approx([s for _, s in theirs], abs=1e-5)
    else:
        assert mine == theirs


def test_pgvector_searches_sync(vectorstore, embeddings, questions) -> None:
    vector = embeddings.embed_query(questions[1])

    def calls():
        return (vectorstore.similarity_search(questions[0], k=3),
                vectorstore.similarity_search(questions[2], k=2, filter={"even": True}),
                vectorstore.similarity_search_with_score(questions[3], k=4),
                vectorstore.similarity_search_by_vector(vector, k=3),
                vectorstore.as_retriever(search_kwargs={"k": 2}).invoke(questions[0]))

    stock = calls()
    with record_requests() as log:
        fast = inside(calls)
    assert routed("PGVector") == 5 and len(log.searched) == 5  # each search recorded once, at the engine
    for i, (mine, theirs) in enumerate(zip(fast, stock, strict=True)):
        same_docs(mine, theirs, scored=i == 2)


def test_sync_store_async_path_keeps_stock_exception(vectorstore, questions) -> None:
    with pytest.raises(BaseException) as stock:
        asyncio.run(vectorstore.asimilarity_search(questions[0]))
    with pytest.raises(BaseException) as fast:
        asyncio.run(ainside(vectorstore.asimilarity_search, questions[0]))
    assert type(fast.value) is type(stock.value)
    with pytest.raises(BaseException) as stock_direct:
        asyncio.run(vectorstore.asimilarity_search_with_score_by_vector([0.0] * 384))
    with pytest.raises(BaseException) as fast_direct:
        asyncio.run(ainside(vectorstore.asimilarity_search_with_score_by_vector, [0.0] * 384))
    assert type(fast_direct.value) is type(stock_direct.value)


def test_async_store_searches(pg_dsn, embeddings, doc_texts, questions) -> None:
    from langchain_core.documents import Document
    from langchain_postgres import PGVector
    from sqlalchemy.ext.asyncio import create_async_engine

    async def scenario():
        engine = create_async_engine(sqlalchemy_url(pg_dsn))
        store = PGVector(embeddings=embeddings, collection_name=f"lc_async_{uuid.uuid4().hex[:8]}", connection=engine, use_jsonb=True)
        await store.aadd_documents([Document(page_content=t, metadata={"n": i}) for i, t in enumerate(doc_texts[:20])])
        stock = (await store.asimilarity_search(questions[0], k=3), await store.asimilarity_search_with_score(questions[1], k=2))
        with wrapped_run(WrappedRun(app="test", session=get_session())):
            fast = (await store.asimilarity_search(questions[0], k=3), await store.asimilarity_search_with_score(questions[1], k=2))
        await engine.dispose()
        return stock, fast

    stock, fast = asyncio.run(scenario())
    assert routed("PGVector") == 2
    same_docs(fast[0], stock[0])
    same_docs(fast[1], stock[1], scored=True)


def test_cross_encoder_score(reranker_dir, doc_texts) -> None:
    from langchain_community.cross_encoders import HuggingFaceCrossEncoder

    encoder = HuggingFaceCrossEncoder(model_name=str(reranker_dir))
    pairs = [("what is json?", t) for t in doc_texts[:6]]
    stock = encoder.score(pairs)
    fast = inside(encoder.score, pairs)
    assert routed("HuggingFaceCrossEncoder") == 1
    assert type(fast) is type(stock) and fast.dtype == stock.dtype
    assert fast.tolist() == pytest.approx(stock.tolist(), abs=1e-5)


def test_retriever_callbacks_fire_as_stock(vectorstore, questions) -> None:
    retriever = vectorstore.as_retriever(search_kwargs={"k": 2})
    stock_events, fast_events = Events(), Events()
    retriever.invoke(questions[0], {"callbacks": [stock_events]})
    inside(retriever.invoke, questions[0], {"callbacks": [fast_events]})
    assert fast_events.seen == stock_events.seen and routed("PGVector") == 1


# ---- across runs, inertness, reversibility ------------------------------------------------------


def test_concurrent_runs_batch_embeddings_and_searches(vectorstore, embeddings, questions) -> None:
    session = get_session()
    inside(vectorstore.similarity_search, questions[0], k=1)  # engines started
    many = [q + f" ({i})" for i in range(4) for q in questions]
    stock = [vectorstore.similarity_search(q, k=2) for q in many]
    # each engine's first call is held until two more requests wait behind it, as on a busy
    # engine: the runs that come meanwhile must share the calls after it
    calls: dict[str, list[list[int]]] = {"embed": [], "vectordb": []}
    with ExitStack() as held:
        for name, engine in list(session._engines.items()):
            if engine.kind in calls:
                calls[engine.kind].append(held.enter_context(first_call_held(session, name)))
        with ThreadPoolExecutor(16) as pool:
            fast = list(pool.map(lambda q: contextvars.copy_context().run(inside, vectorstore.similarity_search, q, k=2), many))
    assert fast == stock
    for kind, per_engine in calls.items():
        sizes = [n for engine_calls in per_engine for n in engine_calls]
        assert sum(sizes) == len(many) and max(sizes) > 1, (kind, sizes)


def test_inert_outside_runs_and_in_stock_calls(embeddings, vectorstore, questions) -> None:
    embeddings.embed_query(questions[0])
    vectorstore.similarity_search(questions[0], k=1)
    with wrapped_run(WrappedRun(app="test")), stock_call():
        embeddings.embed_query(questions[0])
    assert floor.stats.snapshot()["routed"] == {}


def test_uninstall_restores_originals_and_install_patches_again() -> None:
    from langchain_community.cross_encoders import HuggingFaceCrossEncoder
    from langchain_huggingface import HuggingFaceEmbeddings
    from langchain_postgres import PGVector
    from openai._base_client import SyncAPIClient

    patched = (HuggingFaceEmbeddings._embed, PGVector.similarity_search_with_score_by_vector,
               HuggingFaceCrossEncoder.score, SyncAPIClient._send_request)
    assert all(hasattr(m, "__wrapped__") for m in patched)
    assert "aembed_query" in vars(HuggingFaceEmbeddings)  # inherited method, patched on the class
    floor.uninstall()
    try:
        assert HuggingFaceEmbeddings._embed is patched[0].__wrapped__
        assert SyncAPIClient._send_request is patched[3].__wrapped__
        assert "aembed_query" not in vars(HuggingFaceEmbeddings)
    finally:
        floor.install()
    assert hasattr(HuggingFaceEmbeddings._embed, "__wrapped__")
