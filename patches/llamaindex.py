"""LlamaIndex patch: `BaseQueryEngine.query/aquery` of a `RetrieverQueryEngine` run through
`accel.wrap`.

Each query engine is wrapped once (cached by identity while it lives). Other query engines,
accel's own wrappers (whose `query` is the same `BaseQueryEngine.query`), calls made inside
accel's worker threads and stock fallbacks go to the original methods, so nothing is
accelerated twice or loops.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

METHODS = ("query", "aquery")

_originals: dict[str, Any] = {}
_wrapped: dict[int, tuple[weakref.ref, Any]] = {}
_lock = threading.Lock()


def _accelerated(engine: Any) -> Any | None:
    """The cached wrapped engine, or None when this call must stay stock."""
    from llama_index.core.query_engine import RetrieverQueryEngine

    from accel.adapters.common.bypass import in_stock_call

    if type(engine) is not RetrieverQueryEngine or in_stock_call() or threading.current_thread().name.startswith("accel-"):
        return None
    with _lock:
        entry = _wrapped.get(id(engine))
        if entry is not None and entry[0]() is engine:
            return entry[1]
    import accel

    fast = accel.wrap(engine)
    with _lock:
        _wrapped[id(engine)] = (weakref.ref(engine, lambda _ref, key=id(engine): _wrapped.pop(key, None)), fast)
    return fast


def _make(name: str, original: Any) -> Any:
    if name == "aquery":
        async def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            fast = _accelerated(self)
            if fast is None:
                return await original.__get__(self, type(self))(*args, **kwargs)
            return await fast.aquery(*args, **kwargs)
    else:
        def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            fast = _accelerated(self)
            if fast is None:
                return original.__get__(self, type(self))(*args, **kwargs)
            return fast.query(*args, **kwargs)
    patched.__wrapped__ = original  # type: ignore[attr-defined]
    patched.__name__ = name
    patched.__doc__ = original.__doc__
    return patched


def patch() -> None:
    from llama_index.core.base.base_query_engine import BaseQueryEngine

    with _lock:
        if _originals:
            return
        for name in METHODS:
            original = BaseQueryEngine.__dict__[name]
            _originals[name] = original
            setattr(BaseQueryEngine, name, _make(name, original))


def unpatch() -> None:
    from llama_index.core.base.base_query_engine import BaseQueryEngine

    with _lock:
        for name, original in _originals.items():
            setattr(BaseQueryEngine, name, original)
        _originals.clear()
        _wrapped.clear()


def patched() -> bool:
    return bool(_originals)
