"""Stock LlamaIndex apps (query engines over PGVectorStore, OpenAILike on vLLM)."""
