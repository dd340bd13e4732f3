"""LlamaIndex apps transcribed from LlamaIndex's own documentation (tests/external/apps/li_*.py),
stock vs `accel.wrap`: the same responses (text, source node ids, scores within 1e-5) and the
same engine requests, one `query` at a time and with `asyncio.gather` of `aquery`; and
`explain()` shows the retrieval and the synthesis lowered where accel claims support, so no
test passes by running everything as-is."""

from __future__ import annotations

import pytest

import accel

from .apps import li_starter
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
