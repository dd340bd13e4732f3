"""LlamaIndex "Router Query Engine" guide (docs/examples/query_engine/RouterQueryEngine.ipynb) and
the Selectors module guide (module_guides/querying/router/index.md, "Using selectors as
standalone modules"):

    summary_index = SummaryIndex(nodes)
    vector_index = VectorStoreIndex(nodes)
    list_query_engine = summary_index.as_query_engine(response_mode="tree_summarize", use_async=True)
    vector_query_engine = vector_index.as_query_engine()
    list_tool = QueryEngineTool.from_defaults(query_engine=list_query_engine,
        description="Useful for summarization questions related to Paul Graham eassy on What I Worked On.")
    vector_tool = QueryEngineTool.from_defaults(query_engine=vector_query_engine,
        description="Useful for retrieving specific context from Paul Graham essay on What I Worked On.")
    query_engine = RouterQueryEngine(selector=LLMSingleSelector.from_defaults(),
                                     query_engine_tools=[list_tool, vector_tool])

Changes: the nodes are the starter tutorial's documents split by the default `SentenceSplitter`
(its `Settings`: MiniLM, `OpenAILike` on the test vLLM server), the descriptions name them.
The guide's `PydanticSingleSelector` needs an LLM with function calling; `LLMSingleSelector`
(the guide's other selector) parses the LLM's JSON choice, which the offline model's text is
not, so that router fails the same way stock does; `EmbeddingSingleSelector` (the selectors
guide) routes by embedding similarity and answers.
"""

from __future__ import annotations

from llama_index.core import SimpleDirectoryReader, SummaryIndex, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.query_engine import RouterQueryEngine
from llama_index.core.selectors import EmbeddingSingleSelector, LLMSingleSelector
from llama_index.core.tools import QueryEngineTool

SELECTORS = ("llm", "embedding")


def build(data_dir: str, selector: str = "embedding"):
    documents = SimpleDirectoryReader(data_dir).load_data()
    nodes = SentenceSplitter().get_nodes_from_documents(documents)

    summary_index = SummaryIndex(nodes)
    vector_index = VectorStoreIndex(nodes)

    list_query_engine = summary_index.as_query_engine(response_mode="tree_summarize", use_async=True)
    vector_query_engine = vector_index.as_query_engine()

    list_tool = QueryEngineTool.from_defaults(
        query_engine=list_query_engine,
        description="Useful for summarization questions related to the Python standard library documentation.",
    )
    vector_tool = QueryEngineTool.from_defaults(
        query_engine=vector_query_engine,
        description="Useful for retrieving specific context from the Python standard library documentation.",
    )
    chosen = LLMSingleSelector.from_defaults() if selector == "llm" else EmbeddingSingleSelector.from_defaults()
    return RouterQueryEngine(selector=chosen, query_engine_tools=[list_tool, vector_tool])
