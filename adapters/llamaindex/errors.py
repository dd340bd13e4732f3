"""Exceptions at the adapter boundary (shared with the LangChain adapter: `common.errors`)."""

from accel.adapters.common.errors import stock_error

__all__ = ["stock_error"]
