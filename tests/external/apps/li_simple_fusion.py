"""LlamaIndex example "Simple Fusion Retriever"
(https://developers.llamaindex.ai/python/framework/integrations/retrievers/simple_fusion/, source
run-llama/llama_index docs/docs/examples/retrievers/simple_fusion.ipynb):

    documents_1 = SimpleDirectoryReader(input_files=["../../community/integrations/vector_stores.md"]).load_data()
    documents_2 = SimpleDirectoryReader(input_files=["../../module_guides/storing/vector_stores.md"]).load_data()
    index_1 = VectorStoreIndex.from_documents(documents_1)
    index_2 = VectorStoreIndex.from_documents(documents_2)
    retriever = QueryFusionRetriever(
        [index_1.as_retriever(), index_2.as_retriever()],
        similarity_top_k=2,
        num_queries=4,  # set this to 1 to disable query generation
        use_async=True,
        verbose=True,
        # query_gen_prompt="...",  # we could override the query generation prompt here
    )
    query_engine = RetrieverQueryEngine.from_args(retriever)

Changes from the documented code:
- the OpenAI defaults (`OPENAI_API_KEY`) -> `Settings.llm` / `Settings.embed_model` set as in
  `li_starter` (OpenAILike on the test vLLM server; the packaged MiniLM);
- documents: two pages of LlamaIndex's docs -> two groups of pydoc text files (`input_files`);
- `nest_asyncio.apply()` ("apply nested async to run in a notebook") is not needed outside a
  notebook and is left out;
- optionally (`storage_contexts`), each index is stored in a `PGVectorStore` (as in the Postgres
  Vector Store guide) instead of the default in-memory store, the store accel searches on its
  own engine; without it the indexes are the page's in-memory ones.
"""

from __future__ import annotations

from llama_index.core import SimpleDirectoryReader, VectorStoreIndex
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import QueryFusionRetriever


def build(files_1: list[str], files_2: list[str], storage_contexts=None):
    documents_1 = SimpleDirectoryReader(input_files=files_1).load_data()
    documents_2 = SimpleDirectoryReader(input_files=files_2).load_data()

    if storage_contexts is None:
        index_1 = VectorStoreIndex.from_documents(documents_1)
        index_2 = VectorStoreIndex.from_documents(documents_2)
    else:
        index_1 = VectorStoreIndex.from_documents(documents_1, storage_context=storage_contexts[0])
        index_2 = VectorStoreIndex.from_documents(documents_2, storage_context=storage_contexts[1])

    retriever = QueryFusionRetriever(
        [index_1.as_retriever(), index_2.as_retriever()],
        similarity_top_k=2,
        num_queries=4,  # set this to 1 to disable query generation
        use_async=True,
        verbose=True,
        # query_gen_prompt="...",  # we could override the query generation prompt here
    )

    query_engine = RetrieverQueryEngine.from_args(retriever)
    return query_engine
