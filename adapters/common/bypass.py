"""A marker for code that must run the stock framework path even when auto-instrumentation
patches it (a wrapped app's fallback to its original, the original inside opaque nodes)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_stock = contextvars.ContextVar("accel_stock_call", default=False)


@contextlib.contextmanager
def stock_call() -> Iterator[None]:
    token = _stock.set(True)
    try:
        yield
    finally:
        _stock.reset(token)


def in_stock_call() -> bool:
    return _stock.get()
