"""Stock's exception types under `accel.wrap` (issue 26): an engine down, and a PGVector store
called the way it refuses. Code that catches the stock exception must keep working.

- Postgres down under a chain with user code before its retriever (no stock re-run is allowed
  once user code ran): SQLAlchemy's `OperationalError`, as stock, sync and async.
- vLLM down: `openai.APIConnectionError`, as stock.
- An embedding server down under a lowered retriever over `OpenAIEmbeddings`:
  `openai.APIConnectionError`, as stock.
- An async call over a sync-mode PGVector (or a sync call over an async-mode one): stock's
  `AssertionError`, where accel used to answer (and raised it only when Postgres was down)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import accel
from accel.engines.errors import EngineError
from accel.engines.llm.server import free_port
from accel.engines.vectordb import stop_local_postgres

from .conftest import TINY, sqlalchemy_url

pytestmark = pytest.mark.engines


def _rag(store: Any, model: Any) -> Any:
    """A docs-style RAG chain whose first step is user code."""
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}\nAnswer:")
    fmt = RunnableLambda(lambda docs: "\n".join(d.page_content for d in docs))
    retriever = store.as_retriever(search_kwargs={"k": 2})
    return (RunnableLambda(lambda q: q.strip()) | {"context": retriever | fmt, "question": RunnablePassthrough()}
            | prompt | model | StrOutputParser())


def _store(dsn: str, embeddings: Any, texts: list[str], *, async_mode: bool) -> Any:
    from langchain_postgres import PGVector

    return PGVector(embeddings=embeddings, collection_name=f"lc_down_{uuid.uuid4().hex[:8]}",
                    connection=sqlalchemy_url(dsn), use_jsonb=True, async_mode=async_mode)


async def _raised(chain: Any, asynchronous: bool) -> BaseException:
    try:
        if asynchronous:
            await chain.ainvoke(" How do I decode JSON? ")
        else:
            chain.invoke(" How do I decode JSON? ")
    except Exception as error:  # noqa: BLE001 - what was raised is what the test compares
        return error
    raise AssertionError("the chain answered")


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_postgres_down_after_user_code_raises_what_stock_raises(doomed_postgres, embeddings, doc_texts,
                                                                      chat_model, asynchronous):
    dsn, data = doomed_postgres
    store = _store(dsn, embeddings, doc_texts, async_mode=asynchronous)
    if asynchronous:
        await store.aadd_texts(doc_texts[:8])
    else:
        store.add_texts(doc_texts[:8])
    stock, fast = _rag(store, chat_model), accel.wrap(_rag(store, chat_model))
    question = " How do I decode JSON? "
    assert (await fast.ainvoke(question)) if asynchronous else fast.invoke(question)  # up and warm
    stop_local_postgres(data)
    expected = await _raised(stock, asynchronous)
    ours = await _raised(fast, asynchronous)
    assert type(ours) is type(expected), (ours, expected)
    assert isinstance(ours.__cause__, EngineError)  # accel's error, naming engine and remedy, is kept


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_llm_down_raises_what_stock_raises(vectorstore, asynchronous):
    from langchain_openai import ChatOpenAI

    dead = ChatOpenAI(base_url=f"http://127.0.0.1:{free_port()}/v1", api_key="EMPTY", model=TINY, max_retries=0)
    expected = await _raised(_rag(vectorstore, dead), asynchronous)
    ours = await _raised(accel.wrap(_rag(vectorstore, dead)), asynchronous)
    assert type(ours) is type(expected), (ours, expected)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_embedding_server_down_after_user_code_raises_what_stock_raises(pg_dsn, asynchronous):
    """The retriever over server embeddings is lowered (its Embed runs on accel's server
    engine), and the user code before it has run when the Embed finds the server gone. The
    chat model is a fake, so the only engine that can fail is the embedding server."""
    from langchain_core.language_models import FakeListChatModel
    from langchain_openai import OpenAIEmbeddings

    chat_model = FakeListChatModel(responses=["an answer"])
    dead = OpenAIEmbeddings(base_url=f"http://127.0.0.1:{free_port()}/v1", model="minilm", api_key="EMPTY",
                            check_embedding_ctx_length=False, max_retries=0)
    store = _store(pg_dsn, dead, [], async_mode=asynchronous)
    fast = accel.wrap(_rag(store, chat_model))
    assert "Embed (server minilm)" in fast.explain(), fast.explain()
    expected = await _raised(_rag(store, chat_model), asynchronous)
    ours = await _raised(fast, asynchronous)
    assert type(ours) is type(expected), (ours, expected)
    assert isinstance(ours.__cause__, EngineError)


@pytest.mark.parametrize("async_mode", [False, True], ids=["sync-store", "async-store"])
async def test_a_call_the_store_refuses_raises_as_stock(pg_dsn, embeddings, doc_texts, chat_model, async_mode):
    store = _store(pg_dsn, embeddings, doc_texts, async_mode=async_mode)
    refused = not async_mode  # the entry kind the store refuses: async for a sync-mode store
    expected = await _raised(_rag(store, chat_model), refused)
    ours = await _raised(accel.wrap(_rag(store, chat_model)), refused)
    assert type(ours) is type(expected) is AssertionError, (ours, expected)
