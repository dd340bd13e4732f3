"""Stock LangChain apps (LCEL, langchain-classic retrievers, langchain-postgres PGVector)."""
