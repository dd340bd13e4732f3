"""Exceptions at the adapter boundary (shared with the LangChain adapter: `common.errors`)."""

from accel.adapters.common.errors import stock_embed_error, stock_error, stock_llm_error, stock_vectordb_error

__all__ = ["stock_embed_error", "stock_error", "stock_llm_error", "stock_vectordb_error"]
