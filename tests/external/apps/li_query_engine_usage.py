"""LlamaIndex module guide "Query Engine: Usage Pattern" and "Response Modes"
(https://developers.llamaindex.ai/python/framework/module_guides/deploying/query_engine/usage_pattern/
and .../response_modes/, source run-llama/llama_index
docs/docs/module_guides/deploying/query_engine/usage_pattern.md and response_modes.md):

    query_engine = index.as_query_engine(response_mode="tree_summarize", verbose=True)   # High-Level API

    retriever = VectorIndexRetriever(index=index, similarity_top_k=2)                     # Low-Level Composition API
    response_synthesizer = get_response_synthesizer(response_mode="tree_summarize")
    query_engine = RetrieverQueryEngine(retriever=retriever, response_synthesizer=response_synthesizer)

    query_engine = index.as_query_engine(streaming=True)                                   # Streaming
    streaming_response = query_engine.query("What did the author do growing up?")
    streaming_response.print_response_stream()

    class RAGQueryEngine(CustomQueryEngine):                                               # Custom Query Engine
        retriever: BaseRetriever
        response_synthesizer: BaseSynthesizer
        def custom_query(self, query_str: str):
            nodes = self.retriever.retrieve(query_str)
            response_obj = self.response_synthesizer.synthesize(query_str, nodes)
            return response_obj

The response modes are the ones the Response Modes page lists (`refine`, `compact`,
`tree_summarize`, `simple_summarize`, `no_text`, `accumulate`, `compact_accumulate`), passed as
the page's `response_mode=`. The code is as written; the `index` the page assumes is built by
the caller (here the starter tutorial's, with its changes: pydoc files, MiniLM, OpenAILike on
the test vLLM server through `Settings`). The custom engine is constructed with the
retriever and synthesizer of the low-level example.
"""

from __future__ import annotations

from llama_index.core import get_response_synthesizer
from llama_index.core.query_engine import CustomQueryEngine, RetrieverQueryEngine
from llama_index.core.response_synthesizers import BaseSynthesizer
from llama_index.core.retrievers import BaseRetriever, VectorIndexRetriever

RESPONSE_MODES = ("refine", "compact", "tree_summarize", "simple_summarize", "no_text", "accumulate", "compact_accumulate")


def high_level(index, response_mode: str = "tree_summarize"):
    query_engine = index.as_query_engine(
        response_mode=response_mode,
        verbose=True,
    )
    return query_engine


def low_level(index):
    # configure retriever
    retriever = VectorIndexRetriever(
        index=index,
        similarity_top_k=2,
    )

    # configure response synthesizer
    response_synthesizer = get_response_synthesizer(
        response_mode="tree_summarize",
    )

    # assemble query engine
    query_engine = RetrieverQueryEngine(
        retriever=retriever,
        response_synthesizer=response_synthesizer,
    )
    return query_engine


def streaming(index):
    query_engine = index.as_query_engine(
        streaming=True,
    )
    return query_engine


class RAGQueryEngine(CustomQueryEngine):
    """RAG Query Engine."""

    retriever: BaseRetriever
    response_synthesizer: BaseSynthesizer

    def custom_query(self, query_str: str):
        nodes = self.retriever.retrieve(query_str)
        response_obj = self.response_synthesizer.synthesize(query_str, nodes)
        return response_obj


def custom(index):
    low = low_level(index)
    return RAGQueryEngine(retriever=low.retriever, response_synthesizer=low._response_synthesizer)
