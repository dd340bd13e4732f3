"""Rerank ahead behind a QueryFusionRetriever (real engines: vLLM, MiniLM, the offline
cross-encoder, pgvector): the wrapped query engine answers as stock, with the same nodes,
scores and LLM requests; the cross-encoder scores exactly the pairs stock scores, each once,
the pairs of each search as it returns; a fusion that may cut its chunks is not scored ahead.
A server rerank's own call runs on the session loop only when the sheet holds every pair."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import pytest

import accel
from accel.testing.recording import record_requests

from .conftest import QUESTIONS
from .test_query_engine import compare


def fusion_engine(pg_index: Any, llm: Any, reranker_dir: Any, keep: int, top_ks: tuple[int, ...] = (3,)) -> Any:
    from llama_index.core.postprocessor import SentenceTransformerRerank
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import QueryFusionRetriever

    fusion = QueryFusionRetriever([pg_index.as_retriever(similarity_top_k=k) for k in top_ks], llm=llm, num_queries=3,
                                  similarity_top_k=keep, mode="simple", use_async=False)
    rerank = SentenceTransformerRerank(model=str(reranker_dir), top_n=2, device="cpu")
    return RetrieverQueryEngine.from_args(fusion, llm=llm, node_postprocessors=[rerank])


@pytest.mark.engines
def test_fusion_rerank_scored_ahead_answers_as_stock(pg_index: Any, llm: Any, llm_proxy: Any, reranker_dir: Any) -> None:
    engine = fusion_engine(pg_index, llm, reranker_dir, keep=9)
    explained = accel.wrap(engine).explain()
    assert "pairs scored ahead per search" in explained
    assert "rerank_ahead" in explained.split("streams item by item into", 1)[1]  # decode pipelining maps it
    compare(engine, llm_proxy, QUESTIONS)


@pytest.mark.engines
@pytest.mark.parametrize("top_ks", [(3,), (2, 4)], ids=["one retriever", "two retrievers"])
def test_each_pair_is_scored_once_as_stock_scores_it(pg_index: Any, llm: Any, reranker_dir: Any,
                                                     top_ks: tuple[int, ...]) -> None:
    """Two sub-retrievers over one index find the same chunks: the sheet hands each pair out once."""
    engine = fusion_engine(pg_index, llm, reranker_dir, keep=3 * sum(top_ks), top_ks=top_ks)
    fast = accel.wrap(engine)
    explained = fast.explain()
    assert "pairs scored ahead per search" in explained
    assert all(f"r{i}.rerank_ahead" in explained for i in range(len(top_ks)))
    fast.query(QUESTIONS[0])  # warm: templates and engines
    for question in QUESTIONS:
        with record_requests() as stock:
            engine.query(question)
        with record_requests() as ours:
            fast.query(question)
        assert stock.scored and Counter(ours.scored) == Counter(stock.scored), question


@pytest.mark.engines
def test_a_fusion_that_may_cut_its_chunks_is_not_scored_ahead(pg_index: Any, llm: Any, llm_proxy: Any,
                                                               reranker_dir: Any) -> None:
    engine = fusion_engine(pg_index, llm, reranker_dir, keep=4)  # up to 9 chunks, 4 kept
    explained = accel.wrap(engine).explain()
    assert "SentenceTransformerRerank(top_n=2) -> Rerank" in explained and "pairs scored ahead per search" not in explained
    compare(engine, llm_proxy, QUESTIONS[:2])


class _RecordingPostprocessor:
    """A stand-in for `CohereRerank` (no server): records where its call ran and the sheet it saw."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, Any]] = []

    def postprocess_nodes(self, nodes: list[Any], query_bundle: Any) -> list[Any]:
        from accel.adapters.common.rerank_ahead import current

        self.calls.append((threading.get_ident(), current()))
        return nodes[:1]


@pytest.mark.parametrize("complete", [True, False])
def test_the_postprocessor_runs_on_the_loop_only_with_every_pair_on_the_sheet(complete: bool) -> None:
    pytest.importorskip("cohere")
    import cohere.v2.client  # noqa: F401  (the floor patches it on import)
    from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

    from accel.adapters.common import floor
    from accel.adapters.common.rerank_ahead import ScoreSheet
    from accel.adapters.llamaindex import rerank_ahead

    floor.install()
    nodes = [NodeWithScore(node=TextNode(text=t, metadata={"n": i}), score=0.5) for i, t in enumerate(["heaps", "bisect"])]
    pairs = [("q", n.node.get_content(metadata_mode=MetadataMode.EMBED)) for n in nodes]
    sheet = ScoreSheet()
    sheet.fill(pairs if complete else pairs[:1], [0.9, 0.1][: len(pairs) if complete else 1])
    post = _RecordingPostprocessor()
    before = rerank_ahead.unanswered[_RecordingPostprocessor]

    async def main() -> int:
        out = await rerank_ahead.SheetedPostprocessOp(post).compute({"query": "q", "nodes": nodes, "sheet": sheet})
        assert out == nodes[:1]
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    [(ran_on, seen)] = post.calls
    assert seen is sheet
    assert (ran_on == loop_thread) is complete
    assert rerank_ahead.unanswered[_RecordingPostprocessor] == before + (not complete)
