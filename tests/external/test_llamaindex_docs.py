"""LlamaIndex apps transcribed from LlamaIndex's own documentation (tests/external/apps/li_*.py),
stock vs `accel.wrap`: the same responses (text, source node ids, scores within 1e-5) and the
same engine requests, one `query` at a time and with `asyncio.gather` of `aquery`; and
`explain()` shows the retrieval and the synthesis lowered where accel claims support, so no
test passes by running everything as-is."""

from __future__ import annotations

import uuid

import pytest

import accel

from .apps import li_pgvector, li_starter
from .fidelity import compare_llamaindex

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
