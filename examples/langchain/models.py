"""The LangChain components every example shares, built from a `StackConfig`: a chat model on
the OpenAI-compatible vLLM server (greedy), MiniLM embeddings, a cross-encoder, a PGVector store.

The encoders run in-process unless the config names servers: then embeddings are
`OpenAIEmbeddings` on the embedding server and the cross-encoder asks the rerank server through
the `cohere` SDK (LangChain's own `CohereRerank` always sends `max_tokens_per_doc: null`, which
vLLM refuses, so self-hosted deployments write this small adapter)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..stack import StackConfig, sqlalchemy_url

CHUNK_SIZE = 256
CHUNK_OVERLAP = 30
TRUNCATE = {"truncate_prompt_tokens": 256}
"""vLLM's embeddings option: inputs longer than the embedder's 256 tokens are cut, not refused."""


def chat_model(config: StackConfig, *, max_tokens: int | None = None) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        base_url=config.openai_base_url,
        api_key="EMPTY",
        model=config.model,
        temperature=0.0,
        max_tokens=max_tokens or config.max_tokens,
        max_retries=0,
    )


def embeddings(config: StackConfig) -> Any:
    if config.embed_base_url:
        from langchain_openai import OpenAIEmbeddings

        # the server counts tokens itself (tiktoken's check would need a download and sends token
        # ids) and cuts a chunk at the embedder's 256 tokens, as sentence-transformers does in-process
        return OpenAIEmbeddings(base_url=config.embed_base_url, model=config.embed_model_name, api_key="EMPTY",
                                check_embedding_ctx_length=False, max_retries=0, model_kwargs={"extra_body": TRUNCATE})
    from langchain_huggingface import HuggingFaceEmbeddings

    return HuggingFaceEmbeddings(model_name=config.embed_model, model_kwargs={"device": "cpu"})


def cross_encoder(config: StackConfig) -> Any:
    if config.rerank_base_url:
        from .server_rerank import ServerCrossEncoder

        return ServerCrossEncoder.for_server(config.rerank_base_url, str(config.rerank_model_name))
    from langchain_community.cross_encoders import HuggingFaceCrossEncoder

    return HuggingFaceCrossEncoder(model_name=config.rerank_model, model_kwargs={"device": "cpu"})


def split_documents(documents: Iterable[Mapping[str, Any]]) -> list[Any]:
    """Chunks of 256 characters overlapping by 30, each with a stable id in its metadata."""
    from langchain_core.documents import Document
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP)
    chunks = []
    for doc in documents:
        for n, text in enumerate(splitter.split_text(doc["text"])):
            metadata = {**doc.get("metadata", {}), "doc_id": doc["id"], "chunk_id": f"{doc['id']}#{n}"}
            chunks.append(Document(page_content=text, metadata=metadata))
    return chunks


def vector_store(config: StackConfig, collection: str, embedder: Any, *, fresh: bool = False) -> Any:
    """A PGVector collection over a sync psycopg connection (its async API then is off, so
    stock concurrency for apps on it is `batch`, a thread pool)."""
    from langchain_postgres import PGVector

    return PGVector(
        embeddings=embedder,
        collection_name=collection,
        connection=sqlalchemy_url(config.pg_dsn, "psycopg"),
        use_jsonb=True,
        pre_delete_collection=fresh,
    )


def build_index(config: StackConfig, documents: Iterable[Mapping[str, Any]], collection: str) -> Any:
    """Chunk, embed and ingest `documents` into a fresh collection; returns the store."""
    store = vector_store(config, collection, embeddings(config), fresh=True)
    chunks = split_documents(documents)
    store.add_documents(chunks, ids=row_ids(collection, chunks))
    return store


def row_ids(collection: str, chunks: list[Any]) -> list[str]:
    """PGVector row ids are unique across collections (an upsert keeps a row's collection),
    so each collection's rows get their own ids."""
    return [f"{collection}/{c.metadata['chunk_id']}" for c in chunks]
