"""LlamaIndex plug-ins of the engine-call floor (`accel.adapters.common.floor`).

- `HuggingFaceEmbedding`: query and text embeddings, sync and async -> the shared
  sentence-transformers embedder (`embedding`);
- `PGVectorStore.query` / `aquery` (default dense mode) -> the shared pgvector engine
  (`vector_store`);
- `SentenceTransformerRerank._postprocess_nodes` -> the shared cross-encoder (`rerank`);
- `BaseContentBlock.estimate_tokens` for text: counted in place, not on a thread of its own
  (`token_counts`; framework overhead, not an engine call).

`OpenAILike` / `OpenAI` on OpenAI-compatible servers are covered by the common `openai` SDK
plug-in. Importing this package imports no framework: plans import what they need when called.
"""

from accel.adapters.llamaindex.floor import embedding, rerank, token_counts, vector_store

__all__ = ["embedding", "rerank", "token_counts", "vector_store"]
