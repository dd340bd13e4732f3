"""LangChain integration page "Cross encoder reranker integration"
(https://docs.langchain.com/oss/python/integrations/document_transformers/cross_encoder_reranker,
source langchain-ai/docs src/oss/python/integrations/document_transformers/cross_encoder_reranker.mdx):

    documents = TextLoader("../../how_to/state_of_the_union.txt").load()
    text_splitter = RecursiveCharacterTextSplitter(chunk_size=500, chunk_overlap=100)
    texts = text_splitter.split_documents(documents)
    embeddings = HuggingFaceEmbeddings(model_name="BAAI/bge-m3", encode_kwargs={"normalize_embeddings": True})
    retriever = FAISS.from_documents(texts, embeddings).as_retriever(search_kwargs={"k": 20})

    cross_encoder = HuggingFaceCrossEncoder(model_name="BAAI/bge-reranker-v2-m3")
    reranker = CrossEncoderReranker(model=cross_encoder, top_n=3)
    compression_retriever = ContextualCompressionRetriever(base_compressor=reranker, base_retriever=retriever)
    compressed_docs = compression_retriever.invoke("What is the plan for the economy?")

Changes from the documented code:
- documents: the State of the Union text file -> local pydoc text files (one `TextLoader` each);
- vector store: `FAISS.from_documents(texts, embeddings)` -> `PGVector.from_documents(texts,
  embeddings, ...)` (langchain-postgres, the store accel runs on) on the test Postgres;
- embedding model "BAAI/bge-m3" -> the packaged all-MiniLM-L6-v2 path (same `encode_kwargs`);
- cross-encoder "BAAI/bge-reranker-v2-m3" -> the offline MiniLM cross-encoder path.
"""

from __future__ import annotations

from langchain_classic.retrievers.contextual_compression import ContextualCompressionRetriever
from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
from langchain_community.cross_encoders import HuggingFaceCrossEncoder
from langchain_community.document_loaders import TextLoader
from langchain_huggingface import HuggingFaceEmbeddings
from langchain_postgres import PGVector
from langchain_text_splitters import RecursiveCharacterTextSplitter


def base_retriever(paths: list[str], connection: str, collection_name: str, embed_model_path: str):
    documents = [doc for path in paths for doc in TextLoader(path).load()]
    text_splitter = RecursiveCharacterTextSplitter(chunk_size=500, chunk_overlap=100)
    texts = text_splitter.split_documents(documents)

    embeddings = HuggingFaceEmbeddings(
        model_name=embed_model_path,
        encode_kwargs={"normalize_embeddings": True},
    )
    retriever = PGVector.from_documents(
        texts, embeddings, connection=connection, collection_name=collection_name, use_jsonb=True
    ).as_retriever(
        search_kwargs={"k": 20}
    )
    return retriever


def build(retriever, cross_encoder_path: str):
    cross_encoder = HuggingFaceCrossEncoder(model_name=cross_encoder_path)
    reranker = CrossEncoderReranker(model=cross_encoder, top_n=3)

    compression_retriever = ContextualCompressionRetriever(
        base_compressor=reranker,
        base_retriever=retriever,
    )
    return compression_retriever
