"""LlamaIndex guide "Postgres Vector Store" (llama-index-vector-stores-postgres)
(https://developers.llamaindex.ai/python/framework/integrations/vector_stores/postgres/, source
run-llama/llama_index docs/docs/examples/vector_stores/postgres.ipynb), sections "Create the
index", "Querying existing index", "Hybrid Search" and "Improving hybrid search with
QueryFusionRetriever":

    documents = SimpleDirectoryReader("./data/paul_graham").load_data()
    vector_store = PGVectorStore.from_params(database=db_name, host=url.host, password=url.password,
        port=url.port, user=url.username, table_name="paul_graham_essay", embed_dim=1536,
        hnsw_kwargs={"hnsw_m": 16, "hnsw_ef_construction": 64, "hnsw_ef_search": 40,
                     "hnsw_dist_method": "vector_cosine_ops"})
    storage_context = StorageContext.from_defaults(vector_store=vector_store)
    index = VectorStoreIndex.from_documents(documents, storage_context=storage_context, show_progress=True)
    query_engine = index.as_query_engine()

    index = VectorStoreIndex.from_vector_store(vector_store=vector_store)     # existing index
    query_engine = index.as_query_engine()

    hybrid_vector_store = PGVectorStore.from_params(..., table_name="paul_graham_essay_hybrid_search",
        embed_dim=1536, hybrid_search=True, text_search_config="english", hnsw_kwargs={...})
    hybrid_index = VectorStoreIndex.from_documents(documents, storage_context=StorageContext.from_defaults(vector_store=hybrid_vector_store))
    hybrid_query_engine = hybrid_index.as_query_engine(vector_store_query_mode="hybrid", sparse_top_k=2)

    vector_retriever = hybrid_index.as_retriever(vector_store_query_mode="default", similarity_top_k=5)
    text_retriever = hybrid_index.as_retriever(vector_store_query_mode="sparse", similarity_top_k=5)
    retriever = QueryFusionRetriever([vector_retriever, text_retriever], similarity_top_k=5,
        num_queries=1, mode="relative_score", use_async=False)
    response_synthesizer = CompactAndRefine()
    query_engine = RetrieverQueryEngine(retriever=retriever, response_synthesizer=response_synthesizer)

Changes from the documented code:
- the OpenAI defaults (`OPENAI_API_KEY`: OpenAI embeddings and LLM) -> `Settings.embed_model` /
  `Settings.llm` set as in `li_starter` (MiniLM; OpenAILike on the test vLLM server), so
  `embed_dim=1536` (OpenAI's) -> 384 (MiniLM's);
- connection: `from_params(database=, host=, password=, port=, user=)` on a docker Postgres ->
  `from_params(connection_string=, async_connection_string=)` (also `from_params` arguments)
  on the test Postgres, which listens on a unix socket; the guide's `DROP/CREATE DATABASE`
  step is skipped (the test server's database is fresh); table names get a unique suffix;
- documents: Paul Graham's essay -> a folder of pydoc text files.
"""

from __future__ import annotations

from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.response_synthesizers import CompactAndRefine
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.vector_stores.postgres import PGVectorStore

HNSW_KWARGS = {
    "hnsw_m": 16,
    "hnsw_ef_construction": 64,
    "hnsw_ef_search": 40,
    "hnsw_dist_method": "vector_cosine_ops",
}


def connection_strings(dsn: str) -> dict[str, str]:
    """A libpq URI as the sync (psycopg2) and async (asyncpg) SQLAlchemy URLs `from_params` takes."""
    return {
        "connection_string": dsn.replace("postgresql://", "postgresql+psycopg2://", 1),
        "async_connection_string": dsn.replace("postgresql://", "postgresql+asyncpg://", 1),
    }


def create_index(data_dir: str, dsn: str, table_name: str):
    documents = SimpleDirectoryReader(data_dir).load_data()
    vector_store = PGVectorStore.from_params(
        **connection_strings(dsn),
        table_name=table_name,
        embed_dim=384,  # MiniLM embedding dimension
        hnsw_kwargs=HNSW_KWARGS,
    )

    storage_context = StorageContext.from_defaults(vector_store=vector_store)
    index = VectorStoreIndex.from_documents(
        documents, storage_context=storage_context, show_progress=True
    )
    query_engine = index.as_query_engine()
    return query_engine


def existing_index(dsn: str, table_name: str):
    vector_store = PGVectorStore.from_params(
        **connection_strings(dsn),
        table_name=table_name,
        embed_dim=384,  # MiniLM embedding dimension
        hnsw_kwargs=HNSW_KWARGS,
    )

    index = VectorStoreIndex.from_vector_store(vector_store=vector_store)
    query_engine = index.as_query_engine()
    return query_engine


def hybrid_index(data_dir: str, dsn: str, table_name: str):
    documents = SimpleDirectoryReader(data_dir).load_data()
    hybrid_vector_store = PGVectorStore.from_params(
        **connection_strings(dsn),
        table_name=table_name,
        embed_dim=384,  # MiniLM embedding dimension
        hybrid_search=True,
        text_search_config="english",
        hnsw_kwargs=HNSW_KWARGS,
    )

    storage_context = StorageContext.from_defaults(
        vector_store=hybrid_vector_store
    )
    hybrid_index = VectorStoreIndex.from_documents(
        documents, storage_context=storage_context
    )
    return hybrid_index


def hybrid_query_engine(hybrid_index):
    hybrid_query_engine = hybrid_index.as_query_engine(
        vector_store_query_mode="hybrid", sparse_top_k=2
    )
    return hybrid_query_engine


def fusion_query_engine(hybrid_index):
    vector_retriever = hybrid_index.as_retriever(
        vector_store_query_mode="default",
        similarity_top_k=5,
    )
    text_retriever = hybrid_index.as_retriever(
        vector_store_query_mode="sparse",
        similarity_top_k=5,  # interchangeable with sparse_top_k in this context
    )
    retriever = QueryFusionRetriever(
        [vector_retriever, text_retriever],
        similarity_top_k=5,
        num_queries=1,  # set this to 1 to disable query generation
        mode="relative_score",
        use_async=False,
    )

    response_synthesizer = CompactAndRefine()
    query_engine = RetrieverQueryEngine(
        retriever=retriever,
        response_synthesizer=response_synthesizer,
    )
    return query_engine
