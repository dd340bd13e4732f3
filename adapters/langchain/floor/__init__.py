"""LangChain plug-ins of the engine-call floor (`accel.adapters.common.floor`).

- `HuggingFaceEmbeddings` (langchain-huggingface): `_embed` (behind `embed_documents` and
  `embed_query`), `aembed_documents`, `aembed_query` -> the shared sentence-transformers embedder;
- langchain-postgres `PGVector`: `similarity_search_with_score_by_vector` and its async twin,
  behind every `similarity_search*` entry point -> the shared pgvector engine;
- langchain-community `HuggingFaceCrossEncoder.score` -> the shared cross-encoder reranker.

Chat and completion models on OpenAI-compatible servers (`ChatOpenAI`, `OpenAI`, `VLLMOpenAI`)
are covered by the common `openai` SDK plug-in. Importing this package imports no framework:
plans import what they need when first called.
"""

from accel.adapters.langchain.floor import cross_encoder, embeddings, pgvector

__all__ = ["cross_encoder", "embeddings", "pgvector"]
