"""A LangChain chain and a LlamaIndex query engine on the same vLLM server, embedder, reranker
and database share one session engine each, so their requests can batch together."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("langchain_postgres")

import accel  # noqa: E402
from accel.adapters.common.dropin import state_of  # noqa: E402
from accel.engines.llm.server import ServerHandle  # noqa: E402

TEXTS = ["The heron sleeps through the winter storm.", "Our kettle hums during a quiet morning.",
         "The old bridge glows in the long night.", "Fresh bread waits out the market day."]


def _langchain_app(pg_dsn: str, base_url: str, model: str, minilm_path: Path, reranker_dir: Path) -> Any:
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
    from langchain_community.cross_encoders import HuggingFaceCrossEncoder
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_huggingface import HuggingFaceEmbeddings
    from langchain_openai import ChatOpenAI
    from langchain_postgres import PGVector

    store = PGVector(embeddings=HuggingFaceEmbeddings(model_name=str(minilm_path)), use_jsonb=True,
                     collection_name=f"lc_{uuid.uuid4().hex[:8]}",
                     connection=pg_dsn.replace("postgresql://", "postgresql+psycopg://", 1))
    store.add_texts(TEXTS)
    retriever = ContextualCompressionRetriever(
        base_compressor=CrossEncoderReranker(model=HuggingFaceCrossEncoder(model_name=str(reranker_dir)), top_n=2),
        base_retriever=store.as_retriever(search_kwargs={"k": 3}))
    prompt = ChatPromptTemplate.from_messages([("system", "Context:\n{context}"), ("human", "{question}")])
    llm = ChatOpenAI(base_url=base_url, api_key="EMPTY", model=model, temperature=0, max_tokens=8)
    return {"context": retriever | (lambda docs: "\n".join(d.page_content for d in docs)),
            "question": RunnablePassthrough()} | prompt | llm


def _llamaindex_app(pg_dsn: str, base_url: str, model: str, minilm_path: Path, reranker_dir: Path) -> Any:
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.postprocessor import SentenceTransformerRerank
    from llama_index.core.schema import TextNode
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.llms.openai_like import OpenAILike
    from llama_index.vector_stores.postgres import PGVectorStore

    store = PGVectorStore.from_params(
        connection_string=pg_dsn.replace("postgresql://", "postgresql+psycopg2://", 1),
        async_connection_string=pg_dsn.replace("postgresql://", "postgresql+asyncpg://", 1),
        table_name=f"li_{uuid.uuid4().hex[:8]}", embed_dim=384)
    index = VectorStoreIndex([TextNode(text=t) for t in TEXTS], storage_context=StorageContext.from_defaults(vector_store=store),
                             embed_model=HuggingFaceEmbedding(model_name=str(minilm_path), device="cpu"))
    llm = OpenAILike(model=model, api_base=base_url, api_key="EMPTY", max_tokens=8, temperature=0.0,
                     context_window=2048, is_chat_model=True)
    rerank = SentenceTransformerRerank(model=str(reranker_dir), top_n=2, device="cpu")
    return index.as_query_engine(llm=llm, similarity_top_k=3, node_postprocessors=[rerank])


@pytest.mark.engines
def test_both_frameworks_share_one_engine_per_server_model_and_database(
        pg_dsn: str, llm_proxy: Any, vllm_server: ServerHandle, minilm_path: Path, reranker_dir: Path) -> None:
    args = (pg_dsn, llm_proxy.url + "/v1", vllm_server.model, minilm_path, reranker_dir)
    chain, query_engine = accel.wrap(_langchain_app(*args)), accel.wrap(_llamaindex_app(*args))
    lowered = state_of(query_engine).helper
    assert state_of(chain).session is lowered._session
    langchain = {node.kind.name: node.engine for node in chain.template.nodes if node.engine}
    llamaindex = {node.kind.name: node.engine for node in lowered._retrieval_template().nodes if node.engine}
    llamaindex["DECODE"] = lowered._synthesis.engine_name
    assert set(langchain) >= {"EMBED", "SEARCH", "RERANK", "DECODE"}
    assert {kind: langchain[kind] for kind in llamaindex} == llamaindex
    assert chain.invoke(TEXTS[0]).content and query_engine.query(TEXTS[0]).response
