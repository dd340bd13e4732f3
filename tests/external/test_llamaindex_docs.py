"""LlamaIndex apps transcribed from LlamaIndex's own documentation (tests/external/apps/li_*.py),
stock vs `accel.wrap`: the same responses (text, source node ids, scores within 1e-5) and the
same engine requests, one `query` at a time and with `asyncio.gather` of `aquery`; and
`explain()` shows the retrieval and the synthesis lowered where accel claims support, so no
test passes by running everything as-is."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import accel

from .apps import li_ingestion_pipeline, li_pgvector, li_query_engine_usage, li_sentence_transformer_rerank, li_simple_fusion, li_starter
from .fidelity import assert_same_requests, assert_same_response, compare_llamaindex, record

pytestmark = [pytest.mark.engines, pytest.mark.slow]


def lowered_part(explained: str) -> str:
    return explained.split("opaque")[0]


def opaque_part(explained: str) -> str:
    return explained.split("opaque", 1)[1].split("retrieval e-graph")[0]


@pytest.fixture
def starter(llama_settings, base_url, model_name, minilm_path, pydoc_dir):
    li_starter.configure(base_url, model_name, minilm_path)
    return li_starter.build(str(pydoc_dir))


async def test_starter_tutorial_query_engine(starter, llm_proxy, questions) -> None:
    _, query_engine, search_documents = starter
    fast = accel.wrap(query_engine)
    explained = fast.explain()
    assert "HuggingFaceEmbedding -> Embed" in lowered_part(explained), explained
    assert "CompactAndRefine on OpenAILike -> Prefill/Decode" in lowered_part(explained), explained
    assert "SimpleVectorStore" in opaque_part(explained)  # the in-memory store searches in process
    runs = await compare_llamaindex(query_engine, fast, questions, llm_proxy)
    assert len(runs[0].embedded) == len(questions)
    # the tutorial's tool function answers the same through the query engine it closes over
    assert [await search_documents(q) for q in questions] == [o.response for o in runs[0].outputs]


async def test_starter_tutorial_index_built_through_accel(starter, llama_settings, pydoc_dir, llm_proxy, questions) -> None:
    """`accel.wrap(VectorStoreIndex).from_documents(...)`: the tutorial's indexing call with the
    embedding on accel's engine builds the index stock builds (ids aside: the reader draws uuids)."""
    from llama_index.core import VectorStoreIndex

    import numpy as np

    stock_index, stock_engine, _ = starter
    wrapped_class = accel.wrap(VectorStoreIndex)
    assert "Embed (micro-batched)" in wrapped_class.explain(), wrapped_class.explain()
    index, query_engine, _ = li_starter.build(str(pydoc_dir), wrapped_class)
    assert type(index) is VectorStoreIndex

    def nodes(ix):
        data = ix.vector_store.data
        stored = sorted(ix.docstore.docs.values(), key=lambda n: n.get_content())
        return [(n.get_content(), n.metadata, data.embedding_dict[n.node_id]) for n in stored]

    mine, theirs = nodes(index), nodes(stock_index)
    assert len(mine) == len(theirs) > 4
    for (text, meta, vec), (s_text, s_meta, s_vec) in zip(mine, theirs, strict=True):
        assert (text, meta) == (s_text, s_meta) and np.allclose(vec, s_vec, atol=1e-5)
    for q in questions:
        s, o = stock_engine.query(q), query_engine.query(q)
        assert o.response == s.response
        assert [n.get_content() for n in o.source_nodes] == [n.get_content() for n in s.source_nodes]
        assert [n.score for n in o.source_nodes] == pytest.approx([n.score for n in s.source_nodes], abs=1e-5)


async def test_starter_tutorial_reloaded_index(starter, llm_proxy, questions, tmp_path) -> None:
    index, _, _ = starter
    query_engine = li_starter.persist_and_reload(index, str(tmp_path / "storage"))
    fast = accel.wrap(query_engine)
    assert "CompactAndRefine on OpenAILike" in lowered_part(fast.explain())
    await compare_llamaindex(query_engine, fast, questions, llm_proxy)


def table() -> str:
    return f"ext_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def local_settings(llama_settings, base_url, model_name, minilm_path) -> None:
    """The LlamaIndex pages rely on `Settings` (OpenAI by default): the starter tutorial's local stand-ins."""
    li_starter.configure(base_url, model_name, minilm_path)


async def test_pgvector_guide_create_and_query_existing_index(local_settings, pydoc_dir, pg_dsn, llm_proxy, questions) -> None:
    name = table()
    for query_engine in (li_pgvector.create_index(str(pydoc_dir), pg_dsn, name), li_pgvector.existing_index(pg_dsn, name)):
        fast = accel.wrap(query_engine)
        explained = fast.explain()
        assert "HuggingFaceEmbedding -> Embed" in lowered_part(explained), explained
        assert "CompactAndRefine on OpenAILike -> Prefill/Decode" in lowered_part(explained), explained
        assert "PGVectorStore: halfvec columns and HNSW search settings" in opaque_part(explained), explained
        await compare_llamaindex(query_engine, fast, questions, llm_proxy)


@pytest.fixture
def hybrid_index(local_settings, pydoc_dir, pg_dsn):
    return li_pgvector.hybrid_index(str(pydoc_dir), pg_dsn, table())


async def test_pgvector_guide_hybrid_search(hybrid_index, llm_proxy, questions) -> None:
    query_engine = li_pgvector.hybrid_query_engine(hybrid_index)
    fast = accel.wrap(query_engine)
    explained = fast.explain()
    assert "CompactAndRefine on OpenAILike -> Prefill/Decode" in lowered_part(explained), explained
    assert "only the default dense query mode is lowered" in opaque_part(explained), explained
    await compare_llamaindex(query_engine, fast, questions, llm_proxy)


async def test_pgvector_guide_hybrid_fusion_retriever(hybrid_index, llm_proxy, questions) -> None:
    query_engine = li_pgvector.fusion_query_engine(hybrid_index)
    fast = accel.wrap(query_engine)
    explained = fast.explain()
    assert "CompactAndRefine on OpenAILike -> Prefill/Decode" in lowered_part(explained), explained
    assert "QueryFusionRetriever" in opaque_part(explained), explained
    await compare_llamaindex(query_engine, fast, questions, llm_proxy)


async def test_sentence_transformer_rerank(llama_settings, pydoc_dir, base_url, model_name, minilm_path, reranker_dir,
                                           llm_proxy, questions) -> None:
    with_rerank, without_rerank = li_sentence_transformer_rerank.build(str(pydoc_dir), base_url, model_name, minilm_path,
                                                                       reranker_dir)
    fast = accel.wrap(with_rerank)
    explained = fast.explain()
    assert "SentenceTransformerRerank(top_n=3) -> Rerank" in lowered_part(explained), explained
    assert "CompactAndRefine on OpenAILike -> Prefill/Decode" in lowered_part(explained), explained
    runs = await compare_llamaindex(with_rerank, fast, questions, llm_proxy)
    assert all(len(r.source_nodes) == 3 for r in runs[0].outputs)
    assert runs[0].scored  # the cross-encoder scored the retrieved nodes
    await compare_llamaindex(without_rerank, accel.wrap(without_rerank), questions, llm_proxy)


def pg_storage(dsn: str):
    from llama_index.core import StorageContext
    from llama_index.vector_stores.postgres import PGVectorStore

    store = PGVectorStore.from_params(**li_pgvector.connection_strings(dsn), table_name=table(), embed_dim=384)
    return StorageContext.from_defaults(vector_store=store)


@pytest.mark.parametrize("store", ["in_memory", "pgvector"])
async def test_simple_fusion_retriever(local_settings, pydoc_files, pg_dsn, llm_proxy, questions, store) -> None:
    storage = None if store == "in_memory" else [pg_storage(pg_dsn), pg_storage(pg_dsn)]
    query_engine = li_simple_fusion.build(pydoc_files[:2], pydoc_files[2:], storage)
    fast = accel.wrap(query_engine)
    explained = fast.explain()
    assert "CompactAndRefine on OpenAILike -> Prefill/Decode" in lowered_part(explained), explained
    if store == "pgvector":  # accel lowers fusion over stores it searches itself
        assert "QueryFusionRetriever(4 queries" in lowered_part(explained), explained
    else:
        assert "QueryFusionRetriever: sub-retriever: SimpleVectorStore" in opaque_part(explained), explained
    # use_async=True: the stock sync `query` runs the sub-retrievals in an event loop of its
    # own, where PGVectorStore's asyncpg connections fail ("attached to a different loop"; the
    # page runs in a notebook under nest_asyncio). An async app awaits `aquery` instead.
    modes = ("query", "gather") if store == "in_memory" else ("aquery", "gather")
    runs = await compare_llamaindex(query_engine, fast, questions, llm_proxy, modes)
    assert len(runs[0].llm) >= 2 * len(questions)  # query generation, then synthesis


@pytest.fixture
def starter_index(starter):
    return starter[0]


@pytest.mark.parametrize("mode", li_query_engine_usage.RESPONSE_MODES)
async def test_query_engine_high_level_response_modes(starter_index, llm_proxy, questions, mode) -> None:
    query_engine = li_query_engine_usage.high_level(starter_index, mode)
    fast = accel.wrap(query_engine)
    explained = fast.explain()
    assert "HuggingFaceEmbedding -> Embed" in lowered_part(explained), explained
    synthesizer = type(query_engine._response_synthesizer).__name__
    if mode in ("no_text", "compact_accumulate"):
        assert synthesizer in opaque_part(explained), explained
    else:
        assert f"{synthesizer} on OpenAILike -> Prefill/Decode" in lowered_part(explained), explained
    if mode == "no_text":  # no LLM call at all: compare the retrieval only
        stock = [await asyncio.to_thread(query_engine.query, q) for q in questions]
        ours = [await asyncio.to_thread(fast.query, q) for q in questions]
        for s, o in zip(stock, ours, strict=True):
            assert_same_response(s, o)
        return
    await compare_llamaindex(query_engine, fast, questions, llm_proxy)


async def test_query_engine_low_level_composition(starter_index, llm_proxy, questions) -> None:
    query_engine = li_query_engine_usage.low_level(starter_index)
    fast = accel.wrap(query_engine)
    assert "TreeSummarize on OpenAILike -> Prefill/Decode" in lowered_part(fast.explain())
    await compare_llamaindex(query_engine, fast, questions, llm_proxy)


def test_query_engine_streaming(starter_index, llm_proxy, questions) -> None:
    """The usage page's streaming engine: `query_engine.query(...)` then `print_response_stream()`."""
    query_engine = li_query_engine_usage.streaming(starter_index)
    fast = accel.wrap(query_engine)
    assert "CompactAndRefine on OpenAILike -> Prefill/Decode" in lowered_part(fast.explain())

    def streamed(engine):
        responses = [engine.query(q) for q in questions]
        return [(r, list(r.response_gen)) for r in responses]

    stock = record(lambda: streamed(query_engine), llm_proxy)
    ours = record(lambda: streamed(fast), llm_proxy)
    for (s, s_tokens), (o, o_tokens) in zip(stock.outputs, ours.outputs, strict=True):
        assert type(o) is type(s)
        assert "".join(o_tokens) == "".join(s_tokens)
        assert all(isinstance(t, str) for t in o_tokens)
        assert [n.node.node_id for n in o.source_nodes] == [n.node.node_id for n in s.source_nodes]
        assert [n.score for n in o.source_nodes] == pytest.approx([n.score for n in s.source_nodes], abs=1e-5)
    assert_same_requests(stock, ours)


async def test_custom_query_engine_runs_as_is(starter_index, llm_proxy, questions) -> None:
    query_engine = li_query_engine_usage.custom(starter_index)
    fast = accel.wrap(query_engine)
    assert "opaque, run as-is" in fast.explain()  # accel lowers RetrieverQueryEngine only
    await compare_llamaindex(query_engine, fast, questions, llm_proxy)



def node_view(nodes) -> list[tuple[str, dict]]:
    """What an ingestion produces apart from the random ids (`Document.example()` and the
    splitter's default `id_func` draw fresh uuids every run)."""
    return [(n.get_content(), dict(n.metadata)) for n in nodes]


def assert_same_nodes(stock, ours) -> None:
    import numpy as np

    assert len(stock) > 4 and node_view(ours) == node_view(stock)
    for a, b in zip(stock, ours, strict=True):
        assert np.allclose(np.asarray(a.embedding), np.asarray(b.embedding), atol=1e-5)


def store_rows(dsn: str, store) -> list[tuple]:
    import psycopg
    from pgvector.psycopg import register_vector

    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        table = f'"{store.schema_name}"."data_{store.table_name}"'
        return conn.execute(f"SELECT text, metadata_->>'document_title', metadata_->>'filename', embedding FROM {table} "
                            "ORDER BY text").fetchall()


async def test_ingestion_pipeline_usage_pattern(local_settings, minilm_path, llm_proxy) -> None:
    stock_pipeline = li_ingestion_pipeline.pipeline(minilm_path)
    fast = accel.wrap(li_ingestion_pipeline.pipeline(minilm_path))
    assert "Embed (micro-batched)" in fast.explain(), fast.explain()
    stock = record(lambda: li_ingestion_pipeline.run(stock_pipeline), llm_proxy)
    ours = record(lambda: li_ingestion_pipeline.run(fast), llm_proxy)
    assert_same_nodes(stock.outputs, ours.outputs)
    assert all("document_title" in n.metadata for n in ours.outputs)
    assert stock.llm  # TitleExtractor asked the LLM for titles
    assert_same_requests(stock, ours)
    # "Async Support": fresh pipelines (a pipeline caches node + transformation pairs)
    stock_nodes = await li_ingestion_pipeline.arun(li_ingestion_pipeline.pipeline(minilm_path))
    fast_nodes = await li_ingestion_pipeline.arun(accel.wrap(li_ingestion_pipeline.pipeline(minilm_path)))
    assert_same_nodes(stock_nodes, fast_nodes)


def test_ingestion_pipeline_into_a_vector_store(local_settings, minilm_path, pg_dsn, llm_proxy, questions) -> None:
    from llama_index.vector_stores.postgres import PGVectorStore

    def store():
        return PGVectorStore.from_params(**li_pgvector.connection_strings(pg_dsn), table_name=table(), embed_dim=384)

    stock_store, fast_store = store(), store()
    li_ingestion_pipeline.run(li_ingestion_pipeline.pipeline(minilm_path, stock_store))
    fast = accel.wrap(li_ingestion_pipeline.pipeline(minilm_path, fast_store))
    assert "PGVectorStore.add -> Ingest" in fast.explain(), fast.explain()
    li_ingestion_pipeline.run(fast)
    stock_rows, fast_rows = store_rows(pg_dsn, stock_store), store_rows(pg_dsn, fast_store)
    assert len(stock_rows) > 4 and [r[:3] for r in fast_rows] == [r[:3] for r in stock_rows]
    import numpy as np

    assert all(np.allclose(np.asarray(a[3]), np.asarray(b[3]), atol=1e-5) for a, b in zip(stock_rows, fast_rows, strict=True))
    # the guide then builds its index from the store: the two answer the same
    stock_engine = li_ingestion_pipeline.index_from(stock_store).as_query_engine()
    fast_engine = li_ingestion_pipeline.index_from(fast_store).as_query_engine()
    for q in questions[:2]:
        s, o = stock_engine.query(q), fast_engine.query(q)
        assert o.response == s.response and [n.get_content() for n in o.source_nodes] == [n.get_content() for n in s.source_nodes]
