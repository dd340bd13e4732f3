"""The LlamaIndex components every example shares, built from a `StackConfig`: OpenAILike on
the vLLM server (greedy completions), MiniLM embeddings, a reranker, a PGVectorStore index.

The encoders run in-process unless the config names servers: then `OpenAILikeEmbedding` on the
embedding server and the `CohereRerank` postprocessor on the rerank server."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import Document
from llama_index.embeddings.huggingface import HuggingFaceEmbedding
from llama_index.llms.openai_like import OpenAILike
from llama_index.vector_stores.postgres import PGVectorStore

from ..stack import StackConfig, sqlalchemy_url

CHUNK_SIZE = 256
CHUNK_OVERLAP = 30
EMBED_DIM = 384


def llm(config: StackConfig, *, max_tokens: int | None = None, chat: bool = False) -> OpenAILike:
    """Greedy completions (`chat=True`: the chat API, the server applying the model's chat template)."""
    return OpenAILike(
        model=config.model,
        api_base=config.openai_base_url,
        api_key="EMPTY",
        max_tokens=max_tokens or config.max_tokens,
        temperature=0.0,
        context_window=config.context_window,
        is_chat_model=chat,
        max_retries=0,
    )


def embed_model(config: StackConfig) -> Any:
    if config.embed_base_url:
        from llama_index.embeddings.openai_like import OpenAILikeEmbedding

        # chunks of 256 tokens of LlamaIndex's tokenizer can exceed MiniLM's 256: the server cuts
        # them (vLLM's truncate_prompt_tokens), as sentence-transformers does in-process
        return OpenAILikeEmbedding(model_name=str(config.embed_model_name), api_base=config.embed_base_url,
                                   api_key="EMPTY", max_retries=0,
                                   additional_kwargs={"extra_body": {"truncate_prompt_tokens": 256}})
    return HuggingFaceEmbedding(model_name=config.embed_model, device="cpu")


def reranker(config: StackConfig, top_n: int) -> Any:
    """A node postprocessor keeping the `top_n` best nodes by cross-encoder score."""
    if config.rerank_base_url:
        from llama_index.postprocessor.cohere_rerank import CohereRerank

        return CohereRerank(top_n=top_n, model=str(config.rerank_model_name), api_key="EMPTY",
                            base_url=config.rerank_base_url.rstrip("/").removesuffix("/v1"))
    from llama_index.core.postprocessor import SentenceTransformerRerank

    return SentenceTransformerRerank(model=config.rerank_model, top_n=top_n, device="cpu")


def build_index(config: StackConfig, documents: Iterable[Mapping[str, Any]], table: str) -> VectorStoreIndex:
    """Split (256 tokens, overlap 30), embed and ingest `documents` into a fresh table."""
    store = PGVectorStore.from_params(
        connection_string=sqlalchemy_url(config.pg_dsn, "psycopg2"),
        async_connection_string=sqlalchemy_url(config.pg_dsn, "asyncpg"),
        table_name=table,
        embed_dim=EMBED_DIM,
    )
    store.clear()
    docs = [Document(id_=d["id"], text=d["text"], metadata=dict(d.get("metadata", {}))) for d in documents]
    storage = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex.from_documents(
        docs,
        storage_context=storage,
        embed_model=embed_model(config),
        transformations=[SentenceSplitter(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP)],
    )
