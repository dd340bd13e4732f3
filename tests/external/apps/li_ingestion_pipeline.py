"""LlamaIndex module guide "Ingestion Pipeline", sections "Usage Pattern", "Connecting to Vector
Databases" and "Async Support"
(https://developers.llamaindex.ai/python/framework/module_guides/loading/ingestion_pipeline/,
source run-llama/llama_index docs/docs/module_guides/loading/ingestion_pipeline/index.md):

    pipeline = IngestionPipeline(
        transformations=[
            SentenceSplitter(chunk_size=25, chunk_overlap=0),
            TitleExtractor(),
            OpenAIEmbedding(),
        ]
    )
    nodes = pipeline.run(documents=[Document.example()])

    vector_store = QdrantVectorStore(client=client, collection_name="test_store")
    pipeline = IngestionPipeline(transformations=[...the same three...], vector_store=vector_store)
    pipeline.run(documents=[Document.example()])
    index = VectorStoreIndex.from_vector_store(vector_store)

    nodes = await pipeline.arun(documents=documents)

The transformations, `Document.example()` and the calls are as written. Changes:
- `OpenAIEmbedding()` -> `HuggingFaceEmbedding` on the packaged MiniLM path;
- `TitleExtractor()` takes its LLM from `Settings.llm` (OpenAI by default): set by the caller as
  in `li_starter` (OpenAILike on the test vLLM server);
- `QdrantVectorStore` (qdrant-client, in memory) -> `PGVectorStore` on the test Postgres, the
  store accel writes through (embed_dim 384).
"""

from __future__ import annotations

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.extractors import TitleExtractor
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.embeddings.huggingface import HuggingFaceEmbedding


def pipeline(embed_model_path: str, vector_store=None) -> IngestionPipeline:
    # create the pipeline with transformations
    pipeline = IngestionPipeline(
        transformations=[
            SentenceSplitter(chunk_size=25, chunk_overlap=0),
            TitleExtractor(),
            HuggingFaceEmbedding(model_name=embed_model_path),
        ],
        vector_store=vector_store,
    )
    return pipeline


def run(pipeline):
    # run the pipeline
    nodes = pipeline.run(documents=[Document.example()])
    return nodes


async def arun(pipeline):
    documents = [Document.example()]
    nodes = await pipeline.arun(documents=documents)
    return nodes


def index_from(vector_store):
    # Create your index
    index = VectorStoreIndex.from_vector_store(vector_store)
    return index
