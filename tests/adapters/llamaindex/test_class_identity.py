"""LlamaIndex classes are told apart by identity: a user's class that only shares a name with
one of LlamaIndex's (a synthesizer named `Refine`, a postprocessor named
`SentenceTransformerRerank`) is user code, run as-is, while the stock class is still lowered,
whichever module it was imported from. On the real engines, with stock's answers."""

from __future__ import annotations

from typing import Any

import pytest

import accel

from .test_query_engine import compare

QUESTION = "Which animal sleeps in the storm?"


def _user_refine() -> type:
    """A user's synthesizer named `Refine`: LlamaIndex's refine with its own answer on top."""
    from llama_index.core.response_synthesizers.refine import Refine as StockRefine

    class Refine(StockRefine):
        def get_response(self, query_str: str, text_chunks: Any, prev_response: Any = None, **kwargs: Any) -> Any:
            return f"[user] {super().get_response(query_str, text_chunks, prev_response, **kwargs)}"

        async def aget_response(self, query_str: str, text_chunks: Any, prev_response: Any = None, **kwargs: Any) -> Any:
            return f"[user] {await super().aget_response(query_str, text_chunks, prev_response, **kwargs)}"

    return Refine


def test_stock_classes_are_known_by_any_import_path() -> None:
    from llama_index.core.llms import MockLLM  # only constructs the synthesizers: nothing is called
    from llama_index.core.response_synthesizers import Refine, TreeSummarize
    from llama_index.core.response_synthesizers.tree_summarize import TreeSummarize as DefinedTree

    from accel.adapters.llamaindex.synthesis import SynthKind

    llm = MockLLM()
    assert SynthKind.of(Refine(llm=llm)) is SynthKind.REFINE
    assert SynthKind.of(TreeSummarize(llm=llm)) is SynthKind.TREE_SUMMARIZE is SynthKind.of(DefinedTree(llm=llm))
    assert SynthKind.of(_user_refine()(llm=llm)) is None


def test_a_user_class_named_like_an_engine_component_is_not_one(embed_model: Any) -> None:
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    from accel.adapters.llamaindex.capture import engine_class

    class SentenceTransformerRerank(BaseNodePostprocessor):
        def _postprocess_nodes(self, nodes: list[Any], query_bundle: Any = None) -> list[Any]:
            return nodes

    class PGVectorStore:
        pass

    assert engine_class(SentenceTransformerRerank()) is None and engine_class(PGVectorStore()) is None
    found = engine_class(embed_model)
    assert found is not None and found.role == "embedding"
    assert type(embed_model) is HuggingFaceEmbedding


@pytest.mark.engines
def test_user_synthesizer_named_refine_runs_as_is(pg_index: Any, llm: Any) -> None:
    """At the name comparisons accel lowered the user's `Refine` as LlamaIndex's and dropped its
    `[user]` prefix; now it is opaque and answers as stock, retrieval still lowered."""
    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=2, response_synthesizer=_user_refine()(llm=llm))
    fast = accel.wrap(engine)
    text = fast.explain()
    assert "Refine: response mode not lowered" in text and "Refine on" not in text
    assert "Embed" in text and "Search" in text
    stock, ours = engine.query(QUESTION), fast.query(QUESTION)
    assert stock.response.startswith("[user] ") and ours.response == stock.response


@pytest.mark.engines
def test_stock_refine_is_still_lowered(pg_index: Any, llm: Any, llm_proxy: Any) -> None:
    from llama_index.core.response_synthesizers.refine import Refine

    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=2, response_synthesizer=Refine(llm=llm))
    text = accel.wrap(engine).explain()
    assert "Refine on OpenAILike -> Prefill/Decode" in text and "opaque: none" in text
    compare(engine, llm_proxy, [QUESTION])


@pytest.mark.engines
def test_user_postprocessor_named_like_the_reranker_runs_as_is(pg_index: Any, llm: Any) -> None:
    """A user postprocessor named `SentenceTransformerRerank` (keeping the best node) is run by
    its own code, not taken for the cross-encoder reranker."""
    from llama_index.core.postprocessor.types import BaseNodePostprocessor

    class SentenceTransformerRerank(BaseNodePostprocessor):
        def _postprocess_nodes(self, nodes: list[Any], query_bundle: Any = None) -> list[Any]:
            return sorted(nodes, key=lambda n: -(n.score or 0.0))[:1]

    engine = pg_index.as_query_engine(llm=llm, similarity_top_k=3, node_postprocessors=[SentenceTransformerRerank()])
    fast = accel.wrap(engine)
    text = fast.explain()
    assert "SentenceTransformerRerank: only SentenceTransformerRerank is lowered" in text and "-> Rerank" not in text
    stock, ours = engine.query(QUESTION), fast.query(QUESTION)
    assert len(stock.source_nodes) == 1 and ours.response == stock.response
    assert [n.node.node_id for n in ours.source_nodes] == [n.node.node_id for n in stock.source_nodes]
