"""An engine down: a wrapped query engine raises the exception type the stock one raises
(issue 26: accel raised its own `EngineUnavailable` where stock raises `openai.APIConnectionError`
for a dead vLLM and SQLAlchemy's `OperationalError` for a dead Postgres, so an app's `except`
clauses broke under accel). Sync and async, each engine going down after the first answer."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import accel
from accel.engines.errors import EngineError
from accel.engines.llm.server import free_port
from accel.engines.vectordb import stop_local_postgres

from .conftest import make_llm, text_nodes

pytestmark = pytest.mark.engines


def _index(dsn: str, embed_model: Any) -> Any:
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.vector_stores.postgres import PGVectorStore

    store = PGVectorStore.from_params(
        connection_string=dsn.replace("postgresql://", "postgresql+psycopg2://", 1),
        async_connection_string=dsn.replace("postgresql://", "postgresql+asyncpg://", 1),
        table_name="li_down", embed_dim=384)
    return VectorStoreIndex(text_nodes(), storage_context=StorageContext.from_defaults(vector_store=store),
                            embed_model=embed_model)


async def _raised(engine: Any, asynchronous: bool) -> BaseException:
    try:
        if asynchronous:
            await engine.aquery("music at dawn")
        else:
            engine.query("music at dawn")
    except Exception as error:  # noqa: BLE001 - what was raised is what the test compares
        return error
    raise AssertionError("the query answered with its engine down")


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_postgres_down_raises_what_stock_raises(doomed_postgres, embed_model, llm, asynchronous):
    dsn, data = doomed_postgres
    stock = _index(dsn, embed_model).as_query_engine(llm=llm, similarity_top_k=2)
    fast = accel.wrap(_index(dsn, embed_model).as_query_engine(llm=llm, similarity_top_k=2))
    answer = (await fast.aquery("baking bread")) if asynchronous else fast.query("baking bread")
    assert answer.response  # the engines are up and warm
    stop_local_postgres(data)
    expected = await _raised(stock, asynchronous)
    ours = await _raised(fast, asynchronous)
    assert type(ours) is type(expected), (ours, expected)
    assert isinstance(ours.__cause__, EngineError)  # accel's error, naming engine and remedy, is kept


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_llm_down_raises_what_stock_raises(pg_index, embed_model, vllm_server, asynchronous):
    from .conftest import fresh_pg_index

    index = fresh_pg_index(pg_index, embed_model) if asynchronous else pg_index
    dead = SimpleNamespace(url=f"http://127.0.0.1:{free_port()}")  # a port nothing listens on
    llm = make_llm(dead, vllm_server, max_retries=0)
    expected = await _raised(index.as_query_engine(llm=llm, similarity_top_k=2), asynchronous)
    ours = await _raised(accel.wrap(index.as_query_engine(llm=llm, similarity_top_k=2)), asynchronous)
    assert type(ours) is type(expected), (ours, expected)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_embedding_server_down_raises_what_stock_raises(pg_dsn, embed_model, asynchronous):
    """The query's embedding is lowered onto accel's server engine (`OpenAILikeEmbedding`), and
    the server is gone: the OpenAI client's `APIConnectionError`, as stock. The LLM is a mock,
    so the only engine that can fail is the embedding server."""
    from llama_index.core.llms import MockLLM
    from llama_index.embeddings.openai_like import OpenAILikeEmbedding

    dead = OpenAILikeEmbedding(model_name="minilm", api_base=f"http://127.0.0.1:{free_port()}/v1", api_key="EMPTY",
                               max_retries=0)
    index = _index(pg_dsn, embed_model)
    fast = accel.wrap(index.as_query_engine(llm=MockLLM(), similarity_top_k=2, embed_model=dead))
    assert "OpenAILikeEmbedding -> Embed" in fast.explain(), fast.explain()
    expected = await _raised(index.as_query_engine(llm=MockLLM(), similarity_top_k=2, embed_model=dead), asynchronous)
    ours = await _raised(fast, asynchronous)
    assert type(ours) is type(expected), (ours, expected)
    assert isinstance(ours.__cause__, EngineError)
