"""A LangChain RAG stack on the real engines: PGVector tables written by langchain-postgres,
HuggingFaceEmbeddings on the packaged MiniLM, ChatOpenAI / VLLMOpenAI on the tiny model behind
the recording proxy (greedy decoding)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from accel.engines.offline.corpus import stdlib_docs

TINY = "tiny"


def sqlalchemy_url(dsn: str) -> str:
    return dsn.replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture(scope="session")
def embeddings(minilm_path: Path):
    from langchain_huggingface import HuggingFaceEmbeddings

    return HuggingFaceEmbeddings(model_name=str(minilm_path))


@pytest.fixture(scope="session")
def doc_texts() -> list[str]:
    texts = []
    for doc in stdlib_docs(("json", "heapq", "textwrap", "functools")):
        paragraphs = [p.strip() for p in doc.text.split("\n\n") if len(p.strip()) > 80]
        texts += [p[:400] for p in paragraphs[:12]]
    return texts


@pytest.fixture(scope="session")
def vectorstore(pg_dsn: str, embeddings, doc_texts: list[str]):
    from langchain_core.documents import Document
    from langchain_postgres import PGVector

    store = PGVector(embeddings=embeddings, collection_name=f"lc_{uuid.uuid4().hex[:8]}", connection=sqlalchemy_url(pg_dsn), use_jsonb=True)
    store.add_documents([Document(page_content=t, metadata={"n": i, "even": i % 2 == 0}) for i, t in enumerate(doc_texts)])
    return store


@pytest.fixture(scope="session")
def async_vectorstore(vectorstore, pg_dsn: str, embeddings):
    """`vectorstore`'s collection behind an `async_mode=True` PGVector: a store serves either
    LangChain's sync or its async entry points, never both (stock raises AssertionError for the
    other kind, and so does a wrapped chain), so async tests use this one."""
    from langchain_postgres import PGVector

    return PGVector(embeddings=embeddings, collection_name=vectorstore.collection_name,
                    connection=sqlalchemy_url(pg_dsn), use_jsonb=True, async_mode=True)


@pytest.fixture(scope="session")
def chat_model(llm_proxy):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(base_url=llm_proxy.url + "/v1", api_key="EMPTY", model=TINY, temperature=0, max_tokens=12)


@pytest.fixture(scope="session")
def completion_model(llm_proxy):
    from langchain_community.llms import VLLMOpenAI

    return VLLMOpenAI(openai_api_base=llm_proxy.url + "/v1", openai_api_key="EMPTY", model_name=TINY, temperature=0, max_tokens=12)


QUESTIONS = [
    "How do I decode a JSON document?",
    "What does heapq.heappush do?",
    "How can text be wrapped to a width?",
    "What is functools.partial for?",
]


@pytest.fixture
def questions() -> list[str]:
    return list(QUESTIONS)
