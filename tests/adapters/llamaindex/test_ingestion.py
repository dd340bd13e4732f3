"""Ingestion lowered to node parser -> Embed -> Ingest writes the rows stock LlamaIndex writes:
same ids, node ids, text and metadata, embeddings within float tolerance, on pgserver Postgres."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import numpy as np
import pytest

import accel
from accel.adapters.common.dropin import state_of
from accel.adapters.llamaindex.indexing import IndexLowering, PipelineLowering

from .conftest import Recorder

WORDS = ["harbour", "lantern", "quiet", "copper", "orchard", "winter", "signal", "meadow", "ledger", "violet"]


def documents(n: int = 4, words: int = 180) -> list[Any]:
    from llama_index.core import Document

    docs = []
    for d in range(n):
        text = " ".join(f"{WORDS[(d * 7 + i * 3) % len(WORDS)]}{'.' if i % 11 == 10 else ''}" for i in range(words))
        docs.append(Document(id_=f"doc-{d}", text=text, metadata={"source": f"upload-{d}.txt", "page": d}))
    return docs


def splitter() -> Any:
    from llama_index.core.node_parser import SentenceSplitter

    return SentenceSplitter(chunk_size=48, chunk_overlap=8, id_func=lambda i, doc: f"{doc.id_}-chunk-{i}")


def make_store(dsn: str, dim: int = 384) -> Any:
    from llama_index.vector_stores.postgres import PGVectorStore

    return PGVectorStore.from_params(
        connection_string=dsn.replace("postgresql://", "postgresql+psycopg2://", 1),
        async_connection_string=dsn.replace("postgresql://", "postgresql+asyncpg://", 1),
        table_name=f"ing_{uuid.uuid4().hex[:8]}",
        embed_dim=dim,
    )


def rows(dsn: str, store: Any) -> list[tuple[Any, ...]]:
    import psycopg
    from pgvector.psycopg import register_vector

    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        table = f'"{store.schema_name}"."data_{store.table_name}"'
        return conn.execute(f"SELECT id, node_id, text, metadata_, embedding FROM {table} ORDER BY id").fetchall()


def assert_same_rows(stock: list[tuple[Any, ...]], ours: list[tuple[Any, ...]]) -> None:
    assert len(stock) > 4 and len(ours) == len(stock)
    assert [r[:4] for r in ours] == [r[:4] for r in stock]
    for a, b in zip(stock, ours, strict=True):
        assert np.allclose(np.asarray(a[4]), np.asarray(b[4]), atol=1e-5)


@pytest.mark.engines
def test_pipeline_writes_the_stock_rows(pg_dsn: str, embed_model: Any, recorder: Recorder) -> None:
    from llama_index.core.ingestion import IngestionPipeline

    stock_store, fast_store = make_store(pg_dsn), make_store(pg_dsn)
    stock_nodes = IngestionPipeline(transformations=[splitter(), embed_model], vector_store=stock_store).run(documents=documents())
    stock_events = recorder.take()
    fast = accel.wrap(IngestionPipeline(transformations=[splitter(), embed_model], vector_store=fast_store))
    assert type(fast) is not IngestionPipeline and isinstance(fast, IngestionPipeline)
    assert isinstance(state_of(fast).helper, PipelineLowering)
    fast_nodes = fast.run(documents=documents())
    assert [n.node_id for n in fast_nodes] == [n.node_id for n in stock_nodes]
    assert_same_rows(rows(pg_dsn, stock_store), rows(pg_dsn, fast_store))
    assert sorted(recorder.take()) == sorted(stock_events)  # one EmbeddingStart/End pair per stock batch
    text = fast.explain()
    assert "Embed (micro-batched)" in text and "PGVectorStore.add -> Ingest" in text and "micro-batches of" in text


@pytest.mark.engines
async def test_concurrent_pipelines_each_write_their_own_rows(pg_dsn: str, embed_model: Any) -> None:
    from llama_index.core.ingestion import IngestionPipeline

    docs = documents(3)
    stock_store = make_store(pg_dsn)
    await asyncio.to_thread(IngestionPipeline(transformations=[splitter(), embed_model], vector_store=stock_store).run,
                            documents=docs)
    stores = [make_store(pg_dsn) for _ in range(3)]
    pipelines = [accel.wrap(IngestionPipeline(transformations=[splitter(), embed_model], vector_store=s)) for s in stores]
    await asyncio.gather(*(p.arun(documents=documents(3)) for p in pipelines))
    expected = rows(pg_dsn, stock_store)
    for store in stores:
        assert_same_rows(expected, rows(pg_dsn, store))


@pytest.mark.engines
def test_failed_write_raises_the_stock_error_and_writes_nothing(pg_dsn: str, embed_model: Any) -> None:
    from llama_index.core.ingestion import IngestionPipeline

    stock_store, fast_store = make_store(pg_dsn, dim=8), make_store(pg_dsn, dim=8)
    with pytest.raises(Exception) as stock:
        IngestionPipeline(transformations=[splitter(), embed_model], vector_store=stock_store).run(documents=documents(2))
    fast = accel.wrap(IngestionPipeline(transformations=[splitter(), embed_model], vector_store=fast_store))
    with pytest.raises(Exception) as ours:
        fast.run(documents=documents(2))
    assert type(ours.value) is type(stock.value)
    assert rows(pg_dsn, fast_store) == rows(pg_dsn, stock_store) == []


@pytest.mark.engines
def test_from_documents_builds_the_stock_index(pg_dsn: str, embed_model: Any) -> None:
    from llama_index.core import StorageContext, VectorStoreIndex

    def build(cls: Any) -> tuple[Any, Any]:
        store = make_store(pg_dsn)
        index = cls.from_documents(documents(), storage_context=StorageContext.from_defaults(vector_store=store),
                                   embed_model=embed_model, transformations=[splitter()])
        return store, index

    stock_store, stock_index = build(VectorStoreIndex)
    wrapped = accel.wrap(VectorStoreIndex)
    assert wrapped is not VectorStoreIndex and issubclass(wrapped, VectorStoreIndex)
    assert isinstance(state_of(wrapped).helper, IndexLowering)
    fast_store, fast_index = build(wrapped)
    assert type(fast_index) is VectorStoreIndex
    assert_same_rows(rows(pg_dsn, stock_store), rows(pg_dsn, fast_store))
    assert fast_index.index_struct.nodes_dict == stock_index.index_struct.nodes_dict
    assert fast_index.docstore.get_all_document_hashes() == stock_index.docstore.get_all_document_hashes()
    question = "copper orchard in winter"
    stock_hits = stock_index.as_retriever(similarity_top_k=3).retrieve(question)
    fast_hits = fast_index.as_retriever(similarity_top_k=3).retrieve(question)
    assert [h.node.node_id for h in fast_hits] == [h.node.node_id for h in stock_hits]


@pytest.mark.engines
def test_in_memory_from_documents_with_the_embedding_as_a_transformation(embed_model: Any) -> None:
    from llama_index.core import VectorStoreIndex

    stock = VectorStoreIndex.from_documents(documents(2), transformations=[splitter(), embed_model], embed_model=embed_model)
    fast = accel.wrap(VectorStoreIndex).from_documents(documents(2), transformations=[splitter(), embed_model],
                                                         embed_model=embed_model)
    stock_data, fast_data = stock.vector_store.data.embedding_dict, fast.vector_store.data.embedding_dict
    assert sorted(fast_data) == sorted(stock_data) and len(stock_data) > 2
    for node_id, vector in stock_data.items():
        assert np.allclose(fast_data[node_id], vector, atol=1e-5)
