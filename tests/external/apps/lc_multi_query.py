"""LangChain how-to "How to use the MultiQueryRetriever", section "Simple usage" (v0.2/v0.3
docs, https://python.langchain.com/docs/how_to/MultiQueryRetriever/, source
langchain-ai/langchain docs/docs/how_to/MultiQueryRetriever.ipynb):

    loader = WebBaseLoader("https://lilianweng.github.io/posts/2023-06-23-agent/")
    data = loader.load()
    text_splitter = RecursiveCharacterTextSplitter(chunk_size=500, chunk_overlap=0)
    splits = text_splitter.split_documents(data)
    embedding = OpenAIEmbeddings()
    vectordb = Chroma.from_documents(documents=splits, embedding=embedding)

    llm = ChatOpenAI(temperature=0)
    retriever_from_llm = MultiQueryRetriever.from_llm(retriever=vectordb.as_retriever(), llm=llm)
    unique_docs = retriever_from_llm.invoke(question)

Changes from the documented code:
- documents: `WebBaseLoader` on the blog post -> `TextLoader` on local pydoc text files;
- vector store: `Chroma.from_documents` -> `PGVector.from_documents` (langchain-postgres) on the
  test Postgres (`connection`, a fresh `collection_name`, `use_jsonb=True`);
- embeddings: `OpenAIEmbeddings()` -> `HuggingFaceEmbeddings(model_name=<packaged MiniLM path>)`;
- `from langchain.retrievers.multi_query import ...` -> `from langchain_classic.retrievers.multi_query
  import ...` (moved to langchain-classic in LangChain 1.0, the installed version);
- llm: `ChatOpenAI(temperature=0)` -> the same on the test vLLM server (`base_url`,
  `api_key="EMPTY"`, the served model) with a small `max_tokens`.
"""

from __future__ import annotations

from langchain_classic.retrievers.multi_query import MultiQueryRetriever
from langchain_community.document_loaders import TextLoader
from langchain_huggingface import HuggingFaceEmbeddings
from langchain_openai import ChatOpenAI
from langchain_postgres import PGVector
from langchain_text_splitters import RecursiveCharacterTextSplitter


def vector_db(paths: list[str], connection: str, collection_name: str, embed_model_path: str):
    # Load blog post
    data = [doc for path in paths for doc in TextLoader(path).load()]

    # Split
    text_splitter = RecursiveCharacterTextSplitter(chunk_size=500, chunk_overlap=0)
    splits = text_splitter.split_documents(data)

    # VectorDB
    embedding = HuggingFaceEmbeddings(model_name=embed_model_path)
    vectordb = PGVector.from_documents(
        documents=splits, embedding=embedding, connection=connection, collection_name=collection_name, use_jsonb=True
    )
    return vectordb


def build(vectordb, base_url: str, model: str, max_tokens: int = 48):
    llm = ChatOpenAI(temperature=0, model=model, base_url=base_url, api_key="EMPTY", max_tokens=max_tokens)
    retriever_from_llm = MultiQueryRetriever.from_llm(
        retriever=vectordb.as_retriever(), llm=llm
    )
    return retriever_from_llm
